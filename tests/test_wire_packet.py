"""Road packets: head ‖ coat ‖ foot, the signature rule, the size limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.crypto import SigningKey
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from raetlike.wire import (
    BINARY_HEAD_SIZE,
    FootKind,
    Head,
    HeadKind,
    Packet,
    head_size,
    pack_head,
    pack_packet,
    parse_packet,
)
from tests.test_wire_head import heads

SIGNER = SigningKey(bytes(range(100, 132)))
OTHER = SigningKey(bytes(range(32)))


def _signed_head(head: Head, signed: bool) -> Head:
    return Head(**{**{name: getattr(head, name) for name in Head.__slots__},
                   "foot_kind": FootKind.NACL if signed else FootKind.NADA})


@given(heads(), st.binary(max_size=600), st.booleans())
@settings(max_examples=150, deadline=None)
def test_every_packet_reads_back_as_it_was_packed(head: Head, coat: bytes, signed: bool) -> None:
    packed = pack_packet(head, coat, SIGNER if signed else None)
    packet = parse_packet(packed)
    assert packet.head == _signed_head(head, signed)
    assert packet.coat == coat
    assert packet.raw_head + packet.coat + packet.foot == packed
    assert len(packet.foot) == (64 if signed else 0)
    if signed:
        packet.verify(SIGNER.verify_key)


@pytest.mark.parametrize("kind", list(HeadKind))
def test_the_foot_signs_head_coat_and_64_zero_bytes(kind: HeadKind) -> None:
    packed = pack_packet(Head(head_kind=kind, source_uid=3), b"coat", SIGNER)
    head_bytes = packed[: -4 - 64]
    assert packed[-64:] == SIGNER.sign(head_bytes + b"coat" + bytes(64))
    assert parse_packet(packed).raw_head == head_bytes


def test_the_signer_decides_the_foot_kind() -> None:
    unsigned = parse_packet(pack_packet(Head(foot_kind=FootKind.NACL), b"x"))
    assert unsigned.head.foot_kind is FootKind.NADA
    assert unsigned.foot == b""
    signed = parse_packet(pack_packet(Head(), b"x", SIGNER))
    assert signed.head.foot_kind is FootKind.NACL


def test_a_packet_signed_by_someone_else_does_not_verify() -> None:
    packet = parse_packet(pack_packet(Head(), b"x", SIGNER))
    with pytest.raises(CryptoError):
        packet.verify(OTHER.verify_key)


@pytest.mark.parametrize("kind", list(HeadKind))
def test_a_changed_coat_does_not_verify(kind: HeadKind) -> None:
    packed = bytearray(pack_packet(Head(head_kind=kind), b"coat", SIGNER))
    packed[-65] ^= 0x01
    with pytest.raises(CryptoError):
        parse_packet(bytes(packed)).verify(SIGNER.verify_key)


def test_an_unsigned_packet_cannot_be_verified() -> None:
    packet = parse_packet(pack_packet(Head(), b"x"))
    with pytest.raises(PacketError) as caught:
        packet.verify(SIGNER.verify_key)
    assert caught.value.reason == "no-foot"


@pytest.mark.parametrize("kind", list(HeadKind))
def test_a_packet_over_1024_bytes_must_be_segmented(kind: HeadKind) -> None:
    head = Head(head_kind=kind, foot_kind=FootKind.NACL)
    room = 1024 - head_size(head) - 64
    assert len(pack_packet(head, bytes(room), SIGNER)) == 1024
    with pytest.raises(LocalProtocolError, match="segment"):
        pack_packet(head, bytes(room + 1), SIGNER)


def test_the_fast_path_may_raise_the_limit() -> None:
    head = Head(head_kind=HeadKind.BINARY)
    packed = pack_packet(head, bytes(8000), SIGNER, limit=9000)
    assert len(packed) == BINARY_HEAD_SIZE + 8000 + 64
    assert parse_packet(packed).coat == bytes(8000)


def test_parse_accepts_any_bytes_like_and_refuses_other_types() -> None:
    packed = pack_packet(Head(), b"x")
    assert parse_packet(bytearray(packed)) == parse_packet(memoryview(packed)) == Packet(
        Head(), b"x", b"", packed[:-1])
    with pytest.raises(PacketError) as caught:
        parse_packet("ri RAET")  # type: ignore[arg-type]
    assert caught.value.reason == "bad-type"


@pytest.mark.parametrize("kind", list(HeadKind))
def test_a_truncated_or_padded_packet_is_refused_by_its_length(kind: HeadKind) -> None:
    packed = pack_packet(Head(head_kind=kind), b"coat", SIGNER)
    for damaged in (packed[:-1], packed + b"\x00"):
        with pytest.raises(PacketError) as caught:
            parse_packet(damaged)
        assert caught.value.reason == "bad-length"


def test_a_head_alone_is_a_packet_with_an_empty_coat() -> None:
    raw = pack_head(Head(head_kind=HeadKind.JSON), 0)
    assert parse_packet(raw) == Packet(Head(head_kind=HeadKind.JSON), b"", b"", raw)
