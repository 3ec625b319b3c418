"""Fast paths for the lane's common page: one page carrying one whole message.

:mod:`raetlike.wire.page` is the lane's codec and stays the authority.  This
module only skips work that codec repeats for every message between the
same two yards, and gives the same bytes and the same decisions:

- :class:`PageWriter` keeps, per destination yard, the head up to the book id
  as :func:`~raetlike.wire.page.paginate` writes it (built by ``paginate``
  itself, once), and writes a one-page book by appending the book id, the
  fixed page-number lines and the body.  A message too large for one page goes
  through ``paginate``.
- :class:`PageReader` remembers the heads of pages the stack already accepted
  whole (a yard's current session, addressed to us, one page), keyed by the
  head up to the book id.  A page starting with such a head needs only its
  book id checked and its body decoded; anything else is ``None`` and the
  caller takes the full path (``parse_page`` and the Binder).

Pure: no sockets, no clocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json import encoder as json_encoder
from json.scanner import make_scanner
from typing import Any, cast

import msgpack

from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import PageHead, decode_body, encode_body, paginate

__all__ = [
    "PageWriter",
    "PageReader",
    "KnownHead",
    "SINGLE_PAGE_TAIL",
    "fast_encode",
    "fast_decode",
    "head_prefix",
]

SINGLE_PAGE_TAIL = b"\npn 0000\npc 0001\n\n"
"""What follows the book id in the head of a one-page book."""

_BOOK_MARK = b"\nbi "
_BOOK_ID = re.compile(rb"[0-9a-fA-F]{1,8}")
_HEAD_SCAN = 512  # a head is far shorter; names are at most a few hundred bytes
_SINGLE_SUFFIX = b"%x" + SINGLE_PAGE_TAIL


def _refuse(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _json_encoder() -> Callable[[Mapping[str, Any]], bytes] | None:
    """The C encoder ``json.JSONEncoder(separators=(",", ":"))`` uses, made once.

    ``JSONEncoder.encode`` builds it anew for every message.  This one has no
    circular-reference check (a circular message recurses until RecursionError,
    and the caller then asks ``encode_body``, which says what is wrong).
    """
    make = getattr(json_encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has the C accelerator
        return None
    escape = json_encoder.encode_basestring_ascii
    c_encode = make(None, _refuse, escape, None, ":", ",", False, False, True)

    def encode(message: Mapping[str, Any]) -> bytes:
        return "".join(c_encode(message, 0)).encode("utf-8")
    return encode


_ENCODE_JSON = _json_encoder()
_SCAN_JSON: Callable[[str, int], tuple[Any, int]] = cast(Any, make_scanner)(json.JSONDecoder())


def fast_encode(message: Mapping[str, Any], kind: PageKind,
                packer: msgpack.Packer | None = None) -> bytes:
    """``encode_body(message, kind)``, the same bytes and the same errors, faster."""
    if message:
        try:
            if kind is PageKind.JSON and _ENCODE_JSON is not None:
                return _ENCODE_JSON(message)
            if kind is PageKind.MSGPACK and packer is not None:
                packed: bytes = packer.pack(message)
                return packed
        except (TypeError, ValueError, OverflowError, RecursionError):
            pass  # encode_body gives the verdict
    return encode_body(message, kind)


def fast_decode(body: bytes, kind: PageKind) -> dict[str, Any]:
    """``decode_body(body, kind)``, the same message and the same errors, faster for JSON."""
    if body and kind is PageKind.JSON:
        try:
            text = body.decode("utf-8")
            message, end = _SCAN_JSON(text, 0)
        except (ValueError, StopIteration, RecursionError):
            pass  # decode_body gives the verdict
        else:
            if end == len(text) and type(message) is dict:
                return message
    return decode_body(body, kind)


def head_prefix(source: str, destination: str, yard_session: str, kind: PageKind) -> bytes:
    """The head ``paginate`` writes for these fields, up to and including ``bi ``."""
    page = paginate(source, destination, yard_session, 0, {}, kind)[0]
    return page[: page.index(_BOOK_MARK) + len(_BOOK_MARK)]


class PageWriter:
    """Writes the pages of our messages, byte for byte as ``paginate`` does."""

    __slots__ = ("_kind", "_packer", "_prefixes", "_session", "_source")

    def __init__(self, source: str, yard_session: str, kind: PageKind) -> None:
        self._source = source
        self._session = yard_session
        self._kind = kind
        self._prefixes: dict[str, bytes] = {}
        self._packer = msgpack.Packer()  # packb's defaults; resets itself after an error

    def body(self, message: Mapping[str, Any]) -> bytes:
        """``message`` serialized as a page body (raises LocalProtocolError as ``paginate``)."""
        return fast_encode(message, self._kind, self._packer)

    def pages(self, destination: str, book_id: int, message: Mapping[str, Any],
              body: bytes | None = None) -> list[bytes]:
        """The datagrams carrying ``message`` (serialized: ``body``) to ``destination`` as
        book ``book_id``.

        Raises LocalProtocolError as ``paginate`` does.
        """
        prefix = self._prefixes.get(destination)
        if prefix is None:
            prefix = head_prefix(self._source, destination, self._session, self._kind)
            self._prefixes[destination] = prefix
        if body is None:
            body = fast_encode(message, self._kind, self._packer)
        page = prefix + _SINGLE_SUFFIX % book_id + body
        if len(page) <= MAX_PAGE_SIZE:
            return [page]
        return paginate(self._source, destination, self._session, book_id, message, self._kind)


@dataclass(frozen=True, slots=True)
class KnownHead:
    """What a remembered head stands for."""

    source: str
    """The sending yard."""
    yard_session: str
    """Its session id on these pages."""
    kind: PageKind
    """How their bodies are serialized."""


class PageReader:
    """Reads one-page books whose head the stack has already accepted once."""

    __slots__ = ("_known", "limit")

    def __init__(self, limit: int = 1024) -> None:
        self._known: dict[bytes, KnownHead] = {}
        self.limit = limit
        """Most heads remembered (all are forgotten when it is reached)."""

    def remember(self, data: bytes, head: PageHead) -> None:
        """Remember the head of ``data``, a one-page page the stack just accepted whole."""
        mark = data.find(_BOOK_MARK, 0, _HEAD_SCAN)
        if mark < 0 or head.page_count != 1:
            return
        key = data[: mark + len(_BOOK_MARK)]
        if key in self._known:
            return
        if len(self._known) >= self.limit:
            self._known.clear()
        self._known[key] = KnownHead(head.source, head.yard_session, head.kind)

    def read(self, data: bytes) -> tuple[KnownHead, bytes] | None:
        """``(known head, body)`` for a one-page page with a remembered head, else None.

        None means "not known here", never "malformed": the caller parses the
        page the full way.  The page is accepted by ``parse_page`` exactly
        when this returns a result (same head, same body).
        """
        mark = data.find(_BOOK_MARK, 0, _HEAD_SCAN)
        if mark < 0:
            return None
        start = mark + len(_BOOK_MARK)
        known = self._known.get(data[:start])
        if known is None or len(data) > MAX_PAGE_SIZE:
            return None
        end = data.find(b"\n", start, start + 9)
        if end < 0 or not _BOOK_ID.fullmatch(data, start, end) \
                or not data.startswith(SINGLE_PAGE_TAIL, end):
            return None
        return known, data[end + len(SINGLE_PAGE_TAIL):]

    def forget(self) -> None:
        """Forget every head (the next page of each takes the full path)."""
        self._known.clear()


