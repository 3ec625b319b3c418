"""Id sequences: a random start on every run, then increment with wrap."""

from __future__ import annotations

import random
from collections.abc import Container

from raetlike.wire.tags import REQUEST_BIT

__all__ = ["IdSequence", "default_rng"]

_LOW_BITS = REQUEST_BIT - 1


def default_rng() -> random.Random:
    """An OS-seeded generator, so first ids differ on every start."""
    return random.SystemRandom()


class IdSequence:
    """31-bit counters, either channel ids (top bit 0) or request ids (top bit 1)."""

    __slots__ = ("_high", "_next")

    def __init__(self, rng: random.Random, *, request_ids: bool) -> None:
        """Start at a random point of the space chosen by ``request_ids``."""
        self._high = REQUEST_BIT if request_ids else 0
        self._next = rng.getrandbits(31)

    def take(self, in_use: Container[int] = ()) -> int:
        """The next id not in ``in_use``; the low 31 bits wrap from 2**31 - 1 to 0."""
        while True:
            value = self._high | self._next
            self._next = (self._next + 1) & _LOW_BITS
            if value not in in_use:
                return value
