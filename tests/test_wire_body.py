"""Bodies (JSON, msgpack, raw) and nacl coats."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.crypto import MAC_SIZE, NONCE_SIZE, PrivateKey, SessionBox, box
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from raetlike.wire import BodyKind, coat, pack_body, parse_body, uncoat

ALICE = PrivateKey(bytes(range(1, 33)))
BOB = PrivateKey(bytes(range(33, 65)))
ALICE_TO_BOB = SessionBox(ALICE, BOB.public_key)
BOB_FROM_ALICE = SessionBox(BOB, ALICE.public_key)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=8,
)
MAPPINGS = st.dictionaries(st.text(), JSON_VALUES, max_size=6)


@given(MAPPINGS, st.sampled_from([BodyKind.JSON, BodyKind.MSGPACK]))
@settings(max_examples=100, deadline=None)
def test_a_mapping_reads_back_as_it_was_packed(body: dict[str, Any], kind: BodyKind) -> None:
    assert parse_body(kind, pack_body(kind, body)) == body


def test_json_bodies_are_compact_and_ascii_like_raet() -> None:
    packed = pack_body(BodyKind.JSON, {"a": [1, 2], "b": "été"})
    assert packed == b'{"a":[1,2],"b":"\\u00e9t\\u00e9"}'


@pytest.mark.parametrize("kind", [BodyKind.JSON, BodyKind.MSGPACK])
def test_an_empty_mapping_is_no_bytes_and_no_bytes_is_an_empty_mapping(kind: BodyKind) -> None:
    assert pack_body(kind, {}) == b""
    assert pack_body(kind, None) == b""
    assert parse_body(kind, b"") == {}


def test_msgpack_strings_use_the_legacy_raw_type_even_between_32_and_255_bytes() -> None:
    packed = pack_body(BodyKind.MSGPACK, {"k": "v" * 40})
    assert packed == b"\x81\xa1k\xda\x00\x28" + b"v" * 40  # raw16, never str8 (0xd9)


def test_msgpack_bodies_read_legacy_raw_new_str_and_bin_types() -> None:
    legacy = msgpack.packb({"k": "v" * 40}, use_bin_type=False)
    modern = msgpack.packb({"k": "v" * 40, "b": b"\xff\x00"}, use_bin_type=True)
    assert b"\xd9" in modern
    assert parse_body(BodyKind.MSGPACK, legacy) == {"k": "v" * 40}
    assert parse_body(BodyKind.MSGPACK, modern) == {"k": "v" * 40, "b": b"\xff\x00"}


def test_raw_bodies_are_the_bytes_themselves() -> None:
    assert pack_body(BodyKind.RAW, b"\x00\x01") == b"\x00\x01"
    assert pack_body(BodyKind.RAW, None) == b""
    assert parse_body(BodyKind.RAW, b"\x00\x01") == b"\x00\x01"


def test_a_nada_body_is_empty_both_ways() -> None:
    assert pack_body(BodyKind.NADA, None) == b""
    assert parse_body(BodyKind.NADA, b"") == {}
    with pytest.raises(PacketError) as caught:
        parse_body(BodyKind.NADA, b"x")
    assert caught.value.reason == "bad-body"
    with pytest.raises(LocalProtocolError):
        pack_body(BodyKind.NADA, {"a": 1})


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (BodyKind.JSON, b"bytes"),
        (BodyKind.MSGPACK, ["not", "a", "mapping"]),
        (BodyKind.RAW, {"a": 1}),
        (BodyKind.JSON, {"a": object()}),
        (BodyKind.MSGPACK, {"a": object()}),
        (BodyKind.MSGPACK, {"a": 2**64}),
    ],
)
def test_bodies_that_cannot_be_written_are_the_callers_error(kind: BodyKind, body: Any) -> None:
    with pytest.raises(LocalProtocolError):
        pack_body(kind, body)


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (BodyKind.JSON, b"{"),
        (BodyKind.JSON, b"[1, 2]"),
        (BodyKind.JSON, b"\xff\xfe"),
        (BodyKind.JSON, b"[" * 100_000),
        (BodyKind.MSGPACK, b"\xc1"),
        (BodyKind.MSGPACK, b"\x93\x01\x02\x03"),
        (BodyKind.MSGPACK, b"\x81\x01\x02"),  # integer key
        (BodyKind.MSGPACK, b"\x81\xa1k"),  # truncated
        (BodyKind.MSGPACK, b"\x80\x80"),  # trailing data
        (BodyKind.MSGPACK, b"\x81\xa1k\xa2\xff\xfe"),  # invalid UTF-8
        (BodyKind.MSGPACK, b"\x91" * 100_000),
    ],
)
def test_garbage_bodies_are_refused_as_bad_body(kind: BodyKind, data: bytes) -> None:
    with pytest.raises(PacketError) as caught:
        parse_body(kind, data)
    assert caught.value.reason == "bad-body"


@given(st.binary(max_size=200), st.sampled_from(BodyKind))
@settings(max_examples=300, deadline=None)
def test_any_bytes_give_a_body_or_bad_body(data: bytes, kind: BodyKind) -> None:
    assert _outcome(kind, data) in {"body", "bad-body"}


def _outcome(kind: BodyKind, data: bytes) -> str:
    try:
        parse_body(kind, data)
    except PacketError as error:
        return error.reason
    return "body"


def test_a_coat_is_the_crypto_box_followed_by_its_nonce() -> None:
    nonce = bytes(range(NONCE_SIZE))
    coated = coat(b"hello", ALICE_TO_BOB, nonce)
    assert coated == box(b"hello", nonce, ALICE, BOB.public_key) + nonce
    assert len(coated) == 5 + MAC_SIZE + NONCE_SIZE
    assert uncoat(coated, BOB_FROM_ALICE) == b"hello"


def test_an_empty_body_gets_an_empty_coat() -> None:
    assert coat(b"", ALICE_TO_BOB) == b""
    assert uncoat(b"", BOB_FROM_ALICE) == b""


def test_each_coat_gets_a_fresh_nonce_by_default() -> None:
    first, second = coat(b"x", ALICE_TO_BOB), coat(b"x", ALICE_TO_BOB)
    assert first[-NONCE_SIZE:] != second[-NONCE_SIZE:]
    assert uncoat(first, BOB_FROM_ALICE) == uncoat(second, BOB_FROM_ALICE) == b"x"


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: c[:-1] + bytes([c[-1] ^ 1]),  # nonce
        lambda c: bytes([c[0] ^ 1]) + c[1:],  # MAC
        lambda c: c[:MAC_SIZE + NONCE_SIZE - 1],  # too short
        lambda c: c[1:],
    ],
)
def test_a_damaged_coat_is_refused_as_bad_coat(damage: Any) -> None:
    coated = coat(b"secret body", ALICE_TO_BOB)
    with pytest.raises(PacketError) as caught:
        uncoat(damage(coated), BOB_FROM_ALICE)
    assert caught.value.reason == "bad-coat"


def test_a_coat_for_someone_else_is_refused_as_bad_coat_caused_by_crypto() -> None:
    eve = SessionBox(PrivateKey(bytes(32 * [9])), ALICE.public_key)
    with pytest.raises(PacketError) as caught:
        uncoat(coat(b"secret body", ALICE_TO_BOB), eve)
    assert caught.value.reason == "bad-coat"
    assert isinstance(caught.value.__cause__, CryptoError)
