"""The fast paths of lane pages agree with the field-by-field codec, byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import page
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import PageHead, encode_body, pack_page, paginate, parse_page

names = st.text(alphabet=st.characters(max_codepoint=0xFF, exclude_characters=" \n"), max_size=12)
sessions = st.text(alphabet="0123456789abcdefABCDEF", min_size=18, max_size=18)
values = st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40)  # what msgpack can carry
messages = st.dictionaries(st.text(max_size=8), values, max_size=4)


def _slow_outcome(data: bytes) -> tuple[PageHead, bytes] | str:
    try:
        return page._parse_slowly(data)
    except PacketError as error:
        return f"PacketError {error}"


def _outcome(data: bytes) -> tuple[PageHead, bytes] | str:
    try:
        return parse_page(data)
    except PacketError as error:
        return f"PacketError {error}"


@settings(max_examples=100)
@given(names, names, sessions, st.integers(0, 0xFFFFFFFF), messages,
       st.sampled_from(PageKind))
def test_paginate_writes_the_pages_the_field_by_field_heads_make(  # noqa: PLR0917
        source: str, destination: str, session: str, book_id: int,
        message: dict[str, object], kind: PageKind) -> None:
    body = encode_body(message, kind)
    head = PageHead(source, destination, session, book_id, kind=kind)
    assert paginate(source, destination, session, book_id, message, kind) == [
        pack_page(head, body)]


@settings(max_examples=200)
@given(names, names, sessions, st.integers(0, 0xFFFFFFFF), st.integers(1, 0xFFFF),
       st.data(), st.sampled_from(PageKind), st.binary(max_size=40))
def test_the_fast_parse_returns_what_the_slow_parse_returns_for_every_head(  # noqa: PLR0917
        source: str, destination: str, session: str, book_id: int, count: int,
        data: st.DataObject, kind: PageKind, body: bytes) -> None:
    number = data.draw(st.integers(0, count - 1))
    packed = pack_page(PageHead(source, destination, session, book_id, number, count, kind), body)
    assert parse_page(packed) == page._parse_slowly(packed)


@settings(max_examples=400)
@given(st.data())
def test_a_mangled_page_gets_the_same_answer_from_the_fast_and_the_slow_parse(
        data: st.DataObject) -> None:
    packed = bytearray(paginate("sender", "receiver", "0a" * 9, 0x1234, {"a": 1})[0])
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(packed) - 1))
        packed[position] = data.draw(st.sampled_from(b" \n0fFgx\x00\xff9"))
    assert _outcome(bytes(packed)) == _slow_outcome(bytes(packed))


@pytest.mark.parametrize("head", [
    b"ri RAET\nvn 100\npk 0\nsn a\ndn b\nsi 000000000000000000\nbi 1\npn 0000\npc 0001\n\n",
    b"ri RAET\nvn 0\npk 2\nsn a\ndn b\nsi 000000000000000000\nbi 1\npn 0000\npc 0001\n\n",
    b"ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi 000000000000000000\nbi 1\npn 0001\npc 0001\n\n",
    b"ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi 000000000000000000\nbi 1\npn 0000\npc 0000\n\n",
    b"ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi 000000000000000000\nbi 1\npn 0\npc 10000\n\n",
])
def test_numbers_out_of_range_are_refused_by_the_fast_parse_as_by_the_slow_one(
        head: bytes) -> None:
    with pytest.raises(PacketError) as fast:
        parse_page(head + b"{}")
    with pytest.raises(PacketError) as slow:
        page._parse_slowly(head + b"{}")
    assert str(fast.value) == str(slow.value)


def test_a_book_id_out_of_range_is_refused_when_paginating() -> None:
    with pytest.raises(LocalProtocolError, match="book id"):
        paginate("a", "b", "0" * 18, 0x1_0000_0000, {"a": 1})
    with pytest.raises(LocalProtocolError, match="book id"):
        paginate("a", "b", "0" * 18, -1, {"a": 1})


def test_a_bad_name_is_refused_when_paginating_even_after_good_ones_were_cached() -> None:
    paginate("a", "b", "0" * 18, 1, {"a": 1})
    with pytest.raises(LocalProtocolError, match="spaces"):
        paginate("a b", "b", "0" * 18, 1, {"a": 1})
    with pytest.raises(LocalProtocolError, match="PageKind"):
        paginate("a", "b", "0" * 18, 1, {"a": 1}, 0)  # type: ignore[arg-type]
