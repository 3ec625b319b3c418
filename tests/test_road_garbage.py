"""Garbage from the wire is dropped and counted with a reason, never raised."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.crypto import SigningKey
from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet, parse_packet
from road import events
from road.stack import LocalEstate, RoadStack
from road.stats import Drop
from tests.roadkit import MAIN, MINION, Pair, Sent, allowed_pair, make_pair

MESSAGE = TransactionKind.MESSAGE


def _message_pair() -> tuple[Pair, Sent]:
    pair = allowed_pair()
    pair.minion.transmit({"n": 1}, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    segment = pair.sent(MESSAGE, PacketKind.MESSAGE, source=MINION)[0]
    return pair, segment


def _feed(pair: Pair, data: bytes) -> None:
    pair.main.receive_datagram(data, MINION, pair.net.now)


def _forge(segment: Sent, key: SigningKey, **changes: object) -> bytes:
    packet = parse_packet(segment.data)
    head = dataclasses.replace(packet.head, **changes)  # type: ignore[arg-type]
    return pack_packet(head, packet.coat, key)


def test_random_bytes_are_dropped_as_malformed() -> None:
    pair = allowed_pair()
    _feed(pair, b"\x00\xffnot a packet at all")
    _feed(pair, b"")
    assert pair.main.stats.dropped[Drop.MALFORMED] == 2


def test_a_truncated_packet_is_dropped_as_malformed() -> None:
    pair, segment = _message_pair()
    for cut in (1, 10, len(segment.data) // 2, len(segment.data) - 1):
        _feed(pair, segment.data[:cut])
    assert pair.main.stats.dropped[Drop.MALFORMED] == 4


def test_a_flipped_bit_in_the_signature_is_a_bad_signature_and_starts_nothing() -> None:
    pair, segment = _message_pair()
    forged = bytearray(_forge(segment, pair.minion.local.signing_key,
                              transaction_id=segment.head.transaction_id + 7))
    forged[-1] ^= 0x01
    _feed(pair, bytes(forged))
    assert pair.main.stats.dropped[Drop.BAD_SIGNATURE] == 1
    assert not pair.main.remote("minion").in_process(MESSAGE)
    pair.net.run_for(2.0)
    assert len(pair.events(MAIN, events.MessageReceived)) == 1


def test_a_packet_signed_by_another_key_is_a_bad_signature() -> None:
    pair, segment = _message_pair()
    _feed(pair, _forge(segment, SigningKey.generate(),
                       transaction_id=segment.head.transaction_id + 7))
    assert pair.main.stats.dropped[Drop.BAD_SIGNATURE] == 1
    assert not pair.main.remote("minion").in_process(MESSAGE)


def test_a_packet_for_an_unknown_estate_id_is_dropped_as_unknown_remote() -> None:
    pair, segment = _message_pair()
    _feed(pair, _forge(segment, pair.minion.local.signing_key, destination_uid=999))
    assert pair.main.stats.dropped[Drop.UNKNOWN_REMOTE] == 1


def test_a_packet_with_session_zero_or_ids_zero_is_dropped() -> None:
    pair, segment = _message_pair()
    key = pair.minion.local.signing_key
    _feed(pair, _forge(segment, key, session_id=0))
    _feed(pair, _forge(segment, key, source_uid=0))
    assert pair.main.stats.dropped[Drop.ZERO_SESSION] == 1
    assert pair.main.stats.dropped[Drop.ZERO_ID] == 1


def test_a_join_packet_with_a_session_id_is_dropped() -> None:
    pair = make_pair()
    pair.minion.join(MAIN, now=0.0)
    [(data, _)] = pair.minion.datagrams_to_send(0.0)
    packet = parse_packet(data)
    head = dataclasses.replace(packet.head, session_id=5)
    pair.main.receive_datagram(pack_packet(head, packet.coat), MINION, 0.0)
    assert pair.main.stats.dropped[Drop.JOIN_NONZERO_SESSION] == 1
    assert not pair.main.remotes


def test_a_stale_answer_for_no_transaction_is_counted_and_nacked() -> None:
    pair, _ = _message_pair()
    done = pair.sent(MESSAGE, PacketKind.DONE, source=MAIN)[0]
    before = pair.main.stats.nacks_sent
    pair.minion.receive_datagram(done.data, MAIN, pair.net.now)
    assert pair.minion.stats.dropped[Drop.STALE_PACKET] == 1
    assert len(pair.minion.datagrams_to_send(pair.net.now)) == 1  # the nack
    assert pair.main.stats.nacks_sent == before


# -- fuzzing -------------------------------------------------------------------------------

def _stacks_in_states() -> list[tuple[RoadStack, tuple[str, int], list[bytes]]]:
    """A fresh main, a main mid-join, and both sides of an allowed pair, with real packets."""
    fresh = RoadStack(LocalEstate("lonely", main=True))
    joining = make_pair()
    joining.minion.join(MAIN, now=0.0)
    joining.net.step()
    pair, _ = _message_pair()
    samples = [s.data for s in pair.wire[:40]] + [s.data for s in joining.wire]
    return [(fresh, MINION, samples), (joining.main, MINION, samples),
            (pair.main, MINION, samples), (pair.minion, MAIN, samples)]


STATES = _stacks_in_states()


def _survives(stack: RoadStack, source: tuple[str, int], data: bytes) -> None:
    received = stack.stats.datagrams_received
    stack.receive_datagram(data, source, stack.now + 0.001)
    stack.handle_timer(stack.now)
    stack.datagrams_to_send(stack.now)
    assert stack.stats.datagrams_received == received + 1


@settings(max_examples=150)
@given(index=st.integers(0, len(STATES) - 1), data=st.binary(max_size=1100))
def test_arbitrary_bytes_never_raise_out_of_receive_datagram(index: int, data: bytes) -> None:
    stack, source, _ = STATES[index]
    dropped = stack.stats.dropped_total
    _survives(stack, source, data)
    assert stack.stats.dropped_total == dropped + 1  # random bytes are never a packet


@settings(max_examples=150)
@given(index=st.integers(0, len(STATES) - 1), pick=st.integers(0, 10_000),
       flips=st.lists(st.tuples(st.integers(0, 1100), st.integers(0, 7)), max_size=4),
       cut=st.integers(0, 1100))
def test_damaged_real_packets_never_raise_out_of_receive_datagram(
    index: int, pick: int, flips: list[tuple[int, int]], cut: int,
) -> None:
    stack, source, samples = STATES[index]
    data = bytearray(samples[pick % len(samples)])
    for spot, bit in flips:
        if data:
            data[spot % len(data)] ^= 1 << bit
    _survives(stack, source, bytes(data[: max(cut, 1)]))


@pytest.mark.slow
@settings(max_examples=100_000)
@given(index=st.integers(0, len(STATES) - 1), pick=st.integers(0, 10_000),
       flips=st.lists(st.tuples(st.integers(0, 1100), st.integers(0, 7)), max_size=8),
       cut=st.integers(0, 1100), noise=st.binary(max_size=1100))
def test_many_damaged_packets_and_noise_never_raise(
    index: int, pick: int, flips: list[tuple[int, int]], cut: int, noise: bytes,
) -> None:
    stack, source, samples = STATES[index]
    data = bytearray(samples[pick % len(samples)])
    for spot, bit in flips:
        if data:
            data[spot % len(data)] ^= 1 << bit
    _survives(stack, source, bytes(data[: max(cut, 1)]))
    _survives(stack, source, noise)
