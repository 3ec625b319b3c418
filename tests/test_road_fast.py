"""Fast mode on the simulated link: negotiation, AEAD datagrams, replay, loss, rekey, fairness."""

from __future__ import annotations

import json

from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from road._fast_wire import FAST_HEADER_SIZE, is_fast, read_header
from road.stack import LocalEstate, RoadConfig, RoadStack
from road.stats import Drop
from tests.roadkit import (
    MAIN,
    MINION,
    OTHER,
    FilterNet,
    Pair,
    allowed_pair,
    numbered,
    received_seqs,
)
from tests.simlink import Address, Impairment

FAST = RoadConfig(fast=True)


def fast_pair(**kwargs: object) -> Pair:
    """A main and a minion, both advertising fast mode, joined and allowed."""
    return allowed_pair(main_config=RoadConfig(fast=True), minion_config=RoadConfig(fast=True),
                        **kwargs)


def capture(pair: Pair) -> list[tuple[bytes, Address, Address]]:
    """Record every fast datagram the link carries (source, destination)."""
    seen: list[tuple[bytes, Address, Address]] = []
    previous = pair.net.tap

    def tap(data: bytes, source: Address, destination: Address) -> None:
        if is_fast(data):
            seen.append((data, source, destination))
        if previous is not None:
            previous(data, source, destination)

    pair.net.tap = tap
    return seen


def test_two_raetlike_estates_advertise_fast_mode_and_messages_skip_raet_transactions() -> None:
    pair = fast_pair()
    requests = pair.sent(TransactionKind.JOIN, PacketKind.REQUEST, source=MINION)
    assert json.loads(parse_packet(requests[0].data).coat)["rlk"] == 1
    responses = pair.sent(TransactionKind.JOIN, PacketKind.RESPONSE, source=MAIN)
    assert json.loads(parse_packet(responses[0].data).coat)["rlk"] == 1
    datagrams = capture(pair)
    pair.minion.transmit({"hello": "fast"}, to="main")
    pair.main.transmit(b"raw bytes", to="minion")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent))
                   and bool(pair.events(MAIN, events.MessageSent)))
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"hello": "fast"}]
    assert [e.body for e in pair.events(MINION, events.MessageReceived)] == [b"raw bytes"]
    assert pair.sent(TransactionKind.MESSAGE) == []
    assert {source for _, source, _ in datagrams} == {MAIN, MINION}
    assert all(len(data) <= FAST.fast_datagram_size for data, _, _ in datagrams)


def test_a_side_without_the_capability_keeps_both_in_raet_mode() -> None:
    pair = allowed_pair(main_config=RoadConfig(fast=True), minion_config=RoadConfig(fast=False))
    datagrams = capture(pair)
    pair.minion.transmit({"hello": "raet"}, to="main")
    pair.main.transmit({"hello": "back"}, to="minion")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageReceived)) == 1
                   and len(pair.events(MAIN, events.MessageReceived)) == 1)
    assert pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, source=MINION)
    assert pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, source=MAIN)
    assert datagrams == []
    assert not pair.main._fast.links
    assert not pair.minion._fast.links


def test_small_messages_are_coalesced_and_acks_are_few() -> None:
    pair = fast_pair()
    datagrams = capture(pair)
    for body in numbered(1000):
        pair.minion.transmit(body, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 1000)
    assert sorted(received_seqs(pair, MAIN)) == list(range(1000))
    data = [d for d, source, _ in datagrams if source == MINION]
    acks = [d for d, source, _ in datagrams if source == MAIN]
    assert len(data) < 1000 / 10
    assert len(acks) <= len(data)


def test_every_message_arrives_exactly_once_at_20_percent_loss_with_duplicates_and_reordering(
) -> None:
    impairment = Impairment(loss=0.2, duplicate=0.1, jitter=0.02)
    pair = fast_pair(seed=7, impairment=impairment)
    for body in numbered(2000, size=30):
        pair.minion.transmit(body, to="main")
    for body in numbered(500):
        pair.main.transmit(body, to="minion")
    pair.minion.transmit(b"y" * 200_000, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 2001
                   and len(pair.events(MAIN, events.MessageSent)) == 500, timeout=600)
    got = received_seqs(pair, MINION)
    assert sorted(got) == list(range(500))
    bodies = [e.body for e in pair.events(MAIN, events.MessageReceived)]
    assert sorted(b["seq"] for b in bodies if isinstance(b, dict)) == list(range(2000))
    assert [b for b in bodies if isinstance(b, bytes)] == [b"y" * 200_000]
    assert pair.minion.stats.fast_datagrams_lost > 0
    assert pair.main.stats.dropped[Drop.REPLAYED] + pair.main.stats.dropped[Drop.DUPLICATE] > 0
    assert pair.main.stats.messages_received == 2001


def test_a_replayed_datagram_is_dropped_and_counted() -> None:
    pair = fast_pair()
    datagrams = capture(pair)
    pair.minion.transmit({"once": True}, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    data, source, destination = next(d for d in datagrams if d[1] == MINION)
    before = pair.main.stats.dropped[Drop.REPLAYED]
    for _ in range(3):
        pair.net.inject(data, source, destination)
    pair.net.run_for(1.0)
    assert pair.main.stats.dropped[Drop.REPLAYED] == before + 3
    assert len(pair.events(MAIN, events.MessageReceived)) == 1


def test_a_datagram_far_behind_the_window_is_dropped_as_replayed() -> None:
    pair = fast_pair()
    datagrams = capture(pair)
    pair.minion.transmit({"first": True}, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    first = next(d for d in datagrams if d[1] == MINION)
    link = pair.main._fast.links[pair.main.remote("minion").uid]
    replay = link.acks.replay
    replay.mark(replay.highest + 10_000)  # as if 10,000 later packets had arrived
    pair.net.inject(*first)
    pair.net.run_for(0.1)
    assert pair.main.stats.dropped[Drop.REPLAYED] >= 1
    assert len(pair.events(MAIN, events.MessageReceived)) == 1


def test_tampered_datagrams_are_dropped_header_and_payload_alike() -> None:
    pair = fast_pair()
    pair.net.blocked.add(MINION)  # hold the real traffic; we inject altered copies
    datagrams = capture(pair)
    pair.minion.transmit({"secret": "payload"}, to="main")
    pair.net.run_for(0.01)
    data, source, destination = next(d for d in datagrams if d[1] == MINION)
    _, _, _, stream_id, packet_number = read_header(data)
    assert b"payload" not in data
    body_flip = bytearray(data)
    body_flip[-1] ^= 0x01
    header_flip = bytearray(data)
    header_flip[8] ^= 0x01  # the stream id: authenticated, not encrypted
    number_flip = bytearray(data)
    number_flip[FAST_HEADER_SIZE - 1] ^= 0x40
    for altered in (body_flip, header_flip, number_flip):
        pair.net.inject(bytes(altered), source, destination)
    pair.net.run_for(0.1)
    assert pair.main.stats.dropped[Drop.BAD_COAT] == 3
    assert pair.events(MAIN, events.MessageReceived) == []
    # the flips hit the fields they claim to
    assert read_header(bytes(header_flip))[3] != stream_id
    assert read_header(bytes(number_flip))[4] != packet_number
    pair.net.blocked.clear()
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"secret": "payload"}]


def test_a_new_allow_rekeys_and_old_datagrams_no_longer_open() -> None:
    pair = fast_pair()
    datagrams = capture(pair)
    pair.minion.transmit({"n": 1}, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 1)
    link = pair.minion._fast.links[pair.minion.remote("main").uid]
    old_key = link.send_key
    old = next(d for d in datagrams if d[1] == MINION)
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) == 2
                   and len(pair.events(MAIN, events.Allowed)) == 2)
    assert link.send_key is not old_key
    assert link.next_packet == 1  # numbers start again: 0 went with the new keys' trial ping
    dropped = pair.main.stats.dropped_total
    pair.net.inject(*old)
    pair.net.run_for(0.1)
    assert pair.main.stats.dropped_total == dropped + 1
    pair.minion.transmit({"n": 2}, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 2)
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"n": 1}, {"n": 2}]


def test_messages_in_flight_during_a_rekey_arrive_exactly_once() -> None:
    pair = fast_pair(seed=3, impairment=Impairment(loss=0.1, jitter=0.01))
    for body in numbered(1500, size=50):
        pair.minion.transmit(body, to="main")
    pair.net.run_for(0.02)
    pair.main.allow("minion", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 1500, timeout=300)
    assert sorted(received_seqs(pair, MAIN)) == list(range(1500))


def test_a_ten_megabyte_message_streams_through_large_datagrams() -> None:
    config = RoadConfig(fast=True, fast_datagram_size=60_000, fast_max_window=4_000_000)
    pair = allowed_pair(main_config=config, minion_config=RoadConfig(
        fast=True, fast_datagram_size=60_000, fast_max_window=4_000_000))
    blob = bytes(range(256)) * 40_960
    start = pair.net.now
    pair.minion.transmit(blob, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)), timeout=60)
    [received] = pair.events(MAIN, events.MessageReceived)
    assert received.body == blob
    assert received.segments == -(-len(blob) // pair.minion._fast.links[2].sending.chunk_size)
    assert pair.net.now - start < 1.0  # virtual seconds on a 0.5 ms link
    assert pair.minion.stats.fast_datagrams_lost == 0


def test_a_megabyte_message_arrives_whole_through_small_datagrams_under_loss() -> None:
    pair = fast_pair(seed=11, impairment=Impairment(loss=0.05, duplicate=0.05, jitter=0.005))
    blob = bytes(range(256)) * 4096
    pair.main.transmit(blob, to="minion")
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageSent)), timeout=120)
    assert [e.body for e in pair.events(MINION, events.MessageReceived)] == [blob]


def test_two_remotes_share_the_sender_fairly() -> None:
    net = FilterNet(seed=0, impairment=Impairment())
    main = RoadStack(LocalEstate("main", main=True), RoadConfig(fast=True))
    first = RoadStack(LocalEstate("first"), RoadConfig(fast=True))
    second = RoadStack(LocalEstate("second"), RoadConfig(fast=True))
    for address, stack in ((MAIN, main), (MINION, first), (OTHER, second)):
        net.add(address, stack)
    first.join(MAIN, now=net.now)
    second.join(MAIN, now=net.now)
    assert net.run_until(lambda: len(net.of_type(MAIN, events.Allowed)) == 2
                         and bool(net.of_type(MINION, events.Allowed))
                         and bool(net.of_type(OTHER, events.Allowed)))
    blob = b"z" * 1_000_000
    start = net.now
    main.transmit(blob, to="first")
    main.transmit(blob, to="second")
    finished: dict[Address, float] = {}

    def progress() -> bool:
        for address in (MINION, OTHER):
            if address not in finished and net.of_type(address, events.MessageReceived):
                finished[address] = net.now - start
        return len(finished) == 2

    assert net.run_until(progress, timeout=60)
    early, late = sorted(finished.values())
    assert late < 1.25 * early  # one after the other would take twice as long
