"""The native RAET head (``hk`` 0): ASCII ``key value`` lines ended by an empty line."""

from __future__ import annotations

import re

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_model import Head, check_parsed, foot_length
from raetlike.wire._head_text import FIELD_ORDER, head_from_fields, optional_fields
from raetlike.wire.kinds import MAX_HEAD_SIZE, HeadKind

__all__ = ["START", "END", "pack_native", "parse_native", "native_size"]

START = b"ri RAET\n"
END = b"\n\n"
_PL_LIMIT = 0xFFFF  # pl is written with four hex digits
# "ri RAET\npl XXXX\nhl XX\nfg XX", then the optional lines, then "\n\n".
_FIXED_SIZE = len("ri RAET\npl 0000\nhl 00\nfg 00") + len(END)
_HEX = re.compile(r"[0-9a-fA-F]{1,16}")
_DECIMAL = re.compile(r"-?[0-9]{1,30}(\.[0-9]{0,30})?")
_KNOWN = frozenset(FIELD_ORDER) | {"ri", "pl", "hl", "fg"}


def _optional_text(head: Head) -> str:
    return "".join(
        f"\ndt {value:f}" if key == "dt" else f"\n{key} {value:x}"
        for key, value in optional_fields(head)
    )


def native_size(head: Head) -> int:
    """Length in bytes of ``head`` written as a native head."""
    return _FIXED_SIZE + len(_optional_text(head))


def pack_native(head: Head, coat_size: int) -> bytes:
    """``head`` as native lines, with ``pl``/``hl`` for a coat of ``coat_size`` bytes."""
    rest = _optional_text(head)
    head_size = _FIXED_SIZE + len(rest)
    if head_size > MAX_HEAD_SIZE:
        raise LocalProtocolError(f"head of {head_size} bytes exceeds {MAX_HEAD_SIZE}")
    packet_size = head_size + coat_size + foot_length(head.foot_kind)
    if packet_size > _PL_LIMIT:
        raise LocalProtocolError(f"packet of {packet_size} bytes does not fit a native head")
    text = f"ri RAET\npl {packet_size:04x}\nhl {head_size:02x}\nfg {int(head.flags):02x}{rest}\n\n"
    return text.encode("ascii")


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


def parse_native(data: bytes) -> tuple[Head, int, int]:
    """Read the native head at the front of packet ``data``.

    Returns (head, head length, foot length); the packet length written in the
    head must equal ``len(data)``.
    """
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
