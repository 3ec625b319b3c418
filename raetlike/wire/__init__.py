"""The wire layer: pure codecs for road packets, lane pages and SP tag stacks.

No sockets and no clocks here; see docs/wire.md for the byte layouts.
"""

from __future__ import annotations

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

__all__ = [
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
]
