"""SP tag stacks: 32-bit big-endian tags, channel ids in front, the request id last.

The byte vectors are worked out by hand from the SP request/reply draft: a
requester writes its request id (top bit set) ahead of the payload; each REP
hop writes the id of the channel it heard the message on (top bit clear) ahead
of that.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import tags
from raetlike.wire.tags import Backtrace

REQUEST = 0x8000_0001
channel_ids = st.integers(0, 0x7FFF_FFFF)
request_ids = st.integers(0x8000_0000, 0xFFFF_FFFF)


@st.composite
def stacks(draw: st.DrawFn, max_hops: int = 8) -> list[int]:
    channels = draw(st.lists(channel_ids, max_size=max_hops - 1))
    return [*channels, draw(request_ids)]


def test_a_fresh_request_is_its_id_then_the_payload() -> None:
    assert tags.join([REQUEST], b"ping") == bytes.fromhex("80000001") + b"ping"


def test_each_hop_writes_its_channel_id_in_front() -> None:
    after_one = tags.push([REQUEST], 5)
    after_two = tags.push(after_one, 0x7FFF_FFFF)
    assert after_two == [0x7FFF_FFFF, 5, REQUEST]
    assert tags.join(after_two, b"ping") == bytes.fromhex("7fffffff 00000005 80000001") + b"ping"


def test_reading_stops_at_the_first_tag_with_the_top_bit_set() -> None:
    data = bytes.fromhex("00000000ffffffff80000002") + b"!"
    assert tags.split(data) == ([0, 0xFFFF_FFFF], bytes.fromhex("80000002") + b"!")


def test_a_reply_pops_the_channel_ids_in_reverse_order_of_the_hops() -> None:
    stack, payload = tags.split(bytes.fromhex("0000000a0000000380000001") + b"pong")
    first, stack = tags.pop(stack)
    second, stack = tags.pop(stack)
    assert (first, second, stack, payload) == (10, 3, [REQUEST], b"pong")
    with pytest.raises(PacketError) as error:
        tags.pop(stack)
    assert error.value.reason == "malformed-tags"


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00\x00\x00", bytes.fromhex("00000001"), bytes.fromhex("000000018000")],
)
def test_a_stack_without_a_request_id_is_malformed(data: bytes) -> None:
    with pytest.raises(PacketError) as error:
        tags.split(data)
    assert error.value.reason == "malformed-tags"


def test_a_stack_deeper_than_max_hops_has_exceeded_its_ttl() -> None:
    seven_hops = tags.join([*range(1, 8), REQUEST], b"x")
    assert tags.split(seven_hops) == ([*range(1, 8), REQUEST], b"x")
    eight_hops = bytes.fromhex("00000000") + seven_hops
    with pytest.raises(PacketError) as error:
        tags.split(eight_hops)
    assert error.value.reason == "ttl-exceeded"
    assert tags.split(eight_hops, max_hops=9)[0][0] == 0


@given(stacks(), st.binary(max_size=64))
def test_join_then_split_gives_back_stack_and_payload(stack: list[int], payload: bytes) -> None:
    assert tags.split(tags.join(stack, payload)) == (stack, payload)


def _split_or_reason(data: bytes, max_hops: int) -> tuple[list[int], bytes] | str:
    try:
        return tags.split(data, max_hops)
    except PacketError as error:
        return error.reason


@given(st.binary(max_size=48), st.integers(1, 12))
def test_any_bytes_split_into_a_stack_or_a_packet_error(data: bytes, max_hops: int) -> None:
    result = _split_or_reason(data, max_hops)
    if isinstance(result, str):
        assert result in {"malformed-tags", "ttl-exceeded"}
    else:
        stack, payload = result
        assert 1 <= len(stack) <= max_hops
        assert tags.join(stack, payload) == data


@given(stacks(), st.dictionaries(st.text(max_size=5), st.integers(), max_size=4))
def test_the_mapping_form_round_trips(stack: list[int], body: dict[str, int]) -> None:
    body.pop(tags.MAPPING_KEY, None)
    carried = tags.join_mapping(stack, body)
    assert next(iter(carried)) == tags.MAPPING_KEY
    assert tags.split_mapping(carried) == (stack, body)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "malformed-tags"),
        ({"sp": []}, "malformed-tags"),
        ({"sp": "80000001"}, "malformed-tags"),
        ({"sp": [1, 2]}, "malformed-tags"),
        ({"sp": [REQUEST, REQUEST]}, "malformed-tags"),
        ({"sp": [True]}, "malformed-tags"),
        ({"sp": [1 << 32]}, "malformed-tags"),
        ({"sp": [*range(8), REQUEST]}, "ttl-exceeded"),
    ],
)
def test_a_bad_mapping_stack_is_a_packet_error(body: dict[str, object], reason: str) -> None:
    with pytest.raises(PacketError) as error:
        tags.split_mapping(body)
    assert error.value.reason == reason


def test_only_31_bit_channel_ids_can_be_pushed() -> None:
    with pytest.raises(LocalProtocolError):
        tags.push([REQUEST], 0x8000_0000)
    with pytest.raises(LocalProtocolError):
        tags.push([REQUEST], -1)


def test_a_stack_must_end_in_exactly_one_request_id_to_be_written() -> None:
    for bad in ([], [1], [REQUEST, REQUEST], [1 << 32]):
        with pytest.raises(LocalProtocolError):
            tags.join(bad, b"")


def test_helpers_tell_request_ids_from_channel_ids() -> None:
    assert tags.is_request_id(0x8000_0000)
    assert tags.is_request_id(0xFFFF_FFFF)
    assert not tags.is_request_id(0x7FFF_FFFF)
    assert not tags.is_request_id(1 << 32)
    assert tags.is_channel_id(0)
    assert not tags.is_channel_id(0x8000_0000)


def test_a_backtrace_pushes_and_pops_like_the_stack_functions() -> None:
    trace = Backtrace.from_tags([REQUEST]).push(4).push(9)
    assert trace == Backtrace((9, 4), REQUEST)
    assert trace.tags == [9, 4, REQUEST]
    assert trace.hops == 2
    channel, rest = trace.pop()
    assert (channel, rest) == (9, Backtrace((4,), REQUEST))
    with pytest.raises(LocalProtocolError):
        Backtrace((REQUEST,), REQUEST)
