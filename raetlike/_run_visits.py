"""Which of a loop's *alone* drivers to visit this round (raetlike.run).

A driver added with ``Loop.add(driver, alone=True)`` is one whose stack only
its own socket, its own timers, its own event handler and callers of
``Loop.touch`` command.  The loop then visits it -- flushes it, asks its
timer, fires it, hands its events over -- only in rounds when one of those
happened, and keeps its deadline on a heap: a loop of 10,000 idle estates
costs a round what its busy ones cost, not 10,000 visits (docs/drivers.md,
"Many stacks on one loop").

The state here has one owner, :class:`Visits`; the loop asks it what to visit
and tells it what it touched.  Entries are the loop's (they have ``driver``,
``stack``, ``timer`` and ``filed``).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

__all__ = ["Visits"]


class Visits:
    """Touched alone entries (to flush, to re-time) and the heap of their deadlines."""

    __slots__ = ("_heap", "_order", "live", "to_dispatch", "to_send", "to_time")

    def __init__(self) -> None:
        self.to_send: dict[int, Any] = {}
        """Entries to flush this round (touched since the last flush), by descriptor."""
        self.to_time: dict[int, Any] = {}
        """Entries whose deadline may have changed, filed on the heap at the next ``file``."""
        self.to_dispatch: dict[int, Any] = {}
        """Entries whose stacks may have events for their handler."""
        self.live = 0
        """Alone entries the loop holds (to size the heap's compaction)."""
        self._heap: list[tuple[float, int, Any]] = []
        self._order = itertools.count()  # ties: no entry is ever compared

    def touch(self, entry: Any) -> None:
        """``entry``'s stack may have something to send, a new deadline or events."""
        self.to_send[entry.fd] = entry
        self.to_time[entry.fd] = entry
        self.to_dispatch[entry.fd] = entry

    def flushed(self, entry: Any) -> None:
        """``entry`` was flushed: sending may have raised events for its handler."""
        self.to_dispatch[entry.fd] = entry

    def forget(self, entry: Any) -> None:
        """``entry`` left the loop: no visit, and its heap entry is stale."""
        self.to_send.pop(entry.fd, None)
        self.to_time.pop(entry.fd, None)
        self.to_dispatch.pop(entry.fd, None)
        entry.filed = None

    def take_to_send(self) -> list[Any]:
        """The entries to flush now (they will be re-timed at the next ``file``)."""
        if not self.to_send:
            return []
        sending = list(self.to_send.values())
        self.to_send.clear()
        self.to_time.update((entry.fd, entry) for entry in sending)
        return sending

    def file(self) -> None:
        """Ask the touched entries' stacks for their timers and put them on the heap (an entry
        whose timer moved leaves a stale heap entry behind, skipped when it comes up)."""
        if not self.to_time:
            return
        heap, order = self._heap, self._order
        for entry in self.to_time.values():
            timer = entry.timer = entry.stack.get_timer()
            if timer is None:
                entry.filed = None
            elif timer != entry.filed:
                entry.filed = timer
                heapq.heappush(heap, (timer, next(order), entry))
        self.to_time.clear()
        if len(heap) > 4 * self.live + 64:  # mostly stale: keep only the current ones
            current = {id(entry): (at, n, entry) for at, n, entry in heap if entry.filed == at}
            self._heap = list(current.values())
            heapq.heapify(self._heap)

    def earliest(self) -> float | None:
        """The earliest current deadline (``file`` first)."""
        heap = self._heap
        while heap:
            at, _, entry = heap[0]
            if entry.filed == at:
                return at
            heapq.heappop(heap)
        return None

    def due(self, now: float) -> list[Any]:
        """The entries whose deadline came, off the heap (and touched: visit them)."""
        heap, fired = self._heap, []
        while heap and heap[0][0] <= now:
            at, _, entry = heapq.heappop(heap)
            if entry.filed != at:
                continue
            entry.filed = None
            fired.append(entry)
            self.touch(entry)
        return fired
