"""The native RAET head (``hk`` 0): ASCII ``key value`` lines ended by an empty line.

Parsing has two paths that accept exactly the same heads.  The fast path
(:func:`parse_native`) reads a head whose lines come in RAET's own order (the
order every RAET 0.6.8 and raetlike writer uses) with one regular expression
and plain integer checks; anything it does not accept outright goes to the
validating reference parser (:func:`parse_native_reference`), which reads the
lines in any order and names what is wrong.  So every rejection, and every
head in an unusual order, gets the reference's answer.
"""

from __future__ import annotations

import re

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_model import (
    UINT8_MAX,
    UINT16_MAX,
    UINT32_MAX,
    Head,
    build_head,
    check_parsed,
    foot_length,
)
from raetlike.wire._head_text import FIELD_ORDER, head_from_fields, optional_fields
from raetlike.wire.kinds import (
    MAX_HEAD_SIZE,
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    TransactionKind,
)

__all__ = [
    "START",
    "END",
    "pack_native",
    "parse_native",
    "parse_native_reference",
    "native_size",
    "native_optional_text",
    "native_text_around_segments",
    "segment_lines",
]

START = b"ri RAET\n"
END = b"\n\n"
_PL_LIMIT = 0xFFFF  # pl is written with four hex digits
# "ri RAET\npl XXXX\nhl XX\nfg XX", then the optional lines, then "\n\n".
_FIXED_SIZE = len("ri RAET\npl 0000\nhl 00\nfg 00") + len(END)
_HEX = re.compile(r"[0-9a-fA-F]{1,16}")
_DECIMAL = re.compile(r"-?[0-9]{1,30}(\.[0-9]{0,30})?")
_KNOWN = frozenset(FIELD_ORDER) | {"ri", "pl", "hl", "fg"}


def _lines(key: str, enum: type[PacketKind | TransactionKind | BodyKind | CoatKind | HeadKind],
           ) -> dict[int, str]:
    return {member: f"\n{key} {int(member):x}" for member in enum}


# The lines of the enum fields, looked up rather than formatted (enum formatting is slow).
_PACKET_KIND_LINES = _lines("pk", PacketKind)
_HEAD_KIND_LINES = _lines("hk", HeadKind)
_TRANSACTION_KIND_LINES = _lines("tk", TransactionKind)
_BODY_KIND_LINES = _lines("bk", BodyKind)
_COAT_KIND_LINES = _lines("ck", CoatKind)
_FOOT_LINES = {kind: f"\nfk {int(kind):x}\nfl {foot_length(kind):x}" for kind in FootKind}


def _line(lines: dict[int, str], key: str, value: int) -> str:
    return lines.get(value) or f"\n{key} {int(value):x}"


def native_text_around_segments(head: Head) -> tuple[str, str]:  # noqa: PLR0912 - plain tests
    """The optional lines of ``head`` before and after the segment fields (``sn sc ml``).

    Each line is led by ``\\n``; only fields that differ from their defaults
    are written, in RAET's order, ``dt`` with six decimals and the rest in hex.
    """
    before = ""
    if head.version:
        before += f"\nvn {int(head.version):x}"
    if head.packet_kind:
        before += _line(_PACKET_KIND_LINES, "pk", head.packet_kind)
    if head.head_kind:
        before += _line(_HEAD_KIND_LINES, "hk", head.head_kind)
    if head.source_uid:
        before += f"\nse {head.source_uid:x}"
    if head.destination_uid:
        before += f"\nde {head.destination_uid:x}"
    if head.session_id:
        before += f"\nsi {head.session_id:x}"
    if head.transaction_id:
        before += f"\nti {head.transaction_id:x}"
    if head.transaction_kind:
        before += _line(_TRANSACTION_KIND_LINES, "tk", head.transaction_kind)
    if head.stamp:
        before += f"\ndt {head.stamp:f}"
    if head.order_index:
        before += f"\noi {head.order_index:x}"
    after = ""
    if head.body_kind:
        after += _line(_BODY_KIND_LINES, "bk", head.body_kind)
    if head.coat_kind:
        after += _line(_COAT_KIND_LINES, "ck", head.coat_kind)
    if head.foot_kind:
        after += _FOOT_LINES[head.foot_kind]
    return before, after


def segment_lines(number: int, count: int, length: int) -> str:
    """The ``sn``, ``sc`` and ``ml`` lines of a native head (each omitted at its default)."""
    text = f"\nsn {number:x}" if number else ""
    if count != 1:
        text += f"\nsc {count:x}"
    if length:
        text += f"\nml {length:x}"
    return text


def native_optional_text(head: Head) -> str:
    """The optional lines of ``head`` (each led by ``\\n``) in RAET's order: the
    fields that differ from their defaults, ``dt`` with six decimals, the rest in hex."""
    before, after = native_text_around_segments(head)
    return before + segment_lines(head.segment_number, head.segment_count,
                                  head.message_length) + after


def _optional_text_reference(head: Head) -> str:
    """:func:`native_optional_text` spelled from :func:`optional_fields` (for tests)."""
    return "".join(
        f"\ndt {value:f}" if key == "dt" else f"\n{key} {value:x}"
        for key, value in optional_fields(head)
    )


def native_size(head: Head) -> int:
    """Length in bytes of ``head`` written as a native head."""
    return _FIXED_SIZE + len(native_optional_text(head))


def pack_native(head: Head, coat_size: int) -> bytes:
    """``head`` as native lines, with ``pl``/``hl`` for a coat of ``coat_size`` bytes."""
    rest = native_optional_text(head)
    head_size = _FIXED_SIZE + len(rest)
    if head_size > MAX_HEAD_SIZE:
        raise LocalProtocolError(f"head of {head_size} bytes exceeds {MAX_HEAD_SIZE}")
    packet_size = head_size + coat_size + foot_length(head.foot_kind)
    if packet_size > _PL_LIMIT:
        raise LocalProtocolError(f"packet of {packet_size} bytes does not fit a native head")
    text = f"ri RAET\npl {packet_size:04x}\nhl {head_size:02x}\nfg {int(head.flags):02x}{rest}\n\n"
    return text.encode("ascii")


# -- the fast path -----------------------------------------------------------------

_H = rb"([0-9a-fA-F]{1,16}+)"  # possessive: a hex run never gives digits back
_CANONICAL = re.compile(
    rb"ri RAET\npl " + _H + rb"\nhl " + _H + rb"\n(?:fg " + _H + rb"\n)?"
    + b"".join(
        rb"(?:dt (-?[0-9]{1,30}+(?:\.[0-9]{0,30}+)?)\n)?" if key == "dt"
        else b"(?:" + key.encode("ascii") + b" " + _H + rb"\n)?"
        for key in FIELD_ORDER
    )
    + rb"\n"
)
_FAST_KEYS = ("pl", "hl", "fg", *FIELD_ORDER)
if len(_FAST_KEYS) != _CANONICAL.groups:  # pragma: no cover - guards the pattern
    raise ImportError("the canonical native head pattern lost a field")


def _members(enum: type[PacketKind | TransactionKind | BodyKind | CoatKind | FootKind],
             ) -> dict[int, object]:
    return {int(member): member for member in enum}


_PACKET_KINDS = _members(PacketKind)
_TRANSACTION_KINDS = _members(TransactionKind)
_BODY_KINDS = _members(BodyKind)
_COAT_KINDS = _members(CoatKind)
_FOOT_KINDS = _members(FootKind)
_FOOT_LENGTHS = {int(kind): foot_length(kind) for kind in FootKind}
_FLAGS = tuple(Flag(value) for value in range(UINT8_MAX + 1))
_SEGMENTED = int(Flag.SEGMENTED)
_NATIVE = HeadKind.RAET


def _fast(data: bytes) -> tuple[Head, int, int] | None:
    """The head of ``data`` when it is valid and in canonical order, else None."""
    match = _CANONICAL.match(data)
    if match is None:
        return None
    head_size = match.end()
    (pl, hl, fg, vn, pk, hk, se, de, si, ti, tk, dt, oi, sn, sc, ml, bk, ck, fk,
     fl) = match.groups()
    if head_size > MAX_HEAD_SIZE or int(hl, 16) != head_size or int(pl, 16) != len(data):
        return None
    if vn is not None and int(vn, 16) != 0:
        return None
    if hk is not None and int(hk, 16) != 0:
        return None
    foot_kind = _FOOT_KINDS.get(int(fk, 16)) if fk is not None else FootKind.NADA
    if foot_kind is None:
        return None
    foot_size = _FOOT_LENGTHS[foot_kind]  # type: ignore[index]
    if (int(fl, 16) if fl is not None else 0) != foot_size:
        return None
    packet_kind = _PACKET_KINDS.get(int(pk, 16)) if pk is not None else PacketKind.MESSAGE
    transaction_kind = (_TRANSACTION_KINDS.get(int(tk, 16)) if tk is not None
                        else TransactionKind.MESSAGE)
    body_kind = _BODY_KINDS.get(int(bk, 16)) if bk is not None else BodyKind.NADA
    coat_kind = _COAT_KINDS.get(int(ck, 16)) if ck is not None else CoatKind.NADA
    if packet_kind is None or transaction_kind is None or body_kind is None or coat_kind is None:
        return None
    flags = int(fg, 16) if fg is not None else 0
    source = int(se, 16) if se is not None else 0
    destination = int(de, 16) if de is not None else 0
    session = int(si, 16) if si is not None else 0
    transaction = int(ti, 16) if ti is not None else 0
    order = int(oi, 16) if oi is not None else 0
    number = int(sn, 16) if sn is not None else 0
    count = int(sc, 16) if sc is not None else 1
    length = int(ml, 16) if ml is not None else 0
    if (flags > UINT8_MAX or source > UINT32_MAX or destination > UINT32_MAX
            or session > UINT32_MAX or transaction > UINT32_MAX or order > UINT32_MAX
            or length > UINT32_MAX or number > UINT16_MAX or not 1 <= count <= UINT16_MAX
            or (number >= count and flags & _SEGMENTED)):
        return None
    stamp = float(dt) if dt is not None else 0.0  # at most 30 digits: always finite
    head = build_head(
        packet_kind, transaction_kind,  # type: ignore[arg-type]
        source_uid=source, destination_uid=destination, session_id=session,
        transaction_id=transaction, flags=_FLAGS[flags], segment_number=number,
        segment_count=count, message_length=length,
        body_kind=body_kind, coat_kind=coat_kind, foot_kind=foot_kind,  # type: ignore[arg-type]
        head_kind=_NATIVE, stamp=stamp, order_index=order,
    )
    return head, head_size, foot_size


def parse_native(data: bytes) -> tuple[Head, int, int]:
    """Read the native head at the front of packet ``data``.

    Returns (head, head length, foot length); the packet length written in the
    head must equal ``len(data)``.  Raises :class:`PacketError` for anything
    but a valid head, exactly as :func:`parse_native_reference` does.
    """
    parsed = _fast(data)
    if parsed is None:
        return parse_native_reference(data)
    return parsed


# -- the validating reference ------------------------------------------------------

def _value(key: str, text: str) -> int | float | str:
    if key == "ri":
        return text
    if key == "dt":
        if not _DECIMAL.fullmatch(text):
            raise PacketError("bad-field", f"dt value {text!r} is not a decimal number")
        return float(text)
    if not _HEX.fullmatch(text):
        raise PacketError("bad-field", f"{key} value {text!r} is not hex")
    return int(text, 16)


def parse_native_reference(data: bytes) -> tuple[Head, int, int]:
    """:func:`parse_native` by the letter: any line order, every field checked and named."""
    if not data.startswith(START):
        raise PacketError("bad-head", "native head does not start with 'ri RAET'")
    end = data.find(END, 0, MAX_HEAD_SIZE)
    if end < 0:
        raise PacketError("bad-head", "native head has no end within 255 bytes")
    head_size = end + len(END)
    fields: dict[str, int | float | str] = {}
    for line in data[:end].decode("latin-1").split("\n"):
        key, space, text = line.partition(" ")
        if not space or key not in _KNOWN:
            raise PacketError("bad-field", f"bad head line {line!r}")
        if key in fields:
            raise PacketError("bad-field", f"field {key} appears twice")
        fields[key] = _value(key, text)
    if fields.pop("ri") != "RAET":
        raise PacketError("bad-head", "ri is not RAET")
    packet_size = fields.pop("pl", None)
    if fields.pop("hl", None) != head_size:
        raise PacketError("bad-length", f"hl does not say {head_size}")
    if packet_size != len(data):
        raise PacketError("bad-length", f"pl does not say {len(data)}")
    if fields.get("hk", HeadKind.RAET) != HeadKind.RAET:
        raise PacketError("bad-head", "hk does not say native head")
    numbers = {key: value for key, value in fields.items() if not isinstance(value, str)}
    head = head_from_fields(numbers, HeadKind.RAET)
    check_parsed(head)
    return head, head_size, foot_length(head.foot_kind)
