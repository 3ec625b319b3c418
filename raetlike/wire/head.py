"""Road packet heads: the :class:`Head` value and its three wire forms.

``head_kind`` picks the form: native RAET lines (``hk`` 0), compact JSON
(``hk`` 1) or raetlike's binary layout (``hk`` 2).  A parser tells the forms
apart by the first byte: ``r``, ``{`` or the binary magic ``0xB2``.  See
docs/wire.md for the exact bytes.
"""

from __future__ import annotations

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_binary import BINARY_HEAD_SIZE, MAGIC, pack_binary, parse_binary
from raetlike.wire._head_json import json_size, pack_json, parse_json
from raetlike.wire._head_model import Head, build_head, check_head, foot_length
from raetlike.wire._head_native import native_size, pack_native, parse_native
from raetlike.wire.kinds import HeadKind

__all__ = [
    "Head",
    "build_head",
    "BINARY_HEAD_SIZE",
    "BINARY_MAGIC",
    "pack_head",
    "parse_head",
    "head_size",
    "foot_length",
]

BINARY_MAGIC = MAGIC
_NATIVE_FIRST = ord("r")
_JSON_FIRST = ord("{")


def pack_head(head: Head, coat_size: int) -> bytes:
    """The wire bytes of ``head`` for a packet carrying ``coat_size`` coat bytes.

    ``pl``, ``hl`` and ``fl`` are computed here (``fl`` from ``foot_kind``).
    Raises :class:`LocalProtocolError` when a field does not fit its width or
    the head or packet is too long for its form.
    """
    kind = head.head_kind
    if kind is HeadKind.BINARY:
        return pack_binary(head, coat_size)
    check_head(head)
    if kind is HeadKind.RAET:
        return pack_native(head, coat_size)
    if kind is HeadKind.JSON:
        return pack_json(head, coat_size)
    raise LocalProtocolError(f"unknown head kind {kind!r}")


def head_size(head: Head) -> int:
    """How many bytes ``head`` takes on the wire (independent of the coat size)."""
    kind = head.head_kind
    if kind is HeadKind.BINARY:
        return BINARY_HEAD_SIZE
    check_head(head)
    if kind is HeadKind.RAET:
        return native_size(head)
    if kind is HeadKind.JSON:
        return json_size(head)
    raise LocalProtocolError(f"unknown head kind {kind!r}")


def parse_head(data: bytes) -> tuple[Head, int, int]:
    """Read the head of the whole packet ``data``: (head, head length, foot length).

    Checks ``pl`` against ``len(data)``, ``hl`` against the head, ``fl``
    against ``fk``, and that head and foot fit in the packet.  Raises
    :class:`PacketError` for anything else than a valid head.
    """
    if not data:
        raise PacketError("empty", "no bytes")
    first = data[0]
    if first == MAGIC:
        return parse_binary(data)  # checks the overrun itself
    if first == _NATIVE_FIRST:
        parsed = parse_native(data)
    elif first == _JSON_FIRST:
        parsed = parse_json(data)
    else:
        raise PacketError("bad-head", f"unknown head start byte {first:#04x}")
    if parsed[1] + parsed[2] > len(data):
        raise PacketError("bad-length", "head and foot overrun the packet")
    return parsed
