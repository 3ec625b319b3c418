"""The lane's page fast paths give the same bytes and the same decisions as the codec."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lane.pages import PageReader, PageWriter, fast_decode, fast_encode, head_prefix
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import decode_body, encode_body, paginate, parse_page

SESSION = "0123456789abcdef01"
KINDS = st.sampled_from([PageKind.JSON, PageKind.MSGPACK])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12,
)
MESSAGES = st.dictionaries(st.text(max_size=10), VALUES, max_size=5)
NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=0xFF, blacklist_characters="/"),
                min_size=1, max_size=12)


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", call(*args)
    except (LocalProtocolError, PacketError) as error:
        return type(error).__name__, str(error)


@settings(max_examples=120, deadline=None)
@given(MESSAGES, KINDS, NAMES, st.integers(1, 0xFFFFFFFF))
def test_the_writer_writes_the_pages_paginate_writes(
        message: dict[str, Any], kind: PageKind, destination: str, book_id: int) -> None:
    writer = PageWriter("source", SESSION, kind)
    assert writer.pages(destination, book_id, message) == paginate(
        "source", destination, SESSION, book_id, message, kind)


@pytest.mark.parametrize("kind", [PageKind.JSON, PageKind.MSGPACK])
@pytest.mark.parametrize("size", [0, MAX_PAGE_SIZE - 200, MAX_PAGE_SIZE, 3 * MAX_PAGE_SIZE])
def test_messages_around_the_page_size_are_cut_as_paginate_cuts_them(kind: PageKind,
                                                                     size: int) -> None:
    message = {"payload": "x" * size}
    writer = PageWriter("source", SESSION, kind)
    assert writer.pages("sink", 7, message) == paginate("source", "sink", SESSION, 7, message,
                                                        kind)


@pytest.mark.parametrize("kind", [PageKind.JSON, PageKind.MSGPACK])
def test_unserializable_messages_fail_as_encode_body_fails(kind: PageKind) -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    for message in ({"x": object()}, {"x": {1j}}, circular, {"x": 2**70}, {"x": math.nan}):
        assert _outcome(fast_encode, message, kind) == _outcome(encode_body, message, kind)
    assert fast_encode({"x": 1}, kind) == encode_body({"x": 1}, kind)  # nothing left behind


@settings(max_examples=120, deadline=None)
@given(st.one_of(
    MESSAGES.map(lambda m: encode_body(m, PageKind.JSON)),
    st.binary(max_size=40),
    st.sampled_from([b" {}", b"{} ", b"[1]", b"{\"a\":1}x", b"\xff", b"{\"a\":NaN}", b"1"]),
))
def test_json_bodies_decode_as_decode_body_decodes_them(body: bytes) -> None:
    assert _outcome(fast_decode, body, PageKind.JSON) == _outcome(decode_body, body,
                                                                 PageKind.JSON)


@settings(max_examples=120, deadline=None)
@given(MESSAGES, KINDS, st.integers(1, 0xFFFFFFFF), st.data())
def test_the_reader_accepts_a_page_exactly_when_parse_page_does_and_agrees_on_it(
        message: dict[str, Any], kind: PageKind, book_id: int, data: st.DataObject) -> None:
    reader = PageReader()
    known = paginate("source", "sink", SESSION, 1, {"k": 1}, kind)[0]
    reader.remember(known, parse_page(known)[0])
    page = paginate("source", "sink", SESSION, book_id, message, kind)[0]
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(page) - 1))
        page = page[:at] + data.draw(st.binary(max_size=3)) + page[at + 1:]
    found = reader.read(page)
    if found is None:
        return  # the full path decides
    head, body = parse_page(page)
    assert (found[0].source, found[0].yard_session, found[0].kind) == (
        head.source, head.yard_session, head.kind)
    assert (head.page_count, head.destination) == (1, "sink")
    assert found[1] == body


def test_the_reader_knows_only_heads_it_was_told() -> None:
    reader = PageReader()
    page = paginate("source", "sink", SESSION, 5, {"k": 1})[0]
    assert reader.read(page) is None
    reader.remember(page, parse_page(page)[0])
    assert reader.read(paginate("source", "sink", SESSION, 6, {"k": 2})[0]) is not None
    assert reader.read(paginate("other", "sink", SESSION, 6, {"k": 2})[0]) is None
    assert reader.read(paginate("source", "sink", "f" * 18, 6, {"k": 2})[0]) is None
    two_pages = paginate("source", "sink", SESSION, 6, {"k": "x" * MAX_PAGE_SIZE})
    assert [reader.read(page) for page in two_pages] == [None, None]
    reader.forget()
    assert reader.read(page) is None


def test_the_head_prefix_is_the_head_up_to_the_book_id() -> None:
    prefix = head_prefix("a", "b", SESSION, PageKind.MSGPACK)
    assert prefix == b"ri RAET\nvn 0\npk 1\nsn a\ndn b\nsi " + SESSION.encode() + b"\nbi "
