"""The wire layer: pure codecs for road packets, lane pages and SP tag stacks.

No sockets and no clocks here; see docs/wire.md for the byte layouts.
"""

from __future__ import annotations

from raetlike.wire.body import coat, pack_body, parse_body, uncoat
from raetlike.wire.head import (
    BINARY_HEAD_SIZE,
    BINARY_MAGIC,
    Head,
    foot_length,
    head_size,
    pack_head,
    parse_head,
)
from raetlike.wire.kinds import (
    Acceptance,
    AutoMode,
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    PageKind,
    TransactionKind,
)
from raetlike.wire.packet import Packet, pack_packet, parse_packet, signed_bytes
from raetlike.wire.segment import (
    SEGMENT_EXTRA,
    Reassembly,
    plan_segments,
    segment,
    segment_size,
)
from raetlike.wire.template import PacketTemplate

__all__ = [
    # kinds
    "Acceptance",
    "AutoMode",
    "BodyKind",
    "CoatKind",
    "Flag",
    "FootKind",
    "HeadKind",
    "PacketKind",
    "PageKind",
    "TransactionKind",
    # heads
    "Head",
    "pack_head",
    "parse_head",
    "head_size",
    "foot_length",
    "BINARY_HEAD_SIZE",
    "BINARY_MAGIC",
    # bodies and coats
    "pack_body",
    "parse_body",
    "coat",
    "uncoat",
    # packets
    "Packet",
    "pack_packet",
    "parse_packet",
    "signed_bytes",
    "PacketTemplate",
    # segments
    "segment",
    "segment_size",
    "plan_segments",
    "Reassembly",
    "SEGMENT_EXTRA",
]
