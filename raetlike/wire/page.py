"""Lane pages: the datagram format of RAET 0.6.8 lanes (UXD), byte for byte.

A page is a head of ASCII lines ``key value`` in the fixed order
``ri vn pk sn dn si bi pn pc``, closed by an empty line (``\\n\\n``), then the
body: a slice of one message serialized as JSON or msgpack.  Every field is
always written, defaults included.  A message whose single page would exceed
:data:`~raetlike.wire.kinds.MAX_PAGE_SIZE` is serialized once and the bytes
are cut into sections, each sent under its own head.  See docs/wire-lane.md.

This module is pure: no sockets, no clocks.  :class:`Binder` gathers the pages
of a book (one message) back into the message.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.kinds import MAX_MESSAGE_SIZE, MAX_PAGE_SIZE, MAX_SEGMENT_COUNT, PageKind

__all__ = [
    "HEAD_END",
    "YARD_SESSION_LENGTH",
    "MAX_BOOK_ID",
    "PageHead",
    "pack_page",
    "parse_page",
    "encode_body",
    "decode_body",
    "paginate",
    "BinderStats",
    "Binder",
]

logger = logging.getLogger(__name__)

HEAD_END = b"\n\n"
"""Closes a page head."""

YARD_SESSION_LENGTH = 18
"""A yard session id is this many hex characters (fresh for each process)."""

MAX_BOOK_ID = 0xFFFFFFFF
"""Book ids count up from 1 and roll over from here back to 1."""

MAX_VERSION = 0xFF
"""The largest protocol version a head may carry (RAET writes 0)."""

_MAGIC = "RAET"
_MAGIC_LINE = b"ri RAET\n"
_FIELD_ORDER = ("ri", "vn", "pk", "sn", "dn", "si", "bi", "pn", "pc")
_HEX = re.compile(r"[0-9a-fA-F]{1,8}")
_SESSION = re.compile(r"[0-9a-fA-F]{18}")
# RAET cuts a message into sections two bytes shorter than the room a head
# leaves in a page ("extrasize" in RAET's paging); kept for byte equality.
_SECTION_SLACK = 2
# Characters that would break a head line (the field separator, the line end) or
# do not fit in Latin-1.
_FORBIDDEN_IN_NAME = re.compile("[ \n\u0100-\U0010ffff]")
# The whole head of a well-formed page, in one match: the fast path of parse_page.
# A page it does not match (or whose numbers are out of range) goes the slow way,
# which accepts exactly the same pages and says what is wrong with the others.
_FAST_HEAD = re.compile(
    rb"ri RAET\nvn ([0-9a-fA-F]{1,8})\npk ([0-9a-fA-F]{1,8})\nsn ([^ \n]*)\ndn ([^ \n]*)\n"
    rb"si ([0-9a-fA-F]{18})\nbi ([0-9a-fA-F]{1,8})\n"
    rb"pn ([0-9a-fA-F]{1,8})\npc ([0-9a-fA-F]{1,8})\n\n"
)
_KINDS = {int(kind): kind for kind in PageKind}
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=...)
_JSON_DECODER = json.JSONDecoder()


def _check_name(what: str, name: str) -> None:
    """Raise LocalProtocolError unless ``name`` can stand as a yard name in a head."""
    if _FORBIDDEN_IN_NAME.search(name):
        raise LocalProtocolError(f"{what} {name!r} must be Latin-1 without spaces or newlines")


@dataclass(frozen=True, slots=True)
class PageHead:
    """The head of one lane page."""

    source: str
    """Name of the yard that sent the page (``sn``)."""
    destination: str
    """Name of the yard the page is for (``dn``)."""
    yard_session: str
    """The sender's session id, 18 hex characters, fresh per process (``si``)."""
    book_id: int
    """Which message (book) of this sender the page belongs to (``bi``)."""
    page_number: int = 0
    """Position of this page in its book, from 0 (``pn``)."""
    page_count: int = 1
    """How many pages the book has (``pc``)."""
    kind: PageKind = PageKind.JSON
    """How the message is serialized (``pk``)."""
    version: int = 0
    """Protocol version (``vn``), 0 in RAET 0.6.8."""

    def __post_init__(self) -> None:
        """Check every field fits the wire; LocalProtocolError otherwise."""
        _check_name("source", self.source)
        _check_name("destination", self.destination)
        if not _SESSION.fullmatch(self.yard_session):
            raise LocalProtocolError(
                f"yard session {self.yard_session!r} is not {YARD_SESSION_LENGTH} hex characters"
            )
        if not 0 <= self.book_id <= MAX_BOOK_ID:
            raise LocalProtocolError(f"book id {self.book_id} out of range")
        if not 1 <= self.page_count <= MAX_SEGMENT_COUNT:
            raise LocalProtocolError(f"page count {self.page_count} out of range")
        if not 0 <= self.page_number < self.page_count:
            raise LocalProtocolError(
                f"page number {self.page_number} not below page count {self.page_count}"
            )
        if not isinstance(self.kind, PageKind):
            raise LocalProtocolError(f"page kind {self.kind!r} is not a PageKind")
        if not 0 <= self.version <= MAX_VERSION:
            raise LocalProtocolError(f"version {self.version} out of range")


_new = object.__new__
_set = object.__setattr__


def _checked_head(  # noqa: PLR0917 - every field of a head, already checked
    source: str, destination: str, yard_session: str, book_id: int,
    page_number: int, page_count: int, kind: PageKind, version: int,
) -> PageHead:
    """A PageHead from fields the fast parse already checked (skips ``__post_init__``)."""
    head: PageHead = _new(PageHead)
    _set(head, "source", source)
    _set(head, "destination", destination)
    _set(head, "yard_session", yard_session)
    _set(head, "book_id", book_id)
    _set(head, "page_number", page_number)
    _set(head, "page_count", page_count)
    _set(head, "kind", kind)
    _set(head, "version", version)
    return head


def _pack_head(head: PageHead) -> bytes:
    """The head lines of ``head``, closed by the empty line."""
    lines = (
        f"ri {_MAGIC}",
        f"vn {head.version:x}",
        f"pk {int(head.kind):x}",
        f"sn {head.source}",
        f"dn {head.destination}",
        f"si {head.yard_session}",
        f"bi {head.book_id:x}",
        f"pn {head.page_number:04x}",
        f"pc {head.page_count:04x}",
    )
    return "\n".join(lines).encode("latin-1") + HEAD_END


def pack_page(head: PageHead, body: bytes) -> bytes:
    """One datagram: the head of ``head`` then ``body`` as is.

    Raises LocalProtocolError if the page would exceed MAX_PAGE_SIZE.
    """
    page = _pack_head(head) + body
    if len(page) > MAX_PAGE_SIZE:
        raise LocalProtocolError(f"page of {len(page)} bytes exceeds {MAX_PAGE_SIZE}")
    return page


def _hex_field(key: str, value: str) -> int:
    if not _HEX.fullmatch(value):
        raise PacketError("bad-field", f"{key} {value!r} is not hex")
    return int(value, 16)


def parse_page(data: bytes) -> tuple[PageHead, bytes]:
    """Split one datagram into its head and its (still serialized) body.

    Accepts exactly the form RAET 0.6.8 writes: all nine fields, in order.
    Raises PacketError (and nothing else) for anything malformed.
    """
    if len(data) > MAX_PAGE_SIZE:
        raise PacketError("page-too-large", f"{len(data)} bytes")
    match = _FAST_HEAD.match(data)
    if match is not None:
        version, kind_value, source, destination, session, book, number, count = match.groups()
        if number == b"0000" and count == b"0001":  # one page: the common case
            page_number, page_count = 0, 1
        else:
            page_number, page_count = int(number, 16), int(count, 16)
        kind = _KINDS.get(int(kind_value, 16))
        vn = 0 if version == b"0" else int(version, 16)
        if kind is not None and page_number < page_count <= MAX_SEGMENT_COUNT and vn <= MAX_VERSION:
            head = _checked_head(source.decode("latin-1"), destination.decode("latin-1"),
                                 session.decode("ascii"), int(book, 16), page_number, page_count,
                                 kind, vn)
            return head, data[match.end():]
    return _parse_slowly(data)


def _parse_slowly(data: bytes) -> tuple[PageHead, bytes]:
    """parse_page for pages off the fast path: the same checks, one field at a time."""
    if not data.startswith(_MAGIC_LINE):
        raise PacketError("not-a-page", "does not start with 'ri RAET'")
    front, separator, body = data.partition(HEAD_END)
    if not separator:
        raise PacketError("not-a-page", "head is not closed by an empty line")
    lines = front.decode("latin-1").split("\n")
    if len(lines) != len(_FIELD_ORDER):
        raise PacketError("bad-head", f"{len(lines)} head lines, expected {len(_FIELD_ORDER)}")
    values: dict[str, str] = {}
    for expected, line in zip(_FIELD_ORDER, lines, strict=True):
        key, space, value = line.partition(" ")
        if not space or " " in value:
            raise PacketError("bad-head", f"line {line!r} is not 'key value'")
        if key != expected:
            raise PacketError("bad-head", f"field {key!r} where {expected!r} belongs")
        values[key] = value
    if values["ri"] != _MAGIC:
        raise PacketError("not-a-page", f"ri {values['ri']!r}")
    kind_value = _hex_field("pk", values["pk"])
    try:
        kind = PageKind(kind_value)
    except ValueError:
        raise PacketError("unknown-page-kind", f"pk {kind_value}") from None
    try:
        head = PageHead(
            source=values["sn"],
            destination=values["dn"],
            yard_session=values["si"],
            book_id=_hex_field("bi", values["bi"]),
            page_number=_hex_field("pn", values["pn"]),
            page_count=_hex_field("pc", values["pc"]),
            kind=kind,
            version=_hex_field("vn", values["vn"]),
        )
    except LocalProtocolError as error:
        raise PacketError("bad-field", str(error)) from None
    return head, body


def encode_body(message: Mapping[str, Any], kind: PageKind) -> bytes:
    """Serialize ``message`` as RAET does: compact JSON or msgpack; empty for ``{}``."""
    if not message:
        return b""
    try:
        if kind is PageKind.JSON:
            return _JSON_ENCODER.encode(message).encode("utf-8")
        packed: bytes = msgpack.packb(message)
    except (TypeError, ValueError, OverflowError, RecursionError) as error:
        # (RecursionError: a body nested ~1,000 deep, which a msgpack road delivers, climbed
        # out of a lane's transmit and ended a manor running the bus)
        raise LocalProtocolError(f"message does not serialize as {kind.name}: {error}") from None
    return packed


def decode_body(body: bytes, kind: PageKind) -> dict[str, Any]:
    """The message in ``body``; PacketError("bad-body") unless it is a mapping."""
    if not body:
        return {}
    try:
        if kind is PageKind.JSON:
            message = _JSON_DECODER.decode(body.decode("utf-8"))
        else:
            message = msgpack.unpackb(body, raw=False)
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as error:
        raise PacketError("bad-body", f"{kind.name}: {error}") from None
    if not isinstance(message, dict):
        raise PacketError("bad-body", f"{kind.name} body is a {type(message).__name__}")
    return message


def paginate(  # noqa: PLR0917 - the agreed signature: the head fields in wire order
    source: str,
    destination: str,
    yard_session: str,
    book_id: int,
    message: Mapping[str, Any],
    kind: PageKind = PageKind.JSON,
) -> list[bytes]:
    """The datagrams that carry ``message``, exactly as RAET 0.6.8 cuts them.

    The message is serialized once.  If head and body fit in one page, that
    is the book.  Otherwise the bytes are cut into sections of
    ``MAX_PAGE_SIZE - head size - 2`` bytes (the head measured as for a
    one-page book), each under a head with its page number and the count.
    Raises LocalProtocolError if the body exceeds MAX_MESSAGE_SIZE.
    """
    body = encode_body(message, kind)
    if len(body) > MAX_MESSAGE_SIZE:
        raise LocalProtocolError(f"message of {len(body)} bytes exceeds {MAX_MESSAGE_SIZE}")
    if not 0 <= book_id <= MAX_BOOK_ID:
        PageHead(source, destination, yard_session, book_id, kind=kind)  # raises the error
    prefix = _head_prefix(source, destination, yard_session, kind)
    head = prefix + b"%x\npn 0000\npc 0001\n\n" % book_id
    if len(head) + len(body) <= MAX_PAGE_SIZE:
        return [head + body]
    section = MAX_PAGE_SIZE - len(head) - _SECTION_SLACK
    count = -(-len(body) // section)
    if count > MAX_SEGMENT_COUNT:
        raise LocalProtocolError(f"page count {count} out of range")
    return [
        prefix + b"%x\npn %04x\npc %04x\n\n" % (book_id, number, count)
        + body[number * section : (number + 1) * section]
        for number in range(count)
    ]


@functools.lru_cache(maxsize=1024, typed=True)
def _head_prefix(source: str, destination: str, yard_session: str, kind: PageKind) -> bytes:
    """A head up to the book id (``bi ``) as ``_pack_head`` writes it; checks the fields."""
    head = PageHead(source, destination, yard_session, 0, kind=kind)
    packed = _pack_head(head)
    return packed[: packed.index(b"\nbi ") + len(b"\nbi ")]


@dataclass(slots=True)
class BinderStats:
    """What a :class:`Binder` dropped, and why."""

    pages: int = 0
    """Pages handed to the binder."""
    messages: int = 0
    """Messages given back whole."""
    missed_first_page: int = 0
    """Pages dropped because their book's first page never opened the book."""
    stale_books: int = 0
    """Half-received books dropped because their yard's session changed."""
    evicted_books: int = 0
    """Half-received books dropped to keep within the binder's limits."""
    evicted_bytes: int = 0
    """Bytes those evicted books held."""
    inconsistent_pages: int = 0
    """Pages dropped because their count or kind disagreed with their book."""


@dataclass(slots=True)
class _Book:
    """The sections of one message received so far."""

    page_count: int
    kind: PageKind
    sections: dict[int, bytes]
    """Sections received, by page number: memory follows pages received, not the count
    a head announces."""
    size: int = 0


_BookKey = tuple[str, str, int]  # (source yard, yard session, book id)


@dataclass(slots=True)
class Binder:
    """Gathers lane pages into whole messages, as a RAET 0.6.8 lane does.

    Books are keyed by (source yard, yard session, book id).  A book is opened
    only by its page 0: a later page that finds no open book is dropped (as
    RAET decides it, the first page missed), and the rest of that book then
    never completes.  When a yard's session changes, its half-received books
    from other sessions are dropped.  Memory is bounded: at most
    ``max_open_books`` books holding at most ``max_buffered_bytes`` bytes, the
    oldest book dropped first; at most ``max_sources`` yards' sessions are
    remembered (least recently heard forgotten).
    """

    max_open_books: int = 64
    """Most half-received books kept at once."""
    max_buffered_bytes: int = MAX_MESSAGE_SIZE
    """Most section bytes kept at once, over all books."""
    max_sources: int = 1024
    """Most yards whose current session is remembered."""
    stats: BinderStats = field(default_factory=BinderStats)
    """Counters of what was delivered and what was dropped."""
    _books: OrderedDict[_BookKey, _Book] = field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _sessions: OrderedDict[str, str] = field(default_factory=OrderedDict, init=False, repr=False)
    _buffered: int = field(default=0, init=False, repr=False)

    @property
    def open_books(self) -> int:
        """How many books are half received."""
        return len(self._books)

    @property
    def buffered_bytes(self) -> int:
        """How many section bytes the open books hold."""
        return self._buffered

    def add(self, data: bytes) -> dict[str, Any] | None:
        """Take one datagram; the whole message once its book is complete.

        Raises PacketError for a malformed page or an undecodable message.
        """
        head, body = parse_page(data)
        return self.add_page(head, body)

    def add_page(self, head: PageHead, body: bytes) -> dict[str, Any] | None:
        """Take one parsed page; the whole message once its book is complete.

        Raises PacketError("bad-body") if the completed message does not decode.
        """
        self.stats.pages += 1
        self._note_session(head.source, head.yard_session)
        if head.page_count == 1:
            message = decode_body(body, head.kind)
            self.stats.messages += 1
            return message
        key = (head.source, head.yard_session, head.book_id)
        book = self._books.get(key)
        if book is None:
            if head.page_number != 0:
                self.stats.missed_first_page += 1
                logger.debug("page %d of book %s dropped: first page missed", head.page_number, key)
                return None
            book = _Book(head.page_count, head.kind, {})
            self._books[key] = book
        elif head.page_count != book.page_count or head.kind is not book.kind:
            self.stats.inconsistent_pages += 1
            return None
        previous = book.sections.get(head.page_number)
        if previous is not None:
            book.size -= len(previous)
            self._buffered -= len(previous)
        book.sections[head.page_number] = body
        book.size += len(body)
        self._buffered += len(body)
        if len(book.sections) == book.page_count:
            self._drop(key)
            sections = book.sections
            joined = b"".join(sections[number] for number in range(book.page_count))
            message = decode_body(joined, book.kind)
            self.stats.messages += 1
            return message
        self._enforce_limits()
        return None

    def _note_session(self, source: str, session: str) -> None:
        """Remember ``source``'s session; on a change drop its stale books."""
        known = self._sessions.get(source)
        self._sessions[source] = session
        self._sessions.move_to_end(source)
        if known is not None and known != session:
            for key in [k for k in self._books if k[0] == source and k[1] != session]:
                self._drop(key)
                self.stats.stale_books += 1
                logger.debug("stale book %s dropped: session is now %s", key, session)
        while len(self._sessions) > self.max_sources:
            self._sessions.popitem(last=False)

    def _drop(self, key: _BookKey) -> _Book:
        book = self._books.pop(key)
        self._buffered -= book.size
        return book

    def _enforce_limits(self) -> None:
        while self._books and (
            len(self._books) > self.max_open_books or self._buffered > self.max_buffered_bytes
        ):
            key = next(iter(self._books))
            book = self._drop(key)
            self.stats.evicted_books += 1
            self.stats.evicted_bytes += book.size
            logger.debug("book %s evicted (%d bytes) to stay within limits", key, book.size)
