"""How a tag stack and a body become one channel payload, and back.

Two forms (see docs/sp.md):

- ``Framing.BYTES`` (raetlike fast mode): the 32-bit tags, then the body bytes.
- ``Framing.MAPPING`` (RAET mode): ``{"sp": [tags...], "body": body}``, a
  mapping body a RAET 0.6.8 peer can carry; ``body`` is any JSON/msgpack value.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.sp._channel import Payload
from raetlike.wire import tags as tag_codec

__all__ = ["BODY_KEY", "Framing", "carries", "encode", "decode"]

BODY_KEY = "body"
"""The key of the application body in the mapping form."""


class Framing(enum.Enum):
    """Which payload form an endpoint writes and reads."""

    BYTES = "bytes"
    """Tag bytes then body bytes."""
    MAPPING = "mapping"
    """A mapping with the tag list under ``sp`` and the body under ``body``."""


def carries(framing: Framing, body: object) -> bool:
    """True if ``framing`` can carry ``body``: BYTES only bytes, MAPPING any value.

    A device whose front and back frame differently forwards bodies a peer
    chose; it asks this first and drops (and counts) what the other side
    cannot carry instead of letting :func:`encode` raise.
    """
    return framing is not Framing.BYTES or isinstance(body, bytes | bytearray | memoryview)


def encode(framing: Framing, tags: Sequence[int], body: Any) -> Payload:
    """The payload carrying ``body`` behind the tag stack ``tags``.

    LocalProtocolError if ``framing`` cannot carry ``body`` (see :func:`carries`).
    """
    if framing is Framing.BYTES:
        if not isinstance(body, bytes | bytearray | memoryview):
            raise LocalProtocolError("the bytes framing carries bytes bodies only")
        return tag_codec.join(tags, bytes(body))
    return tag_codec.join_mapping(tags, {BODY_KEY: body})


def decode(framing: Framing, payload: object, max_hops: int) -> tuple[list[int], Any]:
    """The tag stack and body of ``payload``; PacketError if it is not well formed."""
    if framing is Framing.BYTES:
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise PacketError("malformed-tags", "expected a bytes payload")
        return tag_codec.split(bytes(payload), max_hops)
    if not isinstance(payload, Mapping):
        raise PacketError("malformed-tags", "expected a mapping payload")
    stack, rest = tag_codec.split_mapping(payload, max_hops)
    if set(rest) != {BODY_KEY}:
        raise PacketError("malformed-body", f"expected only {BODY_KEY!r} beside the tags")
    return stack, rest[BODY_KEY]
