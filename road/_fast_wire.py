"""Fast-mode datagrams between raetlike peers: the frame header and the frames.

A fast datagram is the binary head family's *layout 2*: a fixed 20-byte
header (authenticated as AEAD associated data), then the ChaCha20-Poly1305
sealed frames (ciphertext and 16-byte tag).  Byte tables: docs/wire.md,
"Fast-mode frame (binary layout 2)".  Pure functions: no sockets, no clock.
"""

from __future__ import annotations

import enum
import struct

from raetlike.errors import PacketError

__all__ = [
    "FAST_LAYOUT",
    "FAST_MAGIC",
    "FAST_HEADER_SIZE",
    "FRAME_MESSAGE_SIZE",
    "MESSAGE_HEAD",
    "MESSAGE_KIND",
    "PING_FRAME",
    "FrameKind",
    "is_fast",
    "pack_ack",
    "pack_abandon",
    "pack_header",
    "pack_message_head",
    "read_frames",
    "read_header",
]

FAST_MAGIC = 0xB2  # the binary head's magic ...
FAST_LAYOUT = 2  # ... with layout 2: the fast frame (layout 1 is the RAET-shaped binary head)
_HEADER = struct.Struct("!BBBBIIQ")
FAST_HEADER_SIZE = _HEADER.size  # 20
_PREFIX = bytes((FAST_MAGIC, FAST_LAYOUT))

_MESSAGE = struct.Struct("!BQIIIBH")  # kind, number, total, chunk index, chunks, body kind, size
FRAME_MESSAGE_SIZE = _MESSAGE.size  # 24
MESSAGE_HEAD = _MESSAGE
"""A MESSAGE frame's fixed bytes, for the send path's own packing (see pack_message_head)."""
_ACK_HEAD = struct.Struct("!BB")  # kind, range count
_RANGE = struct.Struct("!QQ")  # first, last packet number (inclusive)
_ABANDON = struct.Struct("!BQ")
MAX_ACK_RANGES = 32
"""The most ranges an ACK frame carries, and the most a receiver accepts: a datagram with
more (or with a second ACK frame) is malformed, so one ACK costs its receiver at most this
many bisections of what it has in flight (docs/wire.md, "Fast-mode frame")."""
_ACK_FORMATS = [struct.Struct(f"!BB{2 * count}Q") for count in range(MAX_ACK_RANGES + 1)]


class FrameKind(enum.IntEnum):
    """The frame kinds inside a fast datagram (wire values; they never change)."""

    MESSAGE = 1
    ACK = 2
    ABANDON = 3


# Plain ints for the hot paths: an IntEnum member lookup costs ~0.4 us here.
_MESSAGE_KIND = int(FrameKind.MESSAGE)
MESSAGE_KIND = _MESSAGE_KIND
_ACK_KIND = int(FrameKind.ACK)
_ABANDON_KIND = int(FrameKind.ABANDON)


def is_fast(data: bytes) -> bool:
    """Whether ``data`` starts like a fast datagram (magic and layout 2)."""
    return data[:2] == _PREFIX


def pack_header(key_id: int, destination_uid: int, stream_id: int, packet_number: int) -> bytes:
    """The 20-byte clear header."""
    return _HEADER.pack(FAST_MAGIC, FAST_LAYOUT, 0, key_id, destination_uid, stream_id,
                        packet_number)


def read_header(data: bytes) -> tuple[int, int, int, int, int]:
    """The clear header's (flags, key id, destination uid, stream id, packet number).

    PacketError when ``data`` is not a fast datagram.
    """
    if len(data) < FAST_HEADER_SIZE:
        raise PacketError("bad-length", "fast datagram shorter than its header")
    magic, layout, flags, key_id, destination, stream, number = _HEADER.unpack_from(data)
    if magic != FAST_MAGIC or layout != FAST_LAYOUT:
        raise PacketError("bad-head", "not a fast datagram")
    return flags, key_id, destination, stream, number


def pack_message_head(number: int, total: int, index: int, chunks: int, *, body_kind: int,
                      size: int) -> bytes:
    """A MESSAGE frame's 24 fixed bytes; the chunk's ``size`` bytes follow (no copy made here)."""
    return _MESSAGE.pack(_MESSAGE_KIND, number, total, index, chunks, body_kind, size)


def pack_ack(ranges: list[tuple[int, int]]) -> bytes:
    """An ACK frame of at most MAX_ACK_RANGES ranges (highest first)."""
    ranges = ranges[:MAX_ACK_RANGES]
    if len(ranges) == 1:
        return _ACK_FORMATS[1].pack(_ACK_KIND, 1, ranges[0][0], ranges[0][1])
    return _ACK_FORMATS[len(ranges)].pack(_ACK_KIND, len(ranges),
                                          *[n for pair in ranges for n in pair])


def pack_abandon(number: int) -> bytes:
    """An ABANDON frame for message ``number``."""
    return _ABANDON.pack(_ABANDON_KIND, number)


PING_FRAME = pack_abandon(0)
"""The presence check's frame: an ABANDON of message 0, which no message ever is (MESSAGE
frames number from 1).  Every fast-mode raetlike, from the first version on, abandons
nothing and acknowledges the datagram, as it does any ABANDON: so "alive?" needs neither
a new frame kind nor a negotiation, and an older peer answers it (docs/wire.md)."""


MessageFields = tuple[int, int, int, int, int, bytes | memoryview]
"""A message frame on the receive path: (number, total, index, chunks, body kind, data).

The data is bytes for a one-chunk message, a view into the opened datagram otherwise."""


def read_frames(plain: bytes) -> tuple[list[MessageFields], list[tuple[int, int]] | None,
                                       list[int]]:
    """The frames of an opened datagram as plain values: messages, ack ranges, abandons.

    Ack ranges are None when the datagram has no ACK frame.  PacketError on anything
    malformed, which includes a second ACK frame, more than MAX_ACK_RANGES ranges, and
    ranges not strictly descending (each wholly below the one before it): no raetlike
    sends those, and each range costs the receiver work.
    """
    messages: list[MessageFields] = []
    ranges: list[tuple[int, int]] | None = None
    view = memoryview(plain)  # chunks of long messages: joined once, never copied twice
    abandons: list[int] = []
    offset, end = 0, len(plain)
    message_unpack = _MESSAGE.unpack_from
    while offset < end:
        kind = plain[offset]
        if kind == _MESSAGE_KIND:
            if offset + FRAME_MESSAGE_SIZE > end:
                raise PacketError("bad-frame", "truncated message frame")
            _, number, total, index, chunks, body_kind, size = message_unpack(plain, offset)
            offset += FRAME_MESSAGE_SIZE
            if offset + size > end or index >= chunks or size > total or number == 0:
                raise PacketError("bad-frame", "inconsistent message frame")
            messages.append((number, total, index, chunks, body_kind,
                             plain[offset:offset + size] if chunks == 1
                             else view[offset:offset + size]))
            offset += size
        elif kind == _ACK_KIND:
            if ranges is not None:
                raise PacketError("bad-frame", "a second ack frame")
            if offset + 2 > end:
                raise PacketError("bad-frame", "truncated ack frame")
            count = plain[offset + 1]
            offset += 2
            if count > MAX_ACK_RANGES:
                raise PacketError("bad-frame", "too many ack ranges")
            if offset + count * _RANGE.size > end:
                raise PacketError("bad-frame", "truncated ack ranges")
            ranges = []
            offset = _read_ranges(plain, offset, count, ranges)
        elif kind == _ABANDON_KIND:
            if offset + _ABANDON.size > end:
                raise PacketError("bad-frame", "truncated abandon frame")
            abandons.append(_ABANDON.unpack_from(plain, offset)[1])
            offset += _ABANDON.size
        else:
            raise PacketError("bad-frame", f"unknown frame kind {kind}")
    return messages, ranges, abandons


def _read_ranges(plain: bytes, offset: int, count: int, ranges: list[tuple[int, int]]) -> int:
    """Append ``count`` ack ranges read at ``offset`` (highest first, each wholly below
    the one before); the offset after them."""
    below = -1  # the previous range's first number (-1: none yet)
    for _ in range(count):
        first, last = _RANGE.unpack_from(plain, offset)
        if first > last:
            raise PacketError("bad-frame", "ack range runs backwards")
        if below >= 0 and last >= below:
            raise PacketError("bad-frame", "ack ranges out of order or overlapping")
        below = first
        ranges.append((first, last))
        offset += _RANGE.size
    return offset
