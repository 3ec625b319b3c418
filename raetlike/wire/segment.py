"""Segmentation of a message's coat into packets, and reassembly.

RAET's rule: the body is serialized and coated once; when head + coat + foot
would exceed 1024 bytes, the coat is cut into equal chunks (the last one
shorter) of ``1024 - (head size + extra + foot size)`` bytes, where the head
size is that of the *unsegmented* head and ``extra`` (27 native, 36 JSON,
0 binary) covers the ``sn``/``sc``/``ml`` fields a segment head adds.
"""

from __future__ import annotations

from dataclasses import replace

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.head import Head, head_size
from raetlike.wire.kinds import (
    MAX_MESSAGE_SIZE,
    MAX_PACKET_SIZE,
    MAX_SEGMENT_COUNT,
    SIGNATURE_SIZE,
    Flag,
    FootKind,
    HeadKind,
)

__all__ = ["segment", "segment_size", "plan_segments", "plan_for_head_size", "Reassembly",
           "SEGMENT_EXTRA"]

SEGMENT_EXTRA = {HeadKind.RAET: 27, HeadKind.JSON: 36, HeadKind.BINARY: 0}
"""Room a segment head may need beyond the unsegmented head, per head kind."""
_SEGMENTED = int(Flag.SEGMENTED)


def _unsegmented(head: Head, signed: bool) -> Head:
    foot_kind = FootKind.NACL if signed else FootKind.NADA
    if (head.foot_kind is foot_kind and head.segment_number == 0 and head.segment_count == 1
            and head.message_length == 0 and not int(head.flags) & _SEGMENTED):
        return head
    return replace(
        head,
        foot_kind=FootKind.NACL if signed else FootKind.NADA,
        segment_number=0,
        segment_count=1,
        message_length=0,
        flags=head.flags & ~Flag.SEGMENTED,
    )


def segment_size(head: Head, signed: bool, limit: int = MAX_PACKET_SIZE) -> int:
    """How many coat bytes each segment of a message with ``head`` carries."""
    base = _unsegmented(head, signed)
    foot = SIGNATURE_SIZE if signed else 0
    size = limit - (head_size(base) + SEGMENT_EXTRA[head.head_kind] + foot)
    if size <= 0:
        raise LocalProtocolError(f"a limit of {limit} bytes leaves no room for a segment")
    return size


def plan_segments(
    head: Head, coat_size: int, signed: bool, *, limit: int = MAX_PACKET_SIZE
) -> tuple[bool, int, int]:
    """How :func:`segment` cuts a coat of ``coat_size`` bytes: (segmented, count, chunk size).

    ``(False, 1, coat_size)`` when the whole packet fits in ``limit`` bytes;
    otherwise segment ``n`` carries ``coat[n * size:(n + 1) * size]``.  Raises
    :class:`LocalProtocolError` as :func:`segment` does.
    """
    if coat_size > MAX_MESSAGE_SIZE:
        raise LocalProtocolError(f"message of {coat_size} bytes exceeds {MAX_MESSAGE_SIZE}")
    base_size = head_size(_unsegmented(head, signed))
    return plan_for_head_size(base_size, head.head_kind, coat_size, signed, limit=limit)


def plan_for_head_size(
    base_size: int, head_kind: HeadKind, coat_size: int, signed: bool, *,
    limit: int = MAX_PACKET_SIZE,
) -> tuple[bool, int, int]:
    """:func:`plan_segments` for a head of kind ``head_kind`` that takes ``base_size`` bytes
    unsegmented (for a caller that knows that size already)."""
    if coat_size > MAX_MESSAGE_SIZE:
        raise LocalProtocolError(f"message of {coat_size} bytes exceeds {MAX_MESSAGE_SIZE}")
    foot = SIGNATURE_SIZE if signed else 0
    if base_size + coat_size + foot <= limit:
        return False, 1, coat_size
    size = limit - (base_size + SEGMENT_EXTRA[head_kind] + foot)
    if size <= 0:
        raise LocalProtocolError(f"a limit of {limit} bytes leaves no room for a segment")
    count = -(-coat_size // size)
    if count > MAX_SEGMENT_COUNT:
        raise LocalProtocolError(f"message needs {count} segments, more than {MAX_SEGMENT_COUNT}")
    return True, count, size


def segment(
    head: Head, coat: bytes, signed: bool, *, limit: int = MAX_PACKET_SIZE
) -> list[tuple[Head, bytes]]:
    """Cut one message's ``coat`` into (head, chunk) pairs, one per packet.

    One pair (the head with ``fk`` set from ``signed``) when the whole packet
    fits in ``limit`` bytes; otherwise every head carries ``sn``, ``sc``,
    ``ml`` and the SEGMENTED flag.  Raises :class:`LocalProtocolError` for a
    coat over 67,107,840 bytes or more than 65,535 segments.
    """
    segmented, count, size = plan_segments(head, len(coat), signed, limit=limit)
    base = _unsegmented(head, signed)
    if not segmented:
        return [(base, coat)]
    flags = head.flags | Flag.SEGMENTED
    total = len(coat)
    return [
        (
            replace(base, segment_number=number, segment_count=count,
                    message_length=total, flags=flags),
            coat[number * size:(number + 1) * size],
        )
        for number in range(count)
    ]


class Reassembly:
    """The received segments of one message, joined when all are in.

    Memory follows what arrived, never what the heads announce: chunks live in
    a dict keyed by segment number, so a first segment that claims 65,535
    segments costs one entry, not 65,535 slots.
    """

    __slots__ = ("_chunks", "_count", "_first_missing", "_highest", "_length", "_received")

    def __init__(self, segment_count: int, message_length: int) -> None:
        if not 1 <= segment_count <= MAX_SEGMENT_COUNT:
            raise PacketError("bad-segment", f"segment count {segment_count} out of range")
        if not 0 <= message_length <= MAX_MESSAGE_SIZE:
            raise PacketError("bad-segment", f"message length {message_length} out of range")
        self._count = segment_count
        self._length = message_length
        self._chunks: dict[int, bytes] = {}
        self._received = 0
        self._highest = -1
        self._first_missing = 0  # every segment below it is in

    @property
    def segment_count(self) -> int:
        """How many segments the message has."""
        return self._count

    @property
    def message_length(self) -> int:
        """The whole coat's length as the heads announce it."""
        return self._length

    @property
    def received_bytes(self) -> int:
        """Bytes of chunks held so far (what this reassembly costs in memory)."""
        return self._received

    @property
    def highest(self) -> int:
        """The highest segment number received so far (-1 before any)."""
        return self._highest

    def add(self, segment_number: int, chunk: bytes) -> bool:
        """Keep one segment; True when it is new, False for a duplicate.

        Raises :class:`PacketError` (``bad-segment``) for a number out of
        range or when the chunks would exceed the announced message length.
        """
        if not 0 <= segment_number < self._count:
            raise PacketError("bad-segment", f"segment {segment_number} of {self._count}")
        chunks = self._chunks
        if segment_number in chunks:
            return False
        if self._received + len(chunk) > self._length:
            raise PacketError("bad-segment", "segments exceed the announced message length")
        chunks[segment_number] = bytes(chunk)
        self._received += len(chunk)
        self._highest = max(self._highest, segment_number)
        if segment_number == self._first_missing:
            first, count = segment_number + 1, self._count
            while first < count and first in chunks:
                first += 1
            self._first_missing = first
        return True

    @property
    def complete(self) -> bool:
        """True when every segment is in."""
        return len(self._chunks) == self._count

    def missing(self, begin: int = 0, end: int | None = None, *,
                limit: int | None = None) -> list[int]:
        """Segment numbers not yet received in ``begin`` ≤ n < ``end`` (default: all),
        the lowest ``limit`` of them when a limit is given.

        With a limit the scan costs at most the segments held plus ``limit``.
        """
        stop = self._count if end is None else min(end, self._count)
        chunks = self._chunks
        found: list[int] = []
        number = max(begin, self._first_missing)
        while number < stop:
            if number not in chunks:
                found.append(number)
                if limit is not None and len(found) >= limit:
                    break
            number += 1
        return found

    def coat(self) -> bytes:
        """The joined coat; :class:`PacketError` when its length is not the announced one.

        Raises :class:`LocalProtocolError` when segments are still missing.
        """
        if not self.complete:
            raise LocalProtocolError(f"{self._count - len(self._chunks)} segments still missing")
        chunks = self._chunks
        joined = b"".join(chunks[number] for number in range(self._count))
        if len(joined) != self._length:
            raise PacketError(
                "bad-length", f"segments join to {len(joined)} bytes, heads say {self._length}"
            )
        return joined
