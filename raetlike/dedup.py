"""Receiver-side duplicate filter: a window of 32-bit message ids.

A :class:`SeenWindow` remembers the highest id seen (``max_seen``) and the
ids below it that have *not* been seen (the complement), so in-order traffic
costs nothing.  Ids are compared in serial-number arithmetic (RFC 1982): an
id is ahead of ``max_seen`` when ``(id - max_seen) mod 2**32 < 2**31``.

The rule for old ids: an id more than ``window`` below ``max_seen`` is
treated as already seen and refused.  So memory is bounded: the complement
holds at most ``window`` ids.

Before the first id nothing has been seen; ids below the first one (within the
window) are new.  They are tracked lazily: ``low`` marks the bottom of the
explicitly tracked range ``[low, max_seen]``; ids within the window below
``low`` have never been seen.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import OrderedDict
from functools import lru_cache

from raetlike.errors import LocalProtocolError

__all__ = ["ID_MODULUS", "BitWindow", "RangeWindow", "SeenWindow"]

ID_MODULUS = 1 << 32
"""Message ids are 32-bit and wrap around."""

_HALF = ID_MODULUS >> 1
_MAX_WINDOW = 1 << 30


class SeenWindow:
    """Tells new message ids from repeats, in bounded memory."""

    __slots__ = ("_gaps", "_low", "_max_seen", "_started", "window")

    def __init__(self, window: int = 4096) -> None:
        """A window that remembers up to ``window`` ids below the highest seen."""
        if not 1 <= window <= _MAX_WINDOW:
            raise LocalProtocolError(f"window must be between 1 and {_MAX_WINDOW}")
        self.window = window
        self._started = False
        self._max_seen = 0
        self._low = 0
        # Unseen ids in [low, max_seen), in ascending serial order.
        self._gaps: OrderedDict[int, None] = OrderedDict()

    @property
    def max_seen(self) -> int | None:
        """The highest id seen so far (in serial order), None before the first."""
        return self._max_seen if self._started else None

    @property
    def unseen(self) -> frozenset[int]:
        """Ids tracked below ``max_seen`` and not seen yet (never more than ``window``)."""
        return frozenset(self._gaps)

    def _behind(self, message_id: int) -> int:
        """How far ``message_id`` lies below max_seen, mod 2**32."""
        return (self._max_seen - message_id) % ID_MODULUS

    def check_and_mark(self, message_id: int) -> bool:
        """True if ``message_id`` is new (and now marked seen), False for a repeat.

        Ids more than ``window`` below the highest seen count as repeats.
        """
        if not 0 <= message_id < ID_MODULUS:
            raise LocalProtocolError(f"message id {message_id} is not 32-bit")
        if not self._started:
            self._started = True
            self._max_seen = self._low = message_id
            return True
        ahead = (message_id - self._max_seen) % ID_MODULUS
        if ahead == 1 and not self._gaps:  # in order, nothing missing: _advance's result
            self._max_seen = message_id
            if (message_id - self._low) % ID_MODULUS > self.window:
                self._low = (message_id - self.window) % ID_MODULUS
            return True
        if ahead == 0:
            return False
        if ahead < _HALF:
            self._advance(message_id, ahead)
            return True
        return self._mark_behind(message_id, ID_MODULUS - ahead)

    def _mark_behind(self, message_id: int, behind: int) -> bool:
        """Check and mark ``message_id``, ``behind`` below max_seen."""
        if behind > self.window:
            return False
        if behind <= self._behind(self._low):
            if message_id in self._gaps:
                del self._gaps[message_id]
                return True
            return False
        # Below low: never seen.  Track everything between it and low as unseen.
        step = self._low
        while True:
            step = (step - 1) % ID_MODULUS
            if step == message_id:
                break
            self._gaps[step] = None
            self._gaps.move_to_end(step, last=False)
        self._low = message_id
        return True

    def _advance(self, message_id: int, ahead: int) -> None:
        """Make ``message_id`` the new max_seen, ``ahead`` above the old one."""
        old = self._max_seen
        first_gap = (old + 1) if ahead - 1 <= self.window else (message_id - self.window)
        gap = first_gap % ID_MODULUS
        while gap != message_id:
            self._gaps[gap] = None
            gap = (gap + 1) % ID_MODULUS
        self._max_seen = message_id
        if self._behind(self._low) > self.window:
            self._low = (message_id - self.window) % ID_MODULUS
        while self._gaps:
            oldest = next(iter(self._gaps))
            if self._behind(oldest) <= self.window:
                break
            del self._gaps[oldest]


@lru_cache(maxsize=16)
def _mask(window: int) -> int:
    """``window`` one bits."""
    return (1 << window) - 1


class BitWindow:
    """Tells new 32-bit ids from repeats in a fixed ``window`` bits of memory.

    The same rule as :class:`SeenWindow` (serial-number order; an id more
    than ``window`` below the highest seen counts as seen), kept as one
    integer bitmask: bit ``n`` set means ``top - n`` was seen.  A jump ahead
    costs one shift, whatever its size, so a peer choosing its ids cannot make
    it cost more than ``window`` bits.
    """

    __slots__ = ("_bits", "_mask", "_top", "window")

    def __init__(self, window: int = 16384) -> None:
        if not 1 <= window <= _MAX_WINDOW:
            raise LocalProtocolError(f"window must be between 1 and {_MAX_WINDOW}")
        self.window = window
        self._mask = _mask(window)  # (one int per size, shared: it is as large as _bits)
        self._top: int | None = None
        self._bits = 0

    @property
    def max_seen(self) -> int | None:
        """The highest id seen so far (in serial order), None before the first."""
        return self._top

    def _place(self, message_id: int) -> int | None:
        """How far ``message_id`` lies below the top (0: the top itself), or None
        when it is ahead of the top; ``window`` or more means too old."""
        assert self._top is not None  # noqa: S101 - callers check
        ahead = (message_id - self._top) % ID_MODULUS
        if ahead and ahead < _HALF:
            return None
        return (ID_MODULUS - ahead) % ID_MODULUS

    def seen(self, message_id: int) -> bool:
        """Whether ``message_id`` counts as seen (without marking it)."""
        if self._top is None:
            return False
        behind = self._place(message_id)
        if behind is None:
            return False
        return behind >= self.window or bool(self._bits >> behind & 1)

    def check_and_mark(self, message_id: int) -> bool:
        """True if ``message_id`` is new (and now marked seen), False for a repeat."""
        if not 0 <= message_id < ID_MODULUS:
            raise LocalProtocolError(f"message id {message_id} is not 32-bit")
        if self._top is None:
            self._top, self._bits = message_id, 1
            return True
        behind = self._place(message_id)
        if behind is None:
            ahead = (message_id - self._top) % ID_MODULUS
            bits = (self._bits << ahead) | 1 if ahead < self.window else 1
            self._bits = bits & self._mask
            self._top = message_id
            return True
        if behind >= self.window or self._bits >> behind & 1:
            return False
        self._bits |= 1 << behind
        return True


class RangeWindow:
    """Tells new ids (1, 2, ... without wrapping, as a durable store numbers its messages)
    from repeats, as ranges of ids seen.

    Ids at or below ``floor`` count as seen.  Above it, the seen ids are inclusive ranges
    kept in two arrays (16 bytes a range): in-order ids extend the last range, so in-order
    traffic costs one comparison and memory never grows with it.  Each id out of order
    opens at most one range, and bounds keep the cost of any sender's choice of ids:

    - ``window``: the floor follows the highest id seen at that distance, so an id
      ``window`` or more behind it counts as seen (a message overtaken by ``window`` or
      more of its successors is refused);
    - ``max_ranges``: past it, the lowest range is dropped and the floor raised to its end
      (its holes count as seen).
    """

    __slots__ = ("_ends", "_starts", "floor", "max_ranges", "window")

    def __init__(self, window: int = 1 << 20, max_ranges: int = 4096) -> None:
        if window < 1 or max_ranges < 1:
            raise LocalProtocolError("window and max_ranges must be positive")
        self.window = window
        self.max_ranges = max_ranges
        self.floor = 0
        self._starts = array("Q")
        self._ends = array("Q")

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The seen ranges above the floor, ascending."""
        return list(zip(self._starts, self._ends, strict=True))

    def check_and_mark(self, number: int) -> bool:
        """True if ``number`` is new (and now marked seen), False for a repeat."""
        if not 0 < number < 1 << 64:
            raise LocalProtocolError(f"id {number} is not a positive 64-bit number")
        if number <= self.floor:
            return False
        starts, ends = self._starts, self._ends
        if ends:
            top = ends[-1]
            if number == top + 1:  # in order: the common case
                ends[-1] = number
                if number - self.window > self.floor:
                    self._raise_floor(number - self.window)
                return True
            if number <= top:
                return self._fill(number)
        starts.append(number)
        ends.append(number)
        self._bound()
        return True

    def _fill(self, number: int) -> bool:
        """Mark ``number``, below the highest seen, if it falls in a hole."""
        starts, ends = self._starts, self._ends
        at = bisect_right(starts, number) - 1  # the range starting at or below it, or -1
        if at >= 0 and number <= ends[at]:
            return False
        joins_left = at >= 0 and ends[at] == number - 1
        joins_right = at + 1 < len(starts) and starts[at + 1] == number + 1
        if joins_left and joins_right:
            ends[at] = ends[at + 1]
            del starts[at + 1]
            del ends[at + 1]
        elif joins_left:
            ends[at] = number
        elif joins_right:
            starts[at + 1] = number
        else:
            starts.insert(at + 1, number)
            ends.insert(at + 1, number)
            self._bound()
        return True

    def _bound(self) -> None:
        top = self._ends[-1]
        if top - self.window > self.floor:
            self._raise_floor(top - self.window)
        while len(self._starts) > self.max_ranges:
            self._raise_floor(self._ends[0])

    def _raise_floor(self, floor: int) -> None:
        """Everything at or below ``floor`` counts as seen from now on."""
        starts, ends = self._starts, self._ends
        self.floor = floor
        drop = bisect_right(ends, floor)
        del starts[:drop]
        del ends[:drop]
        if starts and starts[0] <= floor:
            starts[0] = floor + 1

    def state(self) -> tuple[int, list[int], list[int]]:
        """What :meth:`restored` needs: ``(floor, starts, ends)``."""
        return self.floor, list(self._starts), list(self._ends)

    @classmethod
    def restored(cls, window: int, max_ranges: int,
                 state: tuple[int, list[int], list[int]]) -> RangeWindow:
        """A window as :meth:`state` described it (LocalProtocolError for anything else);
        one kept with larger bounds is brought within these (its floor raised)."""
        floor, starts, ends = state
        seen = cls(window, max_ranges)
        try:
            seen._starts, seen._ends = array("Q", starts), array("Q", ends)
        except (OverflowError, TypeError) as exc:
            raise LocalProtocolError(f"not a range window's state: {exc}") from None
        if len(starts) != len(ends) or floor < 0:
            raise LocalProtocolError("not a range window's state")
        lows = [floor + 1, *(end + 2 for end in ends[:-1])][:len(starts)]  # after a hole
        if any(start < low or start > end
               for start, end, low in zip(starts, ends, lows, strict=True)):
            raise LocalProtocolError("not a range window's state")
        seen.floor = floor
        if starts:
            seen._bound()
        return seen
