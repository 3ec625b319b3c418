"""SP tag stacks: the backtrace of request/reply and survey/respond messages.

As in the scalability-protocol drafts (and nanomsg/nng's wire format), a
message starts with a stack of 32-bit big-endian tags.  Each REP/RESPONDENT
hop pushes the id of the channel the message came in on (top bit 0) on the
*front*; the request or survey id (top bit 1) was written first by the
requester and so sits last, right before the payload.  A reader takes tags
from the front until one has its top bit set.  A reply carries the same stack
back; each hop pops the front tag to learn the channel to send it on.

RAET-mode bodies are mappings, so the stack also has a mapping form: a list of
ints under :data:`MAPPING_KEY`, in the same order.  See docs/wire-lane.md.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raetlike.errors import LocalProtocolError, PacketError

__all__ = [
    "TAG_SIZE",
    "REQUEST_BIT",
    "DEFAULT_MAX_HOPS",
    "MAPPING_KEY",
    "is_request_id",
    "is_channel_id",
    "push",
    "pop",
    "split",
    "join",
    "split_mapping",
    "join_mapping",
    "Backtrace",
]

TAG_SIZE = 4
"""Bytes in one tag."""

REQUEST_BIT = 0x8000_0000
"""Set in a request/survey id, clear in a channel id."""

DEFAULT_MAX_HOPS = 8
"""Most tags a stack may hold, the request id included (nng's default TTL)."""

MAPPING_KEY = "sp"
"""The key under which a RAET-mode body carries its tag stack."""

_TAG = struct.Struct(">I")
_TAG_LIMIT = 1 << 32


def is_request_id(tag: int) -> bool:
    """True for a request/survey id: a 32-bit value with its top bit set."""
    return 0 <= tag < _TAG_LIMIT and bool(tag & REQUEST_BIT)


def is_channel_id(tag: int) -> bool:
    """True for a channel id: a 32-bit value with its top bit clear."""
    return 0 <= tag < REQUEST_BIT


def _check_stack(tags: Sequence[int]) -> None:
    """LocalProtocolError unless ``tags`` is channel ids ending in one request id."""
    if not tags or not is_request_id(tags[-1]):
        raise LocalProtocolError("a tag stack ends with a request id (top bit set)")
    if not all(is_channel_id(tag) for tag in tags[:-1]):
        raise LocalProtocolError("only the last tag of a stack may have its top bit set")


def push(tags: Sequence[int], channel_id: int) -> list[int]:
    """``tags`` with ``channel_id`` (the channel a message came in on) in front."""
    if not is_channel_id(channel_id):
        raise LocalProtocolError(f"channel id {channel_id:#x} must be 31 bits")
    _check_stack(tags)
    return [channel_id, *tags]


def pop(tags: Sequence[int]) -> tuple[int, list[int]]:
    """The front channel id (where a reply goes next) and the rest of the stack.

    Raises PacketError("malformed-tags") when only the request id is left:
    such a reply has no channel to go back on.
    """
    _check_stack(tags)
    if len(tags) == 1:
        raise PacketError("malformed-tags", "no channel id left to route the reply")
    return tags[0], list(tags[1:])


def split(data: bytes, max_hops: int = DEFAULT_MAX_HOPS) -> tuple[list[int], bytes]:
    """The tag stack at the front of ``data`` and the payload after it.

    Reads tags until one has its top bit set.  Raises PacketError
    ("ttl-exceeded") if ``max_hops`` tags pass without one, and
    ("malformed-tags") if the data ends first.
    """
    tags: list[int] = []
    offset = 0
    while True:
        if len(tags) >= max_hops:
            raise PacketError("ttl-exceeded", f"more than {max_hops} tags")
        if len(data) - offset < TAG_SIZE:
            raise PacketError("malformed-tags", "no tag with the top bit set")
        (tag,) = _TAG.unpack_from(data, offset)
        offset += TAG_SIZE
        tags.append(tag)
        if tag & REQUEST_BIT:
            return tags, data[offset:]


def join(tags: Sequence[int], payload: bytes) -> bytes:
    """``payload`` behind the tag stack ``tags`` (channel ids, then the request id)."""
    _check_stack(tags)
    return b"".join(_TAG.pack(tag) for tag in tags) + payload


def join_mapping(tags: Sequence[int], body: Mapping[str, Any]) -> dict[str, Any]:
    """A RAET-mode body: ``body`` with the stack as a list under MAPPING_KEY, first."""
    _check_stack(tags)
    if MAPPING_KEY in body:
        raise LocalProtocolError(f"body already has the key {MAPPING_KEY!r}")
    return {MAPPING_KEY: list(tags), **body}


def split_mapping(
    body: Mapping[str, Any], max_hops: int = DEFAULT_MAX_HOPS
) -> tuple[list[int], dict[str, Any]]:
    """The stack carried in a RAET-mode body, and the body without it.

    The same rules as :func:`split`: PacketError("malformed-tags") for a
    missing or ill-formed list, ("ttl-exceeded") for more than ``max_hops``.
    """
    value = body.get(MAPPING_KEY)
    if not isinstance(value, list) or not value:
        raise PacketError("malformed-tags", f"no list under {MAPPING_KEY!r}")
    if not all(type(tag) is int for tag in value):
        raise PacketError("malformed-tags", "tags must be integers")
    if len(value) > max_hops:
        raise PacketError("ttl-exceeded", f"{len(value)} tags, at most {max_hops}")
    tags: list[int] = value
    if not is_request_id(tags[-1]) or not all(is_channel_id(tag) for tag in tags[:-1]):
        raise PacketError("malformed-tags", "channel ids must end in one request id")
    rest = {key: item for key, item in body.items() if key != MAPPING_KEY}
    return list(tags), rest


@dataclass(frozen=True, slots=True)
class Backtrace:
    """A tag stack as a value: the hops' channel ids (front first) and the request id."""

    channels: tuple[int, ...]
    """Channel ids, the most recently pushed first."""
    request_id: int
    """The request or survey id (top bit set)."""

    def __post_init__(self) -> None:
        """Check the ids have the right top bits; LocalProtocolError otherwise."""
        _check_stack([*self.channels, self.request_id])

    @classmethod
    def from_tags(cls, tags: Sequence[int]) -> Backtrace:
        """The backtrace of a stack in wire order."""
        _check_stack(tags)
        return cls(tuple(tags[:-1]), tags[-1])

    @property
    def tags(self) -> list[int]:
        """The stack in wire order."""
        return [*self.channels, self.request_id]

    @property
    def hops(self) -> int:
        """How many channel ids the stack holds."""
        return len(self.channels)

    def push(self, channel_id: int) -> Backtrace:
        """This backtrace with ``channel_id`` in front."""
        return Backtrace.from_tags(push(self.tags, channel_id))

    def pop(self) -> tuple[int, Backtrace]:
        """The front channel id and the backtrace behind it (see :func:`pop`)."""
        channel, rest = pop(self.tags)
        return channel, Backtrace.from_tags(rest)
