"""Deadlines on a lazy heap: the stack's timers, owned by the stack, knowing nothing of it.

Each key has at most one pending deadline that matters, its earliest: pushing a key again
at that time or later adds nothing (its owner, woken at the earlier time, pushes its real
deadline again then), and pushing it earlier adds an entry that supersedes the older one.
A superseded or forgotten entry only costs one early wake or nothing; once the heap holds
more than twice the keys pending (and 64), it is rebuilt from those alone, so it never holds
more than ``2 * pending + 64`` entries (before, every received segment pushed one and stale
entries stayed until due: 7,000 segments, 7,000 entries).  Keys are compared by identity of
the pair ``(deadline, order)``: they need not be orderable, only hashable.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K")

_SLACK = 64  # entries beyond twice the pending keys before the heap is rebuilt


class Deadlines(Generic[K]):
    """Keys due at times: :meth:`push` them, read the :meth:`earliest`, take what is
    :meth:`due`.  The owner of a key woken before its deadline pushes it again."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._pending: dict[K, tuple[float, int]] = {}  # each key's entry that counts

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: float, key: K) -> None:
        """Wake for ``key`` at ``at``, unless it is to wake at ``at`` or earlier already."""
        pending = self._pending.get(key)
        if pending is not None and pending[0] <= at:
            return
        order = next(self._order)
        self._pending[key] = (at, order)
        heap = self._heap
        heapq.heappush(heap, (at, order, key))
        if len(heap) > 2 * len(self._pending) + _SLACK:
            self._compact()

    def forget(self, key: K) -> None:
        """``key`` wants no wake any more (its entry is left to the next rebuild)."""
        self._pending.pop(key, None)

    def _compact(self) -> None:
        """Keep only the entry that counts of each pending key."""
        pending = self._pending
        self._heap = [entry for entry in self._heap
                      if pending.get(entry[2]) == (entry[0], entry[1])]
        heapq.heapify(self._heap)

    def _pop(self) -> K:
        _at, order, key = heapq.heappop(self._heap)
        pending = self._pending.get(key)
        if pending is not None and pending[1] == order:
            del self._pending[key]
        return key

    def earliest(self, live: Callable[[K], bool]) -> float | None:
        """The first deadline of a key ``live`` still accepts (dropping those it does not
        from the front); None when none is left."""
        heap = self._heap
        while heap and not live(heap[0][2]):
            self._pop()
        return heap[0][0] if heap else None

    def due(self, now: float) -> dict[K, None]:
        """Take every entry due by ``now``: its keys, once each, in deadline order."""
        heap = self._heap
        keys: dict[K, None] = {}
        while heap and heap[0][0] <= now:
            keys[self._pop()] = None
        return keys
