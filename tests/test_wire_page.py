"""Lane pages: head codec, pagination and the Binder that joins books again."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import (
    Binder,
    PageHead,
    decode_body,
    encode_body,
    pack_page,
    paginate,
    parse_page,
)

SESSION = "660d36504ba2af87ee"
OTHER_SESSION = "660d36504ba2af87ef"
EXAMPLE = (
    b"ri RAET\nvn 0\npk 0\nsn other\ndn main\nsi 660d36504ba2af87ee\nbi 1\npn 0000\npc 0001\n\n"
    b'{"route":"x","body":"hello"}'
)

names = st.text(alphabet=st.characters(max_codepoint=0xFF, exclude_characters=" \n"), max_size=12)
sessions = st.text(alphabet="0123456789abcdefABCDEF", min_size=18, max_size=18)


@st.composite
def heads(draw: st.DrawFn) -> PageHead:
    count = draw(st.integers(1, 0xFFFF))
    return PageHead(
        source=draw(names),
        destination=draw(names),
        yard_session=draw(sessions),
        book_id=draw(st.integers(0, 0xFFFF_FFFF)),
        page_number=draw(st.integers(0, count - 1)),
        page_count=count,
        kind=draw(st.sampled_from(PageKind)),
        version=draw(st.integers(0, 0xFF)),
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
messages = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


def test_the_protocol_example_parses_into_its_fields() -> None:
    head, body = parse_page(EXAMPLE)
    assert head == PageHead("other", "main", SESSION, 1)
    assert json.loads(body) == {"route": "x", "body": "hello"}
    assert pack_page(head, body) == EXAMPLE


def test_paginate_writes_every_field_even_the_defaults() -> None:
    pages = paginate("other", "main", SESSION, 1, {"route": "x", "body": "hello"}, PageKind.JSON)
    assert pages == [EXAMPLE]


def test_hex_fields_are_written_in_lower_case_without_padding_but_page_fields_in_four() -> None:
    head = PageHead("a", "b", SESSION, 0xABCDEF, page_number=0x1A, page_count=0x1B)
    packed = pack_page(head, b"")
    assert b"\nbi abcdef\npn 001a\npc 001b\n\n" in packed


@given(heads(), st.binary(max_size=256))
def test_pack_then_parse_gives_back_head_and_body(head: PageHead, body: bytes) -> None:
    assert parse_page(pack_page(head, body)) == (head, body)


@given(st.binary(max_size=200))
def test_random_bytes_give_a_page_or_a_packet_error(data: bytes) -> None:
    with contextlib.suppress(PacketError):
        parse_page(data)


@given(heads(), st.binary(max_size=32), st.data())
def test_mutated_pages_give_a_page_or_a_packet_error(
    head: PageHead, body: bytes, data: st.DataObject
) -> None:
    page = bytearray(pack_page(head, body))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(page) - 1))
        action = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        byte = data.draw(st.sampled_from([0x20, 0x0A, 0x30, 0x67, 0xFF, 0x00]))
        if action == "flip":
            page[at] = byte
        elif action == "insert":
            page.insert(at, byte)
        elif len(page) > 1:
            del page[at]
    try:
        parsed, _ = parse_page(bytes(page))
    except PacketError:
        return
    assert isinstance(parsed, PageHead)


@given(st.binary(max_size=64), st.sampled_from(PageKind))
def test_random_bodies_decode_to_a_mapping_or_a_packet_error(body: bytes, kind: PageKind) -> None:
    try:
        message = decode_body(body, kind)
    except PacketError as error:
        assert error.reason == "bad-body"  # noqa: PT017 - inside a Hypothesis property
    else:
        assert isinstance(message, dict)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not-a-page"),
        (b"ri RAET\nvn 0", "not-a-page"),
        (EXAMPLE.replace(b"ri RAET\n", b"ri RAEX\n"), "not-a-page"),
        (b"ri RAET\n\n{}", "bad-head"),
        (EXAMPLE.replace(b"vn 0\npk 0", b"pk 0\nvn 0"), "bad-head"),
        (EXAMPLE.replace(b"sn other", b"sn oth er"), "bad-head"),
        (EXAMPLE.replace(b"sn other", b"snother"), "bad-head"),
        (EXAMPLE.replace(b"pk 0", b"pk 2"), "unknown-page-kind"),
        (EXAMPLE.replace(b"bi 1", b"bi 0x1"), "bad-field"),
        (EXAMPLE.replace(b"bi 1", b"bi 1_0"), "bad-field"),
        (EXAMPLE.replace(b"bi 1", b"bi 123456789"), "bad-field"),
        (EXAMPLE.replace(b"pn 0000", b"pn 0001"), "bad-field"),
        (EXAMPLE.replace(b"pc 0001", b"pc 0000"), "bad-field"),
        (EXAMPLE.replace(SESSION.encode(), b"660d36504ba2af87eg"), "bad-field"),
        (EXAMPLE.replace(SESSION.encode(), SESSION.encode() + b"0"), "bad-field"),
        (EXAMPLE + b"x" * MAX_PAGE_SIZE, "page-too-large"),
    ],
)
def test_malformed_pages_are_packet_errors_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(PacketError) as error:
        parse_page(data)
    assert error.value.reason == reason


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"[1,2]", PageKind.JSON),
        (b"{", PageKind.JSON),
        (b"\xff", PageKind.JSON),
        (b"\x92\x01\x02", PageKind.MSGPACK),
        (b"\xc1", PageKind.MSGPACK),
        (b"\x81\x01\x02", PageKind.MSGPACK),
        (b"\x80\x80", PageKind.MSGPACK),
    ],
)
def test_a_body_that_is_not_one_mapping_is_a_bad_body(body: bytes, kind: PageKind) -> None:
    with pytest.raises(PacketError) as error:
        decode_body(body, kind)
    assert error.value.reason == "bad-body"


def test_an_empty_message_has_an_empty_body() -> None:
    assert encode_body({}, PageKind.JSON) == encode_body({}, PageKind.MSGPACK) == b""
    assert decode_body(b"", PageKind.MSGPACK) == {}


@pytest.mark.parametrize(
    "fields",
    [
        {"source": "a b"},
        {"destination": "x\ny"},
        {"source": "\u2603"},
        {"yard_session": "abc"},
        {"book_id": -1},
        {"book_id": 1 << 32},
        {"page_count": 0},
        {"page_number": 1},
        {"version": 256},
    ],
)
def test_a_head_that_cannot_go_on_the_wire_is_refused(fields: dict[str, Any]) -> None:
    values: dict[str, Any] = {
        "source": "a",
        "destination": "b",
        "yard_session": SESSION,
        "book_id": 1,
        **fields,
    }
    with pytest.raises(LocalProtocolError):
        PageHead(**values)


def test_a_page_larger_than_the_limit_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        pack_page(PageHead("a", "b", SESSION, 1), b"x" * MAX_PAGE_SIZE)


def test_a_message_that_does_not_serialize_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        paginate("a", "b", SESSION, 1, {"x": object()}, PageKind.JSON)


@given(messages, st.sampled_from(PageKind))
def test_a_paginated_message_comes_back_whole_from_the_binder(
    message: dict[str, Any], kind: PageKind
) -> None:
    pages = paginate("other", "main", SESSION, 9, message, kind)
    assert len(pages) == 1
    assert Binder().add(pages[0]) == message


def _pages(message_size: int, book_id: int = 1, session: str = SESSION) -> list[bytes]:
    return paginate("other", "main", session, book_id, {"d": "x" * message_size}, PageKind.JSON)


def test_every_page_of_a_long_message_fits_and_the_binder_joins_them() -> None:
    pages = _pages(300_000)
    assert len(pages) == 5
    assert all(len(page) <= MAX_PAGE_SIZE for page in pages)
    assert [parse_page(page)[0].page_number for page in pages] == [0, 1, 2, 3, 4]
    binder = Binder()
    results = [binder.add(page) for page in pages]
    assert results == [None] * 4 + [{"d": "x" * 300_000}]
    assert binder.stats.messages == 1
    assert (binder.open_books, binder.buffered_bytes) == (0, 0)


def test_pages_after_the_first_may_come_in_any_order() -> None:
    first, *rest = _pages(300_000)
    binder = Binder()
    assert binder.add(first) is None
    results = [binder.add(page) for page in reversed(rest)]
    assert results[-1] == {"d": "x" * 300_000}


def test_a_book_whose_first_page_is_missed_is_dropped() -> None:
    pages = _pages(200_000)
    binder = Binder()
    assert [binder.add(page) for page in pages[1:]] == [None] * (len(pages) - 1)
    assert binder.stats.missed_first_page == len(pages) - 1
    assert binder.open_books == 0
    assert binder.add(pages[0]) is None
    assert binder.open_books == 1


def test_a_new_session_drops_the_yards_half_received_books() -> None:
    old = _pages(200_000, book_id=1)
    new = _pages(200_000, book_id=1, session=OTHER_SESSION)
    binder = Binder()
    binder.add(old[0])
    binder.add(old[1])
    assert binder.open_books == 1
    assert binder.add(new[0]) is None
    assert binder.stats.stale_books == 1
    assert binder.open_books == 1
    results = [binder.add(page) for page in new[1:]]
    assert results[-1] == {"d": "x" * 200_000}
    assert binder.add(old[2]) is None
    assert binder.stats.missed_first_page == 1


def test_a_late_page_from_the_old_session_switches_back_as_in_raet() -> None:
    old = _pages(200_000, book_id=1)
    new = _pages(200_000, book_id=2, session=OTHER_SESSION)
    binder = Binder()
    binder.add(old[0])
    binder.add(new[0])
    binder.add(old[1])
    assert binder.stats.stale_books == 2
    assert binder.open_books == 0


def test_another_yards_new_session_leaves_this_yards_books_alone() -> None:
    binder = Binder()
    binder.add(_pages(200_000)[0])
    stranger = paginate("third", "main", OTHER_SESSION, 1, {"a": 1}, PageKind.JSON)
    assert binder.add(stranger[0]) == {"a": 1}
    assert binder.stats.stale_books == 0
    assert binder.open_books == 1


def test_the_oldest_book_is_evicted_when_too_many_are_open() -> None:
    binder = Binder(max_open_books=3)
    books = [_pages(100_000, book_id=n) for n in range(1, 5)]
    for pages in books:
        binder.add(pages[0])
    assert binder.open_books == 3
    assert binder.stats.evicted_books == 1
    assert binder.add(books[0][1]) is None
    assert binder.stats.missed_first_page == 1
    assert binder.add(books[3][1]) == {"d": "x" * 100_000}


def test_books_are_evicted_oldest_first_to_stay_within_the_byte_limit() -> None:
    binder = Binder(max_buffered_bytes=150_000)
    first, second = _pages(200_000, book_id=1), _pages(200_000, book_id=2)
    binder.add(first[0])
    binder.add(first[1])
    binder.add(second[0])
    assert binder.stats.evicted_books == 1
    assert binder.stats.evicted_bytes == len(parse_page(first[0])[1]) + len(parse_page(first[1])[1])
    assert binder.buffered_bytes <= 150_000
    assert binder.open_books == 1


def test_a_page_that_contradicts_its_book_is_dropped() -> None:
    pages = _pages(200_000)
    head, body = parse_page(pages[1])
    liar = PageHead(head.source, head.destination, head.yard_session, head.book_id, 1, 9)
    binder = Binder()
    binder.add(pages[0])
    assert binder.add_page(liar, body) is None
    assert binder.stats.inconsistent_pages == 1
    assert [binder.add(page) for page in pages[1:]][-1] == {"d": "x" * 200_000}


def test_a_repeated_page_does_not_change_the_message() -> None:
    pages = _pages(200_000)
    binder = Binder()
    binder.add(pages[0])
    binder.add(pages[1])
    binder.add(pages[1])
    assert [binder.add(page) for page in pages[2:]][-1] == {"d": "x" * 200_000}


def test_a_sixteen_megabyte_message_goes_through_in_well_under_a_second() -> None:
    message = {"blob": "z" * (16 * 1024 * 1024), "n": 1}
    started = time.perf_counter()
    pages = paginate("other", "main", SESSION, 1, message, PageKind.MSGPACK)
    binder = Binder()
    results = [binder.add(page) for page in pages]
    elapsed = time.perf_counter() - started
    assert len(pages) == 257
    assert results[-1] == message
    assert elapsed < 2.0


@settings(max_examples=25)
@given(st.integers(MAX_PAGE_SIZE - 200, 3 * MAX_PAGE_SIZE), st.sampled_from(PageKind))
def test_messages_around_page_boundaries_split_and_join_again(size: int, kind: PageKind) -> None:
    message = {"d": "q" * size}
    pages = paginate("other", "main", SESSION, 3, message, kind)
    assert all(len(page) <= MAX_PAGE_SIZE for page in pages)
    binder = Binder()
    assert [binder.add(page) for page in pages][-1] == message


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 300), st.binary(max_size=3))))
def test_a_binder_fed_damaged_pages_gives_messages_none_or_packet_errors(
    damage: list[tuple[int, int, bytes]],
) -> None:
    pages = _pages(150_000)[:2] + paginate("x", "main", SESSION, 4, {"a": [1]}, PageKind.MSGPACK)
    pages += _pages(150_000)[2:]
    binder = Binder(max_open_books=2, max_buffered_bytes=100_000)
    for index, at, splice in damage:
        page = pages[index % len(pages)]
        damaged = page[:at] + splice + page[at + len(splice) :]
        try:
            result = binder.add(damaged)
        except PacketError:
            continue
        assert result is None or isinstance(result, dict)
    assert binder.buffered_bytes <= 100_000
    assert binder.open_books <= 2
