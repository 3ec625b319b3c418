"""Coalesced datagrams: many whole messages in one datagram, between two raetlike yards.

RAET 0.6.8 carries one page per datagram, and a RAET yard keeps getting
exactly that.  Two raetlike yards agree on more, without a word a RAET yard
could see:

- A raetlike yard's session id begins with :data:`COALESCING_MARK`.  A RAET
  yard's never does: RAET writes the microsecond clock in hex (no leading
  zero), then random digits.
- A yard that coalesces, on hearing from a marked yard directly (from that
  yard's own socket) under a session it has not granted yet, sends it a
  *grant*: ``rlg 1\\n<grantor>\\n<grantee>\\n<grantor's session>\\n<limit>\\n\\n``,
  ``limit`` being the largest datagram the grantor takes.
- The grantee then sends its one-page messages to the grantor in *batches*:
  ``rlb 1\\n<source>\\n<destination>\\n<source session>\\n<page kind>\\n\\n``
  and then, for each message, the length of its body (4 bytes, big-endian)
  and the body exactly as a page would carry it (JSON or msgpack).

Neither starts with ``ri RAET``, so neither can be taken for a page.  A
batch is taken by the kernel whole or refused whole, so the lane's delivery
and backpressure rules hold for it as for a page (docs/lane.md, "Coalescing").

Pure: no sockets, no clocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind

__all__ = ["BATCH_MAGIC", "COALESCING_MARK", "GRANT_MAGIC", "Batch", "batch_head", "bodies",
           "grant", "read_batch_head", "read_grant"]

COALESCING_MARK = "01"
"""How a raetlike yard's session id begins: it reads batches and answers grants (version 1)."""

BATCH_MAGIC = b"rlb 1\n"
GRANT_MAGIC = b"rlg 1\n"
LENGTH_SIZE = 4
_HEAD_SCAN = 512  # names are at most a few hundred bytes
_KINDS = {str(int(kind)): kind for kind in PageKind}
_LIMIT = re.compile("[0-9]{1,6}")  # ASCII digits: str.isdigit() passes "\xb9", int() refuses it


def _fields(data: bytes, magic: bytes, count: int) -> list[str] | None:
    """The ``count`` lines after ``magic`` up to the blank line, or None if malformed."""
    end = data.find(b"\n\n", 0, _HEAD_SCAN)
    if end < len(magic) or not data.startswith(magic):
        return None  # (no blank line, or none after the magic: no fields at all)
    fields = data[len(magic):end].decode("latin-1").split("\n")  # as page heads are
    if len(fields) != count or not all(fields):
        return None
    return fields


def grant(grantor: str, grantee: str, session: str, limit: int) -> bytes:
    """The datagram telling ``grantee`` it may send batches of up to ``limit`` bytes."""
    return GRANT_MAGIC + f"{grantor}\n{grantee}\n{session}\n{limit}\n\n".encode("latin-1")


def read_grant(data: bytes) -> tuple[str, str, str, int] | None:
    """``(grantor, grantee, grantor's session, limit)``, or None for a malformed grant."""
    fields = _fields(data, GRANT_MAGIC, 4)
    if fields is None or not _LIMIT.fullmatch(fields[3]):
        return None
    grantor, grantee, session, limit = fields
    return grantor, grantee, session, int(limit)


def batch_head(source: str, destination: str, session: str, kind: PageKind) -> bytes:
    """What a batch from ``source`` to ``destination`` begins with."""
    return BATCH_MAGIC + f"{source}\n{destination}\n{session}\n{int(kind)}\n\n".encode(
        "latin-1")


def read_batch_head(data: bytes) -> tuple[str, str, str, PageKind, int] | None:
    """``(source, destination, session, kind, where the bodies begin)``, or None."""
    fields = _fields(data, BATCH_MAGIC, 4)
    if fields is None or len(data) > MAX_PAGE_SIZE:
        return None
    kind = _KINDS.get(fields[3])
    if kind is None:
        return None
    return fields[0], fields[1], fields[2], kind, data.index(b"\n\n") + 2


def bodies(data: bytes, offset: int) -> Iterator[bytes]:
    """The bodies of a batch from ``offset``; stops at the first length that overruns.

    Only bodies wholly there are yielded: the caller tells a cut batch by adding
    up what it got against the datagram's length.
    """
    end = len(data)
    while offset + LENGTH_SIZE <= end:
        length = int.from_bytes(data[offset:offset + LENGTH_SIZE], "big")
        offset += LENGTH_SIZE
        if offset + length > end:
            return
        yield data[offset:offset + length]
        offset += length


class Batch:
    """A batch being filled: its bytes so far, and the messages it carries."""

    __slots__ = ("buffer", "head_size", "message_ids", "messages", "sealed")

    def __init__(self, head: bytes) -> None:
        self.buffer = bytearray(head)
        self.head_size = len(head)
        self.message_ids: list[int] = []
        self.messages: list[Mapping[str, Any]] = []
        self.sealed = False
        """Handed to the driver once: nothing more may join it."""

    def fits(self, body: bytes, limit: int) -> bool:
        """Whether ``body`` may join without the batch passing ``limit`` bytes."""
        return not self.sealed and len(self.buffer) + LENGTH_SIZE + len(body) <= limit

    def add(self, message_id: int, message: Mapping[str, Any], body: bytes) -> None:
        """Append one message's body."""
        self.buffer += len(body).to_bytes(LENGTH_SIZE, "big")
        self.buffer += body
        self.message_ids.append(message_id)
        self.messages.append(message)

    def seal(self) -> bytes:
        """The datagram; the batch takes no more."""
        self.sealed = True
        return bytes(self.buffer)

    def bodies(self) -> list[bytes]:
        """The bodies as serialized when they joined (to page them, if the batch cannot go)."""
        return list(bodies(bytes(self.buffer), self.head_size))
