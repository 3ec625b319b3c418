"""The :class:`Head` value and the field rules every head codec shares.

A head is the same set of fields whatever its wire form (native lines, JSON
or the binary fast-path layout); this module holds that set, the RAET
defaults, the field widths and the checks that bound them.  The packet,
head and foot lengths (``pl``, ``hl``, ``fl``) are not fields of a
:class:`Head`: codecs compute them when packing and check them when parsing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.kinds import (
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    TransactionKind,
)

__all__ = [
    "Head",
    "NO_FLAGS",
    "UINT32_MAX",
    "UINT16_MAX",
    "UINT8_MAX",
    "HeadBuilder",
    "build_head",
    "check_head",
    "check_parsed",
    "foot_length",
]

UINT32_MAX = 0xFFFF_FFFF
UINT16_MAX = 0xFFFF
UINT8_MAX = 0xFF


NO_FLAGS = Flag(0)


@dataclass(frozen=True, slots=True)
class Head:
    """The fields of a road packet head (wire keys in the comments)."""

    packet_kind: PacketKind = PacketKind.MESSAGE  # pk
    transaction_kind: TransactionKind = TransactionKind.MESSAGE  # tk
    source_uid: int = 0  # se
    destination_uid: int = 0  # de
    session_id: int = 0  # si
    transaction_id: int = 0  # ti
    flags: Flag = NO_FLAGS  # packed into fg
    segment_number: int = 0  # sn
    segment_count: int = 1  # sc
    message_length: int = 0  # ml
    body_kind: BodyKind = BodyKind.NADA  # bk
    coat_kind: CoatKind = CoatKind.NADA  # ck
    foot_kind: FootKind = FootKind.NADA  # fk
    head_kind: HeadKind = HeadKind.RAET  # hk
    stamp: float = 0.0  # dt (native heads write it with "%f": six decimals)
    order_index: int = 0  # oi
    version: int = 0  # vn


class HeadBuilder:
    """A mutable twin of :class:`Head` with the same slots, for :func:`build_head`.

    A frozen dataclass sets each field through ``object.__setattr__``, which
    costs more than everything else a binary head parse does; building the
    twin with plain stores and then making it a :class:`Head` is several
    times faster and gives an equal, equally immutable object.
    """

    __slots__ = ("packet_kind", "transaction_kind", "source_uid", "destination_uid",  # noqa: RUF023
                 "session_id", "transaction_id", "flags", "segment_number",
                 "segment_count", "message_length", "body_kind", "coat_kind", "foot_kind",
                 "head_kind", "stamp", "order_index", "version")

    packet_kind: PacketKind
    transaction_kind: TransactionKind
    source_uid: int
    destination_uid: int
    session_id: int
    transaction_id: int
    flags: Flag
    segment_number: int
    segment_count: int
    message_length: int
    body_kind: BodyKind
    coat_kind: CoatKind
    foot_kind: FootKind
    head_kind: HeadKind
    stamp: float
    order_index: int
    version: int


if HeadBuilder.__slots__ != Head.__slots__:  # pragma: no cover - guards the twin
    raise ImportError("HeadBuilder must have exactly Head's slots, in order")


def build_head(
    packet_kind: PacketKind,
    transaction_kind: TransactionKind,
    *,
    source_uid: int,
    destination_uid: int,
    session_id: int,
    transaction_id: int,
    flags: Flag = NO_FLAGS,
    segment_number: int = 0,
    segment_count: int = 1,
    message_length: int = 0,
    body_kind: BodyKind = BodyKind.NADA,
    coat_kind: CoatKind = CoatKind.NADA,
    foot_kind: FootKind = FootKind.NADA,
    head_kind: HeadKind = HeadKind.RAET,
    stamp: float = 0.0,
    order_index: int = 0,
    version: int = 0,
) -> Head:
    """``Head(...)``, built fast (see :class:`HeadBuilder`); the defaults are Head's."""
    built = object.__new__(HeadBuilder)
    built.packet_kind = packet_kind
    built.transaction_kind = transaction_kind
    built.source_uid = source_uid
    built.destination_uid = destination_uid
    built.session_id = session_id
    built.transaction_id = transaction_id
    built.flags = flags
    built.segment_number = segment_number
    built.segment_count = segment_count
    built.message_length = message_length
    built.body_kind = body_kind
    built.coat_kind = coat_kind
    built.foot_kind = foot_kind
    built.head_kind = head_kind
    built.stamp = stamp
    built.order_index = order_index
    built.version = version
    built.__class__ = Head  # type: ignore[assignment]
    return built  # type: ignore[return-value]


_FOOT_LENGTHS = {FootKind.NADA: 0, FootKind.NACL: 64}


def foot_length(kind: FootKind) -> int:
    """How many bytes a foot of ``kind`` takes (``fl``)."""
    return _FOOT_LENGTHS[kind]


_WIDE_FIELDS = ("source_uid", "destination_uid", "session_id", "transaction_id",
                "order_index", "message_length")


def _in_range(value: object, top: int) -> bool:
    return type(value) is int and 0 <= value <= top


def _range_problems(head: Head) -> list[str]:
    """Name what is out of range in ``head`` (an empty list when it all fits)."""
    problems = [
        f"{name} must be an int in 0..0xffffffff"
        for name in _WIDE_FIELDS
        if not _in_range(getattr(head, name), UINT32_MAX)
    ]
    stamp = head.stamp
    checks = (
        (_in_range(head.segment_count, UINT16_MAX) and head.segment_count >= 1,
         "segment_count must be an int in 1..0xffff"),
        (_in_range(head.segment_number, UINT16_MAX),
         "segment_number must be an int in 0..0xffff"),
        # RAET's message acks carry the highest segment seen in sn with sc 1,
        # so sn < sc holds only for segments (the SEGMENTED flag).
        (head.segment_number < head.segment_count or not head.flags & Flag.SEGMENTED,
         "segment_number must be below segment_count in a segment"),
        (_in_range(head.version, UINT8_MAX), "version must be an int in 0..0xff"),
        (type(stamp) in (int, float) and math.isfinite(stamp), "stamp must be a finite number"),
        (_in_range(int(head.flags), UINT8_MAX), "flags must fit one byte"),
    )
    problems.extend(problem for fits, problem in checks if not fits)
    return problems


_INT = int
_NUMBERS = (int, float)
_SEGMENTED = int(Flag.SEGMENTED)


def _fits(head: Head) -> bool:
    """True when nothing is out of range in ``head``: :func:`_range_problems` is empty.

    The cheap test every packed and parsed head takes; only a head that fails
    it pays for naming its problems.
    """
    source, destination = head.source_uid, head.destination_uid
    session, transaction = head.session_id, head.transaction_id
    order, length = head.order_index, head.message_length
    number, count, version, flags = (head.segment_number, head.segment_count, head.version,
                                     head.flags)
    return (
        type(source) is _INT and type(destination) is _INT and type(session) is _INT
        and type(transaction) is _INT and type(order) is _INT and type(length) is _INT
        and type(number) is _INT and type(count) is _INT and type(version) is _INT
        and 0 <= source <= UINT32_MAX and 0 <= destination <= UINT32_MAX
        and 0 <= session <= UINT32_MAX and 0 <= transaction <= UINT32_MAX
        and 0 <= order <= UINT32_MAX and 0 <= length <= UINT32_MAX
        and 1 <= count <= UINT16_MAX and 0 <= number <= UINT16_MAX
        and 0 <= version <= UINT8_MAX
        and type(head.stamp) in _NUMBERS and math.isfinite(head.stamp)
        and isinstance(flags, int) and 0 <= int(flags) <= UINT8_MAX
        and (number < count or not int(flags) & _SEGMENTED)
    )


def check_head(head: Head) -> None:
    """Raise :class:`LocalProtocolError` unless every field of ``head`` fits its wire width."""
    if _fits(head):
        return
    problems = _range_problems(head)
    if problems:
        raise LocalProtocolError("; ".join(problems))


def check_parsed(head: Head) -> None:
    """Raise :class:`PacketError` unless a head read off the wire is one we accept.

    Every codec accepts exactly the same heads: fields within their widths,
    ``sn < sc`` and version 0 (RAET 0.6.8 knows no other).
    """
    if not _fits(head):
        problems = _range_problems(head)
        if problems:
            raise PacketError("bad-field", "; ".join(problems))
    if head.version != 0:
        raise PacketError("bad-version", f"version {head.version} is not 0")
