"""Deadlines on a lazy heap: the stack's timers, owned by the stack, knowing nothing of it.

Pushing a key again with a later deadline leaves the older entry in the heap; a stale
entry (moved later, or its key gone) only costs one early wake.  Keys are compared by
identity of the pair ``(deadline, order)``: they need not be orderable.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K")


class Deadlines(Generic[K]):
    """Keys due at times: :meth:`push` them, read the :meth:`earliest`, take what is
    :meth:`due`."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: float, key: K) -> None:
        """Wake for ``key`` at ``at`` (an earlier entry of it stays: see the module doc)."""
        heapq.heappush(self._heap, (at, next(self._order), key))

    def earliest(self, live: Callable[[K], bool]) -> float | None:
        """The first deadline of a key ``live`` still accepts (dropping those it does not
        from the front); None when none is left."""
        heap = self._heap
        while heap and not live(heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now: float) -> dict[K, None]:
        """Take every entry due by ``now``: its keys, once each, in deadline order."""
        heap = self._heap
        keys: dict[K, None] = {}
        while heap and heap[0][0] <= now:
            keys[heapq.heappop(heap)[2]] = None
        return keys
