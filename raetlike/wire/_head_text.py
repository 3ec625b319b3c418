"""What the two text heads (native and JSON) share: field order, defaults, decoding.

RAET 0.6.8 writes ``ri pl hl fg`` first, then only the fields whose value
differs from the default, in :data:`FIELD_ORDER`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

from raetlike.errors import PacketError
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

__all__ = ["FIELD_ORDER", "optional_fields", "head_from_fields"]

FIELD_ORDER = ("vn", "pk", "hk", "se", "de", "si", "ti", "tk", "dt", "oi",
               "sn", "sc", "ml", "bk", "ck", "fk", "fl")


def optional_fields(head: Head) -> list[tuple[str, int | float]]:
    """The (wire key, value) pairs of ``head`` that differ from RAET's defaults, in order."""
    values: tuple[int | float, ...] = (
        head.version, head.packet_kind, head.head_kind, head.source_uid,
        head.destination_uid, head.session_id, head.transaction_id,
        head.transaction_kind, head.stamp, head.order_index, head.segment_number,
        head.segment_count, head.message_length, head.body_kind, head.coat_kind,
        head.foot_kind, foot_length(head.foot_kind),
    )
    return [
        (key, int(value) if key != "dt" else value)
        for key, value in zip(FIELD_ORDER, values, strict=True)
        if value != (1 if key == "sc" else 0)
    ]


_K = TypeVar("_K", PacketKind, TransactionKind, BodyKind, CoatKind, FootKind)
_MEMBERS: dict[type, dict[int, object]] = {
    enum: {int(member): member for member in enum}
    for enum in (PacketKind, TransactionKind, BodyKind, CoatKind, FootKind)
}
_FLAGS = tuple(Flag(value) for value in range(256))


def _kind(enum: type[_K], key: str, value: int) -> _K:
    member = _MEMBERS[enum].get(value)
    if member is None:
        raise PacketError("bad-kind", f"{key} {value} is not a known {enum.__name__}")
    return member  # type: ignore[return-value]


def head_from_fields(fields: Mapping[str, int | float], kind: HeadKind) -> Head:
    """Build a :class:`Head` from decoded field values (``ri``, ``pl``, ``hl`` removed).

    Checks the enum values and that ``fl`` matches ``fk``; range checks are
    the caller's (:func:`check_parsed`).
    """
    stamp = float(fields.get("dt", 0))
    if not math.isfinite(stamp):
        raise PacketError("bad-field", "dt is not finite")
    ints = {key: value for key, value in fields.items() if key != "dt"}
    for key, value in ints.items():
        if type(value) is not int:
            raise PacketError("bad-field", f"{key} is not an integer")
    foot_kind = _kind(FootKind, "fk", int(ints.get("fk", 0)))
    if ints.get("fl", 0) != foot_length(foot_kind):
        raise PacketError("bad-foot", f"fl {ints.get('fl', 0)} does not fit fk {int(foot_kind)}")
    flags = int(ints.get("fg", 0))
    if not 0 <= flags <= 0xFF:
        raise PacketError("bad-field", "fg does not fit one byte")
    return build_head(
        _kind(PacketKind, "pk", int(ints.get("pk", 0))),
        _kind(TransactionKind, "tk", int(ints.get("tk", 0))),
        source_uid=int(ints.get("se", 0)),
        destination_uid=int(ints.get("de", 0)),
        session_id=int(ints.get("si", 0)),
        transaction_id=int(ints.get("ti", 0)),
        flags=_FLAGS[flags],
        segment_number=int(ints.get("sn", 0)),
        segment_count=int(ints.get("sc", 1)),
        message_length=int(ints.get("ml", 0)),
        body_kind=_kind(BodyKind, "bk", int(ints.get("bk", 0))),
        coat_kind=_kind(CoatKind, "ck", int(ints.get("ck", 0))),
        foot_kind=foot_kind,
        head_kind=kind,
        stamp=stamp,
        order_index=int(ints.get("oi", 0)),
        version=int(ints.get("vn", 0)),
    )
