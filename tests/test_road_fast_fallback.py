"""Fast mode falls back to RAET mode when the peer never acknowledges a fast datagram."""

from __future__ import annotations

import pytest

from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from road._fast_wire import is_fast
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.roadkit import MAIN, MINION, FilterNet, Pair, Sent, numbered, received_seqs
from tests.simlink import Address

PROBE_TIMEOUT = 0.1 + 4 * 0.05 + 0.005  # the first PTO before any RTT sample (docs/road.md)
PROBE_CAP = 0.5  # later probes back off to this interval


class FastDroppingNet(FilterNet):
    """A link that loses every fast-mode datagram on the chosen directions (a middlebox)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.drop_fast: set[tuple[Address, Address]] = set()
        self.drop_all: set[Address] = set()  # senders silenced both ways (a stalled process)
        self.fast_sent: list[tuple[float, Address, Address]] = []

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        if source in self.drop_all:
            self.counters.sent += 1
            self.counters.dropped += 1
            return
        if is_fast(data):
            self.fast_sent.append((self.now, source, destination))
            if (source, destination) in self.drop_fast:
                self.counters.sent += 1
                self.counters.dropped += 1
                return
        super()._transmit(data, source, destination)


def fast_pair(main_config: RoadConfig | None = None,
              minion_config: RoadConfig | None = None) -> tuple[Pair, FastDroppingNet]:
    """A fast-mode main and minion, joined and allowed, on a net that can drop fast datagrams."""
    net = FastDroppingNet()
    main = RoadStack(LocalEstate("main", main=True), main_config or RoadConfig(fast=True))
    minion = RoadStack(LocalEstate("minion"), minion_config or RoadConfig(fast=True))
    net.add(MAIN, main)
    net.add(MINION, minion)
    pair = Pair(net, main, minion)

    def tap(data: bytes, source: Address, destination: Address) -> None:
        if not is_fast(data):
            pair.wire.append(Sent(net.now, parse_packet(data).head, data, source, destination))

    net.tap = tap
    pair.allow()
    net.run_for(0.01)  # the allow's trial pings (road._fast_link.Ping) and their acks
    net.fast_sent.clear()
    assert pair.minion._fast.links
    assert pair.main._fast.links
    return pair, net


def fallback_time(pair: Pair, stack: RoadStack) -> float:
    """Run until ``stack`` falls back; the virtual time it did."""
    pair.run_until(lambda: stack.stats.fast_fallbacks > 0)
    return pair.net.now


def first_fast_from(net: FastDroppingNet, source: Address) -> float:
    return min(at for at, sender, _ in net.fast_sent if sender == source)


def test_a_middlebox_dropping_fast_datagrams_makes_both_sides_fall_back_and_lose_nothing() -> None:
    pair, net = fast_pair()
    net.drop_fast = {(MINION, MAIN), (MAIN, MINION)}
    for body in numbered(20):
        pair.minion.transmit(body, to="main")
    for body in numbered(5):
        pair.main.transmit(body, to="minion")
    start = net.now
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 20
                   and len(received_seqs(pair, MINION)) == 5
                   and len(pair.events(MINION, events.MessageSent)) == 20)
    assert received_seqs(pair, MAIN) == list(range(20))
    assert received_seqs(pair, MINION) == list(range(5))
    assert len(pair.events(MINION, events.MessageSent)) == 20
    assert pair.events(MINION, events.MessageExpired) == []
    for address, stack in ((MINION, pair.minion), (MAIN, pair.main)):
        fallbacks = pair.events(address, events.FastModeFallback)
        assert [e.remote for e in fallbacks] == ["main" if address == MINION else "minion"]
        assert "probes unanswered" in fallbacks[0].reason
        assert stack.stats.fast_fallbacks == 1
        assert not stack._fast.links
    assert pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, source=MINION)
    assert pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, source=MAIN)
    assert net.now - start < 5.0


def test_the_fallback_comes_at_the_fourth_unanswered_probe_timeout_by_default() -> None:
    # (no presence checks meanwhile: their pings, and acks of them, would count as sends)
    pair, net = fast_pair(main_config=RoadConfig(fast=True, keepalive=False),
                          minion_config=RoadConfig(fast=True, keepalive=False))
    net.drop_fast = {(MINION, MAIN)}
    pair.minion.transmit({"n": 1}, to="main")
    at = fallback_time(pair, pair.minion)
    sent = first_fast_from(net, MINION)
    # the fourth probe timeout finds the main silent both ways (no presence checks here):
    # it asks a RAET alive, answered at once, and the fifth falls back
    assert at == pytest.approx(sent + PROBE_TIMEOUT + 4 * PROBE_CAP)
    assert "5 fast-mode probes unanswered" in pair.events(
        MINION, events.FastModeFallback)[0].reason
    probes = [t for t, source, _ in net.fast_sent if source == MINION]
    assert len({round(t, 9) for t in probes}) == 5  # the first send and four probes
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)), timeout=10)
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"n": 1}]


def test_the_fallback_deadline_fires_at_its_exact_time_when_probes_do_not_count() -> None:
    config = RoadConfig(fast=True, fast_fallback_probes=0, fast_fallback_after=1.25)
    pair, net = fast_pair(minion_config=config)
    net.drop_fast = {(MINION, MAIN)}
    pair.minion.transmit({"n": 1}, to="main")
    at = fallback_time(pair, pair.minion)
    # at 1.25 s the main had sent nothing signed since: a RAET alive asks, and the deadline
    # fires 0.25 s (road._fast_link._RAET_GRACE) after its answer (one round trip later)
    asked = first_fast_from(net, MINION) + 1.25
    assert asked + 0.25 < at < asked + 0.35
    reason = pair.events(MINION, events.FastModeFallback)[0].reason
    assert "no fast datagram acknowledged in 1.25 s" in reason
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)), timeout=10)


def test_a_peer_that_never_answers_fast_mode_still_gets_every_message_once_in_order() -> None:
    pair, net = fast_pair()
    net.drop_fast = {(MINION, MAIN)}  # it drops what we send; it sends nothing fast itself
    for body in numbered(50, size=300):
        pair.minion.transmit(body, to="main")
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 50)
    pair.net.run_for(2.0)
    assert received_seqs(pair, MAIN) == list(range(50))
    assert len(pair.events(MINION, events.MessageSent)) == 50
    assert pair.main.stats.fast_fallbacks == 0  # it never had anything to send


def test_messages_transmitted_after_the_fallback_go_in_raet_mode() -> None:
    pair, net = fast_pair()
    net.drop_fast = {(MINION, MAIN)}
    pair.minion.transmit({"seq": 0}, to="main")
    fallback_time(pair, pair.minion)
    fast_before = len(net.fast_sent)
    pair.minion.transmit({"seq": 1}, to="main")
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 2)
    assert received_seqs(pair, MAIN) == [0, 1]
    assert [t for t, source, _ in net.fast_sent[fast_before:] if source == MINION] == []


def test_a_link_that_was_answered_never_falls_back_during_a_later_outage() -> None:
    pair, net = fast_pair()
    pair.minion.transmit({"seq": 0}, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 1)
    net.drop_fast = {(MINION, MAIN), (MAIN, MINION)}
    pair.minion.transmit({"seq": 1}, to="main")
    pair.net.run_for(4.0)
    net.drop_fast = set()
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 2)
    assert received_seqs(pair, MAIN) == [0, 1]
    assert pair.events(MINION, events.FastModeFallback) == []
    assert pair.minion.stats.fast_fallbacks == 0
    assert pair.sent(TransactionKind.MESSAGE) == []


def test_the_next_allow_tries_fast_mode_again() -> None:
    pair, net = fast_pair()
    net.drop_fast = {(MINION, MAIN), (MAIN, MINION)}
    pair.minion.transmit({"seq": 0}, to="main")
    fallback_time(pair, pair.minion)
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 1)
    net.drop_fast = set()
    allows = len(pair.events(MINION, events.Allowed))
    pair.minion.allow("main")
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) > allows)
    assert pair.minion._fast.links
    raet_messages = len(pair.sent(TransactionKind.MESSAGE, source=MINION))
    pair.minion.transmit({"seq": 1}, to="main")
    pair.run_until(lambda: len(received_seqs(pair, MAIN)) == 2)
    assert received_seqs(pair, MAIN) == [0, 1]
    assert len(pair.sent(TransactionKind.MESSAGE, source=MINION)) == raet_messages
    assert pair.minion.stats.fast_fallbacks == 1


def test_both_triggers_at_zero_keep_the_old_behaviour_of_never_falling_back() -> None:
    config = RoadConfig(fast=True, fast_fallback_probes=0, fast_fallback_after=0)
    pair, net = fast_pair(minion_config=config)
    net.drop_fast = {(MINION, MAIN)}
    pair.minion.transmit({"n": 1}, to="main")
    pair.net.run_for(25.0)  # max_redos (40) probe timeouts at most 0.5 s apart
    assert pair.minion.stats.fast_fallbacks == 0
    assert pair.events(MAIN, events.MessageReceived) == []
    assert pair.events(MINION, events.RemoteLost)


def test_a_peer_silent_both_ways_is_asked_by_raet_and_not_fallen_back_from() -> None:
    # A main too busy to answer anything for 2.5 s (a saturated machine): fast mode's probes
    # time out, but RAET mode would only cost it more; a RAET alive asks, goes unanswered
    # too, and the link stays fast.  (Before: the fourth probe timeout fell back.)
    quiet = RoadConfig(fast=True, keepalive=False)
    pair, net = fast_pair(main_config=quiet, minion_config=RoadConfig(fast=True,
                                                                      keepalive=False))
    net.drop_all = {MAIN}
    pair.minion.transmit({"n": 1}, to="main")
    net.run_until(lambda: False, timeout=2.5)  # past the fourth probe timeout (1.805 s)
    assert len({round(t, 9) for t, source, _ in net.fast_sent if source == MINION}) >= 4
    assert pair.minion.stats.fast_fallbacks == 0
    assert pair.sent(TransactionKind.ALIVE, PacketKind.REQUEST, source=MINION)  # asked
    net.drop_all = set()
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)), timeout=10)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)), timeout=10)
    assert [e.body for e in pair.events(MAIN, events.MessageReceived)] == [{"n": 1}]
    assert pair.minion.stats.fast_fallbacks == 0
    assert pair.main.stats.fast_fallbacks == 0
    assert pair.minion._fast.links
    assert pair.main._fast.links


def test_a_peer_silent_for_4_s_is_not_lost_when_presence_checks_are_off() -> None:
    # The RAET alive the fallback asks is a trial: its silence ends it, and only the
    # presence checks (none here) say a remote is lost.  (Before: lost after its 2 s.)
    quiet = RoadConfig(fast=True, keepalive=False)
    pair, net = fast_pair(main_config=quiet, minion_config=RoadConfig(fast=True,
                                                                      keepalive=False))
    net.blocked.add(MAIN)  # a main stalled 4 s (a join storm): silent both ways
    pair.minion.transmit({"n": 1}, to="main")
    net.run_to(net.now + 4.0)  # (run_until steps past its timeout to the next timer)
    assert pair.sent(TransactionKind.ALIVE, PacketKind.REQUEST, source=MINION)  # asked
    net.blocked.clear()
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)), timeout=10)
    assert pair.minion.stats.fast_fallbacks == 0
    assert pair.events(MINION, events.RemoteLost) == []


def test_a_peer_silent_for_4_s_is_not_lost_before_its_presence_period() -> None:
    slow = RoadConfig(fast=True, period=10.0)  # --presence-period 10, as for 10,000 estates
    pair, net = fast_pair(main_config=slow, minion_config=RoadConfig(fast=True, period=10.0))
    net.run_to(net.now + 1.0)
    net.blocked.add(MAIN)  # a main stalled 4 s: silent both ways
    pair.minion.transmit({"n": 1}, to="main")
    net.run_to(net.now + 4.0)  # (run_until steps past its timeout to the next timer)
    net.blocked.clear()
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)), timeout=10)
    assert pair.events(MINION, events.RemoteLost) == []
