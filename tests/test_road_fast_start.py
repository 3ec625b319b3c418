"""Fast mode's start: the initial window leaves as one flight, and a short burst is not
held back by slow start or by a pace guessed before the first RTT sample (issue 16)."""

from __future__ import annotations

from road import events
from road._fast_control import INITIAL_WINDOW_DATAGRAMS, CongestionControl
from road._fast_wire import is_fast
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, Pair, allowed_pair, numbered
from tests.simlink import Address, Impairment

DATAGRAM = 1232


def _pair(delay: float) -> Pair:
    return allowed_pair(main_config=RoadConfig(fast=True, fast_datagram_size=DATAGRAM),
                        minion_config=RoadConfig(fast=True), impairment=Impairment(delay=delay))


def _data_sent_at(pair: Pair) -> list[float]:
    """When each fast datagram from the main to the minion went (the sender's side)."""
    times: list[float] = []
    previous = pair.net.tap

    def tap(data: bytes, source: Address, destination: Address) -> None:
        if is_fast(data) and source == MAIN and len(data) > 200:  # data, not a lone ack
            times.append(pair.net.now)
        if previous is not None:
            previous(data, source, destination)

    pair.net.tap = tap
    return times


def _burst(pair: Pair, count: int) -> float:
    """Virtual seconds from queueing ``count`` messages on the main to the last delivery."""
    start = pair.net.now
    for message in numbered(count, 80):
        pair.main.transmit(message, "minion", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageReceived)) >= count)
    return pair.net.now - start


def test_the_initial_window_leaves_as_one_flight() -> None:
    pair = _pair(0.0005)
    sent = _data_sent_at(pair)
    _burst(pair, 2000)
    first_flight = [at for at in sent if at == sent[0]]
    # 64 KiB of 1232-byte datagrams: 53 at once (the old start sent 10, then paced the
    # rest at the guessed 100 ms round trip: one every 4.6 ms)
    assert len(first_flight) >= 64 * 1024 // DATAGRAM


def test_a_smaller_initial_window_is_never_under_ten_datagrams() -> None:
    control = CongestionControl(DATAGRAM, 1 << 20, initial_window=1)
    assert control.window == INITIAL_WINDOW_DATAGRAMS * DATAGRAM
    capped = CongestionControl(DATAGRAM, 4 * DATAGRAM, initial_window=1 << 20)
    assert capped.window == 4 * DATAGRAM


def test_pacing_starts_with_the_first_rtt_sample() -> None:
    control = CongestionControl(DATAGRAM, 1 << 20, initial_window=64 * 1024)
    for _ in range(40):
        control.on_sent(DATAGRAM, 5.0)
    assert control.pace_next == float("-inf")  # no pace before a sample
    control.sample(0.001)
    control.on_sent(DATAGRAM, 5.0)
    assert 5.0 - 0.001 < control.pace_next < 5.0 + 0.001


def test_a_short_burst_takes_few_round_trips_on_a_lan() -> None:
    # 5,000 messages of ~100 bytes are about 450 datagrams: from a 10-datagram start slow
    # start needs 6 round trips (6.1 ms at 1 ms RTT), from 64 KiB 4
    rtt = 0.001
    elapsed = _burst(_pair(rtt / 2), 5000)
    assert elapsed < 4.5 * rtt
    # a long stream afterwards runs at the same pace per message or better
    pair = _pair(rtt / 2)
    short = _burst(pair, 5000) / 5000
    long = _burst(pair, 20000) / 20000
    assert long <= short * 1.05


def test_a_virtual_clock_near_zero_does_not_pace_the_first_flight() -> None:
    control = CongestionControl(DATAGRAM, 1 << 20)
    control.sample(0.0001)
    for _ in range(INITIAL_WINDOW_DATAGRAMS - 1):
        control.on_sent(DATAGRAM, 0.0)
        assert control.pace_next <= 0.0  # the burst credit holds from the clock's start


def _acks_from(pair: Pair, source: Address) -> list[float]:
    """When ``source`` sends each fast datagram that carries no data (a lone ack)."""
    times: list[float] = []
    previous = pair.net.tap

    def tap(data: bytes, sender: Address, destination: Address) -> None:
        if is_fast(data) and sender == source and len(data) < 200:
            times.append(pair.net.now)
        if previous is not None:
            previous(data, sender, destination)

    pair.net.tap = tap
    return times


def test_a_bursts_short_tail_just_after_an_every_second_ack_is_acked_at_once() -> None:
    # Two full datagrams arrive together and get the every-second ack; the burst's short
    # tail arrives 0.1 ms later.  Its ack goes at once: the early-ack spacing counts from
    # the last early ack, not from that every-second one (which held it ~1 ms).
    delay = 0.0005
    pair = _pair(delay)
    link = pair.minion._fast.links[pair.minion.remote("main").uid]
    full = b"f" * link.sending.chunk_size  # one message fills a datagram
    for _ in range(2):
        pair.minion.transmit(full, to="main", now=pair.net.now)
    pair.net.run_to(pair.net.now + 0.0001)
    tail_sent = pair.net.now
    pair.minion.transmit(b"tail", to="main", now=tail_sent)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 3)
    assert pair.net.now - tail_sent <= 2 * delay + 1e-6  # one round trip, no wait


def test_a_stream_of_short_datagrams_still_gets_an_ack_for_every_second_one_at_most() -> None:
    # the early ack of short datagrams stays bounded: at most one a millisecond beside
    # the every-second cadence
    pair = _pair(0.0005)
    acks = _acks_from(pair, MAIN)
    start = pair.net.now
    for n in range(40):  # one short datagram each 0.05 ms: 2 ms in all
        pair.minion.transmit(b"s%d" % n, to="main", now=pair.net.now)
        pair.net.run_to(pair.net.now + 0.00005)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 40)
    during = [at for at in acks if at >= start]
    assert len(during) <= 40 // 2 + 3
