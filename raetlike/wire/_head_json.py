"""The JSON head (``hk`` 1): a compact JSON object ended by ``\\r\\n\\r\\n``.

``pl`` (seven hex digits), ``hl`` (two) and ``fg`` (two) are JSON strings;
every other value is a JSON number.
"""

from __future__ import annotations

import json
import re
from typing import Any

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_model import Head, check_parsed, foot_length
from raetlike.wire._head_text import FIELD_ORDER, head_from_fields, optional_fields
from raetlike.wire.kinds import MAX_HEAD_SIZE, HeadKind

__all__ = ["START", "END", "pack_json", "parse_json", "json_size"]

START = b'{"ri":"RAET",'
END = b"\r\n\r\n"
_PL_LIMIT = 0xFFFFFFF  # pl is written with seven hex digits
_FIXED_SIZE = len('{"ri":"RAET","pl":"0000000","hl":"00","fg":"00"}') + len(END)
_HEX = re.compile(r"[0-9a-fA-F]{1,16}")
_KNOWN = frozenset(FIELD_ORDER)


def _optional_text(head: Head) -> str:
    return "".join(
        f',"dt":{float(value)!r}' if key == "dt" else f',"{key}":{value}'
        for key, value in optional_fields(head)
    )


def json_size(head: Head) -> int:
    """Length in bytes of ``head`` written as a JSON head."""
    return _FIXED_SIZE + len(_optional_text(head))


def pack_json(head: Head, coat_size: int) -> bytes:
    """``head`` as a JSON head, with ``pl``/``hl`` for a coat of ``coat_size`` bytes."""
    rest = _optional_text(head)
    head_size = _FIXED_SIZE + len(rest)
    if head_size > MAX_HEAD_SIZE:
        raise LocalProtocolError(f"head of {head_size} bytes exceeds {MAX_HEAD_SIZE}")
    packet_size = head_size + coat_size + foot_length(head.foot_kind)
    if packet_size > _PL_LIMIT:
        raise LocalProtocolError(f"packet of {packet_size} bytes does not fit a JSON head")
    text = (
        f'{{"ri":"RAET","pl":"{packet_size:07x}","hl":"{head_size:02x}",'
        f'"fg":"{int(head.flags):02x}"{rest}}}\r\n\r\n'
    )
    return text.encode("ascii")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key in fields:
            raise PacketError("bad-field", f"field {key} appears twice")
        fields[key] = value
    return fields


def _hex_string(fields: dict[str, Any], key: str) -> int | None:
    value = fields.pop(key, None)
    if value is None:
        return None
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise PacketError("bad-field", f"{key} is not a hex string")
    return int(value, 16)


def parse_json(data: bytes) -> tuple[Head, int, int]:
    """Read the JSON head at the front of packet ``data``.

    Returns (head, head length, foot length); the packet length written in the
    head must equal ``len(data)``.
    """
    if not data.startswith(START):
        raise PacketError("bad-head", 'JSON head does not start with {"ri":"RAET",')
    end = data.find(END, 0, MAX_HEAD_SIZE)
    if end < 0:
        raise PacketError("bad-head", "JSON head has no end within 255 bytes")
    head_size = end + len(END)
    try:
        fields = json.loads(data[:end].decode("ascii"), object_pairs_hook=_pairs)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise PacketError("bad-head", f"JSON head does not decode: {exc}") from None
    if not isinstance(fields, dict):
        raise PacketError("bad-head", "JSON head is not an object")
    if fields.pop("ri", None) != "RAET":
        raise PacketError("bad-head", "ri is not RAET")
    packet_size = _hex_string(fields, "pl")
    if _hex_string(fields, "hl") != head_size:
        raise PacketError("bad-length", f"hl does not say {head_size}")
    if packet_size != len(data):
        raise PacketError("bad-length", f"pl does not say {len(data)}")
    flags = _hex_string(fields, "fg")
    unknown = set(fields) - _KNOWN
    if unknown:
        raise PacketError("bad-field", f"unknown head fields {sorted(unknown)}")
    if fields.get("hk") != HeadKind.JSON or type(fields["hk"]) is not int:
        raise PacketError("bad-head", "hk does not say JSON head")
    for key, value in fields.items():
        if type(value) is not int and not (key == "dt" and type(value) is float):
            raise PacketError("bad-field", f"{key} is not a number")
    if flags is not None:
        fields["fg"] = flags
    head = head_from_fields(fields, HeadKind.JSON)
    check_parsed(head)
    return head, head_size, foot_length(head.foot_kind)
