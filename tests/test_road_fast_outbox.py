"""Fast mode and the outbox: the in-flight limit, time to live of queued messages, fallback."""

from __future__ import annotations

import pytest

from raetlike.wire.kinds import TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from road._fast_wire import is_fast
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, Pair, allowed_pair
from tests.simlink import Address

PATIENT = {"fast_fallback_after": 0.0, "fast_fallback_probes": 0, "max_redos": 1000}


def fast_pair(**settings: object) -> Pair:
    """A fast-mode main and minion, joined and allowed; ``settings`` go to the minion."""
    return allowed_pair(main_config=RoadConfig(fast=True),
                        minion_config=RoadConfig(fast=True, **settings))  # type: ignore[arg-type]


def fast_datagrams_from(pair: Pair, source: Address) -> list[float]:
    """Record when ``source`` puts each fast datagram on the wire (the list fills as it runs)."""
    times: list[float] = []
    previous = pair.net.tap

    def tap(data: bytes, sender: Address, destination: Address) -> None:
        if sender == source and is_fast(data):
            times.append(pair.net.now)
        if previous is not None:
            previous(data, sender, destination)

    pair.net.tap = tap
    return times


def expired_at(pair: Pair, count: int, start: float) -> list[tuple[bytes, float]]:
    """Run until ``count`` messages came back expired: (body, seconds after start) each."""
    seen: list[tuple[bytes, float]] = []

    def more() -> bool:
        seen.extend((event.body, round(pair.net.now - start, 3))
                    for event in pair.events(MINION, events.MessageExpired)[len(seen):])
        return len(seen) >= count

    pair.run_until(more, timeout=20)
    return seen


def test_no_more_messages_leave_the_outbox_than_the_in_flight_limit() -> None:
    pair = fast_pair(fast_messages_in_flight=5, **PATIENT)
    pair.net.blocked.add(MAIN)
    for n in range(12):
        pair.minion.transmit(b"m%d" % n, to="main")
    pair.net.run_for(0.5)
    remote = pair.minion.remote("main")
    assert [o.body for o in remote.outbox] == [b"m%d" % n for n in range(5, 12)]
    pair.net.blocked.clear()
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 12)
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == \
        [b"m%d" % n for n in range(12)]


def test_the_in_flight_limit_slides_as_the_oldest_messages_are_acknowledged() -> None:
    pair = fast_pair(fast_messages_in_flight=3)
    for n in range(200):
        pair.minion.transmit(b"s%d" % n, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 200)
    link = pair.minion._fast.links[pair.minion.remote("main").uid]
    assert link.sending.next_number == 201
    assert not link.sending.messages
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == \
        [b"s%d" % n for n in range(200)]


def test_queued_messages_expire_each_at_its_own_ttl_behind_a_closed_window() -> None:
    pair = fast_pair(fast_messages_in_flight=1, **PATIENT)
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    pair.minion.transmit(b"in flight", to="main", ttl=10.0)
    for body, ttl in ((b"two", 2.0), (b"half", 0.5), (b"one", 1.0)):
        pair.minion.transmit(body, to="main", ttl=ttl)
    seen = expired_at(pair, 3, start)
    assert [body for body, _ in seen] == [b"half", b"one", b"two"]
    assert [at for _, at in seen] == pytest.approx([0.5, 1.0, 2.0], abs=0.01)
    assert all("queued" in e.reason for e in pair.events(MINION, events.MessageExpired))


def test_messages_to_a_fast_remote_put_no_timer_on_the_stack_heap_each() -> None:
    pair = fast_pair(**PATIENT)
    pair.net.blocked.add(MAIN)
    before = len(pair.minion._remote_timers)
    for n in range(1000):
        pair.minion.transmit(b"x%d" % n, to="main", now=pair.net.now)
    assert len(pair.minion._remote_timers) == before


def test_queued_messages_keep_their_ttls_when_fast_mode_falls_back() -> None:
    pair = fast_pair(fast_messages_in_flight=1, max_messages_in_flight=1,
                     fast_fallback_after=0.3, max_redos=1000)
    # a middlebox lets only RAET alives through to main: fast mode falls back (a main silent
    # both ways would not be fallen back from: road._fast_link, _raet_answers), and nothing
    # is delivered, so every queued message expires at its own time to live
    transmit = pair.net._transmit

    def middlebox(data: bytes, source: Address, destination: Address) -> None:
        if destination == MAIN and (is_fast(data) or parse_packet(data).head.transaction_kind
                                    is not TransactionKind.ALIVE):
            return
        transmit(data, source, destination)

    pair.net._transmit = middlebox  # type: ignore[method-assign]
    start = pair.net.now
    pair.minion.transmit(b"in flight", to="main", ttl=30.0)
    for body, ttl in ((b"soon", 1.0), (b"middle", 2.0), (b"late", 4.0)):
        pair.minion.transmit(body, to="main", ttl=ttl)
    # (ascending: RAET mode watches the head of the outbox and the presence timer only)
    pair.run_until(lambda: pair.minion.stats.fast_fallbacks == 1, timeout=2)
    seen = expired_at(pair, 3, start)
    assert [body for body, _ in seen] == [b"soon", b"middle", b"late"]
    assert [at for _, at in seen] == pytest.approx([1.0, 2.0, 4.0], abs=0.01)


def test_a_lone_short_datagram_is_acknowledged_without_the_ack_delay() -> None:
    pair = fast_pair()
    pair.net.run_for(0.01)  # the allow's trial pings and their acks go first
    start = pair.net.now
    pair.minion.transmit(b"alone", to="main", now=start)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    assert pair.net.now - start == pytest.approx(2 * 0.0005, abs=1e-4)  # one round trip


def test_full_datagrams_are_acknowledged_every_second_one() -> None:
    pair = allowed_pair(main_config=RoadConfig(fast=True, fast_ack_delay=0.05),
                        minion_config=RoadConfig(fast=True))
    acks = fast_datagrams_from(pair, MAIN)
    for n in range(6):  # one per datagram, each well over half of 1,232 bytes, 0.1 ms apart
        pair.minion.transmit(b"%d" % n * 1000, to="main", now=pair.net.now)
        pair.net.run_for(0.0001)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 6)
    assert len(acks) == 3


def test_a_body_that_cannot_be_packed_comes_back_and_the_next_one_still_goes() -> None:
    pair = fast_pair()
    bad = pair.minion.transmit({"value": object()}, to="main")
    pair.minion.transmit({"value": 2}, to="main")
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)))
    [expired] = pair.events(MINION, events.MessageExpired)
    assert expired.message_id == bad
    assert "cannot be packed" in expired.reason
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"value": 2}]


def test_a_message_whose_ttl_ran_out_before_it_left_the_outbox_is_not_sent() -> None:
    pair = fast_pair()
    now = pair.net.now
    late = pair.minion.transmit(b"late", to="main", ttl=0.0, now=now)
    pair.minion.transmit(b"kept", to="main", now=now)
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)))
    [expired] = pair.events(MINION, events.MessageExpired)
    assert (expired.message_id, expired.body) == (late, b"late")
    assert "queued" in expired.reason
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [b"kept"]


def test_a_stream_of_short_datagrams_is_acknowledged_about_every_second_one() -> None:
    pair = fast_pair()
    acks = fast_datagrams_from(pair, MAIN)
    for n in range(40):  # one short datagram every 0.2 ms
        pair.minion.transmit(b"tick %d" % n, to="main", now=pair.net.now)
        pair.net.run_for(0.0002)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 40)
    assert 18 <= len(acks) <= 24  # every second one (and the tail at once), not 40


def test_a_closing_stack_still_tells_the_peer_of_a_message_that_expired_in_flight() -> None:
    pair = fast_pair(**PATIENT)
    minion, now = pair.minion, pair.net.now
    minion.transmit(b"doomed", to="main", ttl=0.2, now=now)
    assert len([d for d, _ in minion.datagrams_to_send(now) if is_fast(d)]) == 1
    now += 0.2
    minion.handle_timer(now)  # expired in flight: its abandon waits to go
    minion.close(now=now)
    assert len([d for d, _ in minion.datagrams_to_send(now) if is_fast(d)]) == 1


def test_fast_messages_in_flight_is_read_at_each_use() -> None:
    pair = fast_pair(**PATIENT)
    pair.minion.config.fast_messages_in_flight = 2
    pair.net.blocked.add(MAIN)
    for n in range(5):
        pair.minion.transmit(b"m%d" % n, to="main", now=pair.net.now)
    pair.net.run_for(0.3)
    assert [o.body for o in pair.minion.remote("main").outbox] == [b"m2", b"m3", b"m4"]
