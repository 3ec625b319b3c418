"""Segmentation of a message's coat (RAET's sizes) and reassembly in any order."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.crypto import SigningKey
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import (
    Flag,
    FootKind,
    Head,
    HeadKind,
    Reassembly,
    head_size,
    pack_packet,
    parse_packet,
    segment,
    segment_size,
)
from raetlike.wire.kinds import MAX_MESSAGE_SIZE

SIGNER = SigningKey(bytes(range(32)))
EXTRA = {HeadKind.RAET: 27, HeadKind.JSON: 36, HeadKind.BINARY: 0}
KINDS = list(HeadKind)


NO_FLAGS = Flag(0)


def _head(kind: HeadKind, flags: Flag = NO_FLAGS) -> Head:
    return Head(source_uid=5, destination_uid=6, session_id=7, transaction_id=8,
                head_kind=kind, flags=flags)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("signed", [True, False])
def test_a_coat_that_fits_is_one_packet_with_its_head_unchanged(
    kind: HeadKind, signed: bool
) -> None:
    head = _head(kind, Flag.WAIT)
    footed = Head(**{**_fields(head), "foot_kind": FootKind.NACL if signed else FootKind.NADA})
    room = 1024 - head_size(footed) - (64 if signed else 0)
    assert segment(head, b"c" * room, signed) == [(footed, b"c" * room)]
    assert len(segment(head, b"c" * (room + 1), signed)) == 2


def _fields(head: Head) -> dict[str, object]:
    return {name: getattr(head, name) for name in Head.__slots__}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("signed", [True, False])
def test_a_big_coat_is_cut_into_raet_sized_chunks(kind: HeadKind, signed: bool) -> None:
    coat = bytes(random.Random(1).randbytes(5000))
    head = _head(kind, Flag.CORRESPONDENT)
    unsegmented = Head(**{**_fields(head),
                          "foot_kind": FootKind.NACL if signed else FootKind.NADA})
    size = 1024 - (head_size(unsegmented) + EXTRA[kind] + (64 if signed else 0))
    assert segment_size(head, signed) == size
    parts = segment(head, coat, signed)
    assert len(parts) == -(-5000 // size)
    assert b"".join(chunk for _, chunk in parts) == coat
    assert [len(chunk) for _, chunk in parts[:-1]] == [size] * (len(parts) - 1)
    for number, (part, _) in enumerate(parts):
        assert part.segment_number == number
        assert part.segment_count == len(parts)
        assert part.message_length == 5000
        assert part.flags == Flag.CORRESPONDENT | Flag.SEGMENTED
    packets = [pack_packet(part, chunk, SIGNER if signed else None) for part, chunk in parts]
    assert max(map(len, packets)) <= 1024


def test_binary_segments_fill_the_datagram_exactly() -> None:
    parts = segment(_head(HeadKind.BINARY), bytes(3000), True)
    assert segment_size(_head(HeadKind.BINARY), True) == 1024 - 49 - 64
    sizes = [len(pack_packet(part, chunk, SIGNER)) for part, chunk in parts]
    assert sizes == [1024, 1024, 1024, 49 + 3000 - 3 * 911 + 64]


def test_the_fast_path_may_segment_to_a_larger_limit() -> None:
    parts = segment(_head(HeadKind.BINARY), bytes(20000), True, limit=8192)
    assert len(parts) == 3
    assert all(len(pack_packet(p, c, SIGNER, limit=8192)) <= 8192 for p, c in parts)


def test_a_coat_over_the_message_limit_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="67107840"):
        segment(_head(HeadKind.RAET), bytes(MAX_MESSAGE_SIZE + 1), True)


def test_a_message_needing_more_than_65535_segments_is_refused() -> None:
    head = _head(HeadKind.RAET)
    size = segment_size(head, True)
    with pytest.raises(LocalProtocolError, match="65535"):
        segment(head, bytes(size * 0xFFFF + 1), True)
    assert len(segment(_head(HeadKind.BINARY), bytes(911 * 1000), True)) == 1000


def test_a_limit_with_no_room_for_a_segment_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="room"):
        segment(_head(HeadKind.JSON), bytes(500), True, limit=100)


@given(st.sampled_from(KINDS), st.integers(1, 9000), st.integers(0, 2**32), st.booleans())
@settings(max_examples=100, deadline=None)
def test_segments_reassemble_in_any_order_with_duplicates(
    kind: HeadKind, length: int, seed: int, signed: bool
) -> None:
    shuffler = random.Random(seed)
    coat = shuffler.randbytes(length)
    signer = SIGNER if signed else None
    parts = segment(_head(kind), coat, signed)
    datagrams = [pack_packet(part, chunk, signer) for part, chunk in parts]
    datagrams += shuffler.sample(datagrams, k=len(datagrams) // 2)
    shuffler.shuffle(datagrams)
    packets = [parse_packet(datagram) for datagram in datagrams]
    first = packets[0].head
    if not first.flags & Flag.SEGMENTED:
        assert len(parts) == 1
        assert packets[0].coat == coat
        return
    reassembly = Reassembly(first.segment_count, first.message_length)
    fresh = [reassembly.add(p.head.segment_number, p.coat) for p in packets]
    assert fresh.count(True) == first.segment_count == len(parts)
    assert reassembly.complete
    assert reassembly.coat() == coat


def test_reassembly_reports_what_is_missing_until_complete() -> None:
    reassembly = Reassembly(4, 10)
    assert reassembly.missing() == [0, 1, 2, 3]
    assert reassembly.add(2, b"ccc")
    assert reassembly.highest == 2
    assert reassembly.missing() == [0, 1, 3]
    assert reassembly.missing(end=reassembly.highest) == [0, 1]
    assert not reassembly.complete
    with pytest.raises(LocalProtocolError, match="missing"):
        reassembly.coat()
    assert reassembly.add(0, b"aaa")
    assert not reassembly.add(0, b"zzz")
    assert reassembly.add(3, b"d")
    assert reassembly.add(1, b"bbb")
    assert reassembly.complete
    assert reassembly.missing() == []
    assert reassembly.coat() == b"aaabbbcccd"


@pytest.mark.parametrize("number", [-1, 4, 99])
def test_a_segment_number_out_of_range_is_refused(number: int) -> None:
    with pytest.raises(PacketError) as caught:
        Reassembly(4, 10).add(number, b"x")
    assert caught.value.reason == "bad-segment"


def test_segments_longer_than_the_announced_length_are_refused() -> None:
    reassembly = Reassembly(2, 5)
    reassembly.add(0, b"abc")
    with pytest.raises(PacketError) as caught:
        reassembly.add(1, b"def")
    assert caught.value.reason == "bad-segment"


def test_segments_shorter_than_the_announced_length_fail_the_length_check() -> None:
    reassembly = Reassembly(2, 10)
    reassembly.add(0, b"abc")
    reassembly.add(1, b"def")
    with pytest.raises(PacketError) as caught:
        reassembly.coat()
    assert caught.value.reason == "bad-length"


@pytest.mark.parametrize(("count", "length"), [(0, 10), (0x10000, 10), (2, -1),
                                               (2, MAX_MESSAGE_SIZE + 1)])
def test_impossible_announcements_are_refused(count: int, length: int) -> None:
    with pytest.raises(PacketError) as caught:
        Reassembly(count, length)
    assert caught.value.reason == "bad-segment"
