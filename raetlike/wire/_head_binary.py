"""The binary head (``hk`` 2): raetlike's fixed 49-byte layout for the fast path.

One :mod:`struct` call packs or parses it; every field is big endian.  The
byte table is in docs/wire.md.  Layout 1::

    B magic 0xB2   B layout 1   B hl   B fg   H pl
    B vn  B pk  B tk  B bk  B ck  B fk  B fl
    H sn  H sc  I se  I de  I si  I ti  I oi  I ml  d dt
"""

from __future__ import annotations

import math
import struct

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_model import Head, build_head, foot_length
from raetlike.wire.kinds import (
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    TransactionKind,
)

__all__ = ["MAGIC", "LAYOUT", "BINARY_HEAD_SIZE", "pack_binary", "parse_binary"]

MAGIC = 0xB2
LAYOUT = 1
_STRUCT = struct.Struct("!BBBBHBBBBBBBHHIIIIIId")
BINARY_HEAD_SIZE = _STRUCT.size  # 49
_pack = _STRUCT.pack
_unpack_from = _STRUCT.unpack_from

# Wire value -> enum member, by index (every kind's values run 0, 1, 2, ...).
_PACKET_KINDS = tuple(PacketKind)
_TRANSACTION_KINDS = tuple(TransactionKind)
_BODY_KINDS = tuple(BodyKind)
_COAT_KINDS = tuple(CoatKind)
_FOOT_KINDS = tuple(FootKind)
_FOOT_LENGTHS = tuple(foot_length(kind) for kind in FootKind)
_FLAGS = tuple(Flag(value) for value in range(256))
_BINARY = HeadKind.BINARY
_PL_LIMIT = 0xFFFF
_SEGMENTED = Flag.SEGMENTED

for _kinds in (_PACKET_KINDS, _TRANSACTION_KINDS, _BODY_KINDS, _COAT_KINDS, _FOOT_KINDS):
    if [int(kind) for kind in _kinds] != list(range(len(_kinds))):  # pragma: no cover
        raise ImportError("binary head tables need kinds numbered 0, 1, 2, ...")


def pack_binary(head: Head, coat_size: int) -> bytes:
    """``head`` in binary layout 1, with ``pl``/``hl`` for a coat of ``coat_size`` bytes."""
    foot_size = _FOOT_LENGTHS[head.foot_kind]
    packet_size = BINARY_HEAD_SIZE + coat_size + foot_size
    if packet_size > _PL_LIMIT:
        raise LocalProtocolError(f"packet of {packet_size} bytes does not fit a binary head")
    if head.segment_count < 1 or (
        head.segment_number >= head.segment_count and head.flags & _SEGMENTED
    ):
        raise LocalProtocolError("segment_count must be at least 1, and above a segment's number")
    if not math.isfinite(head.stamp):
        raise LocalProtocolError("stamp must be finite")
    try:
        return _pack(
            MAGIC, LAYOUT, BINARY_HEAD_SIZE, head.flags, packet_size,
            head.version, head.packet_kind, head.transaction_kind, head.body_kind,
            head.coat_kind, head.foot_kind, foot_size,
            head.segment_number, head.segment_count, head.source_uid,
            head.destination_uid, head.session_id, head.transaction_id,
            head.order_index, head.message_length, head.stamp,
        )
    except struct.error as exc:
        raise LocalProtocolError(f"head field out of range: {exc}") from None


def parse_binary(data: bytes) -> tuple[Head, int, int]:
    """Read the binary head at the front of packet ``data``.

    Returns (head, head length, foot length); the packet length written in the
    head must equal ``len(data)``.
    """
    if len(data) < BINARY_HEAD_SIZE:
        raise PacketError("bad-length", f"binary head needs {BINARY_HEAD_SIZE} bytes")
    (magic, layout, head_size, flags, packet_size, version, packet_kind,
     transaction_kind, body_kind, coat_kind, foot_kind, foot_size, segment_number,
     segment_count, source_uid, destination_uid, session_id, transaction_id,
     order_index, message_length, stamp) = _unpack_from(data)
    if magic != MAGIC or layout != LAYOUT:
        raise PacketError("bad-head", f"binary head magic {magic:#x} layout {layout}")
    if head_size != BINARY_HEAD_SIZE or packet_size != len(data):
        raise PacketError("bad-length", "binary head lengths do not match the packet")
    if version:
        raise PacketError("bad-version", f"version {version} is not 0")
    if not segment_count or (segment_number >= segment_count and flags & _SEGMENTED):
        raise PacketError("bad-field", "sc must be at least 1, and above sn in a segment")
    if not math.isfinite(stamp):
        raise PacketError("bad-field", "dt is not finite")
    try:
        foot = _FOOT_KINDS[foot_kind]
        head = build_head(
            _PACKET_KINDS[packet_kind], _TRANSACTION_KINDS[transaction_kind],
            source_uid=source_uid, destination_uid=destination_uid, session_id=session_id,
            transaction_id=transaction_id, flags=_FLAGS[flags], segment_number=segment_number,
            segment_count=segment_count, message_length=message_length,
            body_kind=_BODY_KINDS[body_kind], coat_kind=_COAT_KINDS[coat_kind], foot_kind=foot,
            head_kind=_BINARY, stamp=stamp, order_index=order_index, version=version,
        )
    except IndexError:
        raise PacketError("bad-kind", "unknown kind in binary head") from None
    if foot_size != _FOOT_LENGTHS[foot]:
        raise PacketError("bad-foot", f"fl {foot_size} does not fit fk {foot_kind}")
    if head_size + foot_size > packet_size:
        raise PacketError("bad-length", "head and foot overrun the packet")
    return head, head_size, foot_size
