"""Spoofed sources cannot keep a main's handshake places full: once ``max_open_handshakes``
of a kind are open, a newcomer takes the place of the oldest one still unproven
``handshake_grace`` after it opened (its peer never showed it receives what the main sent);
a proven one stays (docs/road.md, "A main under a join storm")."""

from __future__ import annotations

import dataclasses

from raetlike.crypto import SigningKey
from raetlike.wire.kinds import AutoMode, PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet, parse_packet
from road import events
from road._join import Joinent, Joiner
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from road.stats import Drop
from tests.roadkit import MAIN, MINION, OTHER, Pair, Sent, make_pair
from tests.simlink import Address, Impairment
from tests.spoofkit import RATE, JoinStream, Spoofer, joined_within
from tests.test_road_amplification import forged_join

ANSWERED_WITHIN = 0.1
"""The bound these tests hold a real handshake to: its first packet that reaches the main
gets in and it completes one round trip later (1 ms on this link)."""


def _lose_the_first_join_ack(pair: Pair) -> list[Sent]:
    """Drop the minion's first join ACK on the simulated link; the list gets it once lost."""
    lost: list[Sent] = []

    def lose_first_ack(sent: Sent) -> bool:
        if (not lost and sent.source == MINION and sent.head.packet_kind == PacketKind.ACK
                and sent.head.transaction_kind == TransactionKind.JOIN):
            lost.append(sent)
            return True
        return False

    pair.net.drop = lose_first_ack
    return lost


def test_spoofed_joins_sent_as_fast_as_the_rate_allows_keep_no_real_joiner_waiting() -> None:
    """32 spoofed hosts (more than the 26 the default bounds needed) each sending a join
    the moment its per-source rate allows one (2 a second, bursts of 20), so that each
    place that frees, or grows old enough to be taken over, goes to a spoofed join as
    soon as the rate allows: the real joiner still gets in at its first request or its
    first redo.  Before, the 256 places stayed full and it was shed for as long as the
    attack lasted (30 s here)."""
    pair = make_pair(main_config=RoadConfig(fast=False))
    places = pair.main.config.max_open_handshakes
    opened = pair.main._handshakes[TransactionKind.JOIN]
    spoofer = Spoofer(32)

    def flood() -> None:
        while spoofer.send(pair):
            pass

    flood()
    assert len(opened) == places
    pair.net.run_to(1.0)
    flood()
    pair.minion.join(MAIN, now=pair.net.now)
    took = joined_within(pair, 30.0, flood)
    assert took is not None, (f"shut out 30 s by {spoofer.sent} joins from 32 hosts "
                              f"({pair.main.stats.dropped[Drop.HANDSHAKES_BUSY]} shed)")
    assert took < Joiner.redo_min + ANSWERED_WITHIN  # its first redo at the latest
    assert pair.main.stats.dropped[Drop.JOIN_RATE_LIMITED] == 0  # within the per-source rate
    assert pair.main.stats.handshakes_evicted > 1  # the spoofer took places over too


def test_spoofed_joins_streaming_below_places_over_grace_keep_no_real_joiner_waiting() -> None:
    """A steady stream of 400 joins a second from 200 hosts (2 a second each) after the 256
    places are full: evicting keeps every place younger than ``handshake_grace`` only past
    256 / 0.5 s = 512 a second, so older ones are there to take; before, all were full."""
    pair = make_pair(main_config=RoadConfig(fast=False))
    config = pair.main.config
    opened = pair.main._handshakes[TransactionKind.JOIN]
    spoofer = Spoofer(200)
    while len(opened) < config.max_open_handshakes:
        assert spoofer.send(pair)
    stream = JoinStream(pair, 400.0, start=1.0)
    assert stream.rate * config.handshake_grace < config.max_open_handshakes
    assert len(stream.hosts) * RATE == stream.rate
    stream.run_until(3.0)
    young = [t for t, since in opened.items() if pair.net.now - since < config.handshake_grace]
    assert len(opened) == config.max_open_handshakes
    assert len(young) <= stream.rate * config.handshake_grace + 1  # never one younger
    pair.minion.join(MAIN, now=pair.net.now)
    took = joined_within(pair, 30.0, stream.send_due)
    assert took is not None, "shut out 30 s"
    assert took < ANSWERED_WITHIN
    assert pair.main.stats.dropped[Drop.JOIN_RATE_LIMITED] == 0


def test_an_evicted_join_leaves_only_its_stranger_which_is_reaped_with_its_role() -> None:
    """The joinent, its place and its address go at once; the stranger it added stays as
    after a timeout (so a joiner whose ack came late is told it is not joined), bounded by
    ``max_pending_joins``, and is reaped ``unallowed_reap_after`` later with the role its
    join recorded under auto once: nothing is left."""
    config = RoadConfig(fast=False, max_open_handshakes=1, auto=AutoMode.ONCE)
    keep = MemoryKeep(AutoMode.ONCE)
    pair = make_pair(main_config=config, main_keep=keep)
    main = pair.main
    request, _ = forged_join("spoof")
    spoofed = ("10.9.0.1", 40000)
    pair.net.inject(request, spoofed, MAIN)
    pair.net.run_for(0.01)
    (joinent,) = main._handshakes[TransactionKind.JOIN]
    stranger = joinent.remote
    assert keep.role_status("spoof") is not None  # auto once: its join recorded the role
    pair.net.run_to(main.config.handshake_grace + 0.01)
    pair.minion.join(MAIN, now=pair.net.now)
    assert joined_within(pair, ANSWERED_WITHIN) is not None
    assert main.stats.handshakes_evicted == 1
    assert joinent.ended
    assert joinent not in main._transactions
    assert joinent not in main._handshakes[TransactionKind.JOIN]
    assert not stranger.transactions
    assert spoofed not in main.joinees
    assert main.strangers.reap_time(stranger.uid) is not None
    pair.net.run_for(main.config.unallowed_reap_after)
    assert stranger.uid not in main.remotes
    assert "spoof" not in main.names
    assert stranger.uid not in main.strangers.unjoined
    assert main.strangers.reap_time(stranger.uid) is None
    assert keep.role_status("spoof") is None
    assert "spoof" not in keep.remotes
    assert main.stats.strangers_reaped == 1


def test_a_joiner_whose_ack_was_lost_and_join_evicted_is_told_and_joins_again() -> None:
    """The minion's ack is lost: it believes it joined while the main's join stays open,
    unproven, and is evicted for a spoofed one.  Its allow then finds the stranger the join
    left (not joined), is told so, and it joins again at once; before, it waited out the
    main's 5 s join timeout."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=1))
    lost = _lose_the_first_join_ack(pair)
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_to(pair.main.config.handshake_grace + 0.01)
    assert lost
    request, _ = forged_join("spoof")
    pair.net.inject(request, ("10.9.0.1", 40000), MAIN)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=60.0)
    assert pair.main.stats.handshakes_evicted == 1
    assert pair.sent(TransactionKind.ALLOW, PacketKind.UNJOINED, source=MAIN)
    assert pair.net.now < 2.0
    assert len(pair.events(MINION, events.Joined)) == 2


DEAF: Address = ("127.0.0.1", 7533)


def test_an_allow_takes_the_place_of_an_unproven_one_never_of_a_proven_one() -> None:
    """Two allow places: a real estate's allow that proved itself (its initiate echoed our
    cookie; its final ack is lost, so it stays open) and a deaf estate's (it signs hellos
    but never receives a cookie, as one joined blind and allowing from a spoofed address).
    A bad-signature hello evicts nothing; the minion's allow takes the deaf one's place at
    its first hello, and the proven one stays.  Before, the minion was shed 4 s."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=2))
    net, main = pair.net, pair.main
    other = RoadStack(LocalEstate("other"), RoadConfig(fast=False))
    deaf = RoadStack(LocalEstate("deaf"), RoadConfig(fast=False))
    net.add(OTHER, other)
    net.add(DEAF, deaf)
    pair.allow()
    for stack in (other, deaf):
        stack.join(MAIN, now=net.now)
    pair.run_until(lambda: all(net.of_type(a, events.Allowed) for a in (OTHER, DEAF))
                   and len(pair.events(MAIN, events.Allowed)) == 3)
    places = main._handshakes[TransactionKind.ALLOW]
    assert not places

    def lose(sent: Sent) -> bool:
        final_ack = (sent.source == OTHER and sent.head.transaction_kind == TransactionKind.ALLOW
                     and sent.head.packet_kind == PacketKind.ACK)
        return sent.destination == DEAF or final_ack

    net.drop = lose
    other.allow("main", now=net.now)
    net.run_for(0.01)
    (proven,) = places
    assert proven.proven  # acked its initiate; our final ack from it was lost
    deaf.allow("main", now=net.now)
    net.run_for(0.01)
    unproven = next(t for t in places if t is not proven)
    assert not unproven.proven
    net.run_for(main.config.handshake_grace)
    hello = next(s for s in pair.wire if s.source == DEAF
                 and s.head.packet_kind == PacketKind.HELLO)
    packet = parse_packet(hello.data)
    forged = pack_packet(dataclasses.replace(packet.head, transaction_id=9999), packet.coat,
                         SigningKey.generate())
    net.inject(forged, DEAF, MAIN)  # signed, but not by the deaf estate's key
    net.run_for(0.001)
    assert main.stats.handshakes_evicted == 0
    assert len(places) == 2
    allowed = len(pair.events(MINION, events.Allowed))
    pair.minion.allow("main", now=net.now)
    assert net.run_until(lambda: len(pair.events(MINION, events.Allowed)) > allowed,
                         timeout=ANSWERED_WITHIN)
    assert main.stats.handshakes_evicted == 1
    assert unproven.ended
    assert unproven not in main._transactions
    assert not main.remote("deaf").in_process(TransactionKind.ALLOW)  # (its session stands
    # until an initiate verifies: a presence check of it may be open)
    assert not proven.ended
    assert proven in places
    assert pair.events(MAIN, events.AllowFailed)[-1].remote == "deaf"
    refused = pair.sent(TransactionKind.ALLOW, PacketKind.REFUSE, source=MAIN)
    assert [s.destination for s in refused] == [DEAF]  # told, as at a timeout
    assert main.remote("deaf").joined  # a joined estate stays joined: only its allow ended


SLOW = 0.4
"""One-way delay of the slow path below: a round trip of 0.8 s, past ``handshake_grace``."""


def slow_pair_under_stream(rate: float, **config: object) -> tuple[Pair, JoinStream]:
    """A main on a slow link to the minion (spoofed joins come at once), 3 s into a stream
    of ``rate`` spoofed joins a second that evicts every join before its ack is back."""
    keep = MemoryKeep(AutoMode.ONCE)
    pair = make_pair(main_config=RoadConfig(fast=False, **config),  # type: ignore[arg-type]
                     main_keep=keep, impairment=Impairment(delay=SLOW))
    stream = JoinStream(pair, rate, start=0.0)
    stream.run_until(3.0)
    assert pair.main.config.handshake_grace < 2 * SLOW
    return pair, stream


def minion_allowed(pair: Pair) -> bool:
    return any(e.remote == "minion" for e in pair.events(MAIN, events.Allowed))


def test_a_joiner_slower_than_the_grace_joins_and_allows_under_a_spoofed_stream() -> None:
    """RTT 0.8 s, 400 spoofed joins a second: the minion's join is evicted before its ack
    comes, and the late ack completes it all the same (``late_join_acks``), so it joins and
    allows within 4 s (5 round trips).  Before, the late ack was dropped JOIN_STALE, the
    minion was told UNJOINED at its allow, joined again, was evicted again: kept out."""
    pair, stream = slow_pair_under_stream(400.0)
    evicted = pair.main.stats.handshakes_evicted
    pair.minion.join(MAIN, now=pair.net.now)
    began = pair.net.now
    assert stream.run_until(began + 4.0, lambda: minion_allowed(pair)), (
        f"not allowed in 4 s: {len(pair.events(MINION, events.Joined))} joins")
    assert len(pair.events(MINION, events.Joined)) == 1  # never told UNJOINED
    assert pair.main.stats.late_join_acks == 1
    assert pair.main.stats.handshakes_evicted > evicted


def test_a_spoofed_flood_cannot_make_the_main_forget_a_slow_joiners_role() -> None:
    """Auto once, RTT 0.8 s, 400 spoofed joins a second pushing strangers out past
    ``max_pending_joins``, and an attacker's forged join claiming the minion's role with its
    own keys every 0.5 s from 1 s after the minion's join on: the role keeps the minion's
    keys and the minion is allowed.  Before, the minion's stranger was pushed out with its
    role and the attacker's keys took the role (the minion was then rejected)."""
    pair, stream = slow_pair_under_stream(400.0, max_pending_joins=1000)
    keep = pair.main.keep
    assert isinstance(keep, MemoryKeep)
    pair.minion.join(MAIN, now=pair.net.now)
    stream.run_until(pair.net.now + 1.0)  # the minion's join recorded its role
    verify_key = pair.minion.local.signing_key.verify_key
    assert keep.roles["minion"].verify_key == verify_key
    end = pair.net.now + 20.0
    attempts = 0
    while pair.net.now < end:
        attacker = RoadStack(LocalEstate(f"evil{attempts}", role="minion"),
                             RoadConfig(keepalive=False))
        attacker.join(MAIN, now=0.0)
        [(request, _)] = attacker.datagrams_to_send(0.0)
        pair.net.inject(request, ("10.77.0.1", 41000 + attempts), MAIN)
        attempts += 1
        stream.run_until(pair.net.now + 0.5)
        record = keep.roles.get("minion")
        assert record is None or record.verify_key == verify_key, (
            f"the attacker's keys took the role at {pair.net.now:.2f}")
    assert minion_allowed(pair)
    assert not pair.events(MINION, events.JoinRejected)
    assert pair.main.stats.joins_evicted > 1000


def test_a_joiner_whose_ack_was_lost_keeps_its_role_when_a_flood_pushes_it_out() -> None:
    """Auto once: the minion's ack is lost, so its stranger stays unjoined and 20 spoofed
    joins push it out past ``max_pending_joins`` (4).  Its role stays held with its keys:
    an attacker's join claiming it with other keys is rejected.  Before, the eviction
    forgot the role and the attacker's keys took it."""
    keep = MemoryKeep(AutoMode.ONCE)
    pair = make_pair(main_config=RoadConfig(fast=False, max_pending_joins=4), main_keep=keep)
    lost = _lose_the_first_join_ack(pair)
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.01)
    assert lost
    for n in range(20):
        request, _ = forged_join(f"spoof{n}")
        pair.net.inject(request, (f"10.9.0.{n + 1}", 40000), MAIN)
        pair.net.run_for(0.001)
    assert "minion" not in pair.main.names  # pushed out
    attacker = RoadStack(LocalEstate("evil", role="minion"), RoadConfig(keepalive=False))
    attacker.join(MAIN, now=0.0)
    [(request, _)] = attacker.datagrams_to_send(0.0)
    pair.net.inject(request, ("10.77.0.1", 41000), MAIN)
    pair.net.run_for(0.01)
    assert keep.roles["minion"].verify_key == pair.minion.local.signing_key.verify_key
    assert pair.sent(TransactionKind.JOIN, PacketKind.REJECT, source=MAIN)


def test_a_late_ack_completes_an_evicted_join_only_from_its_address_and_in_time() -> None:
    """One join place, grace 0.5 s, blind acks (as a spoofer sends them: forged_join), and
    ``max_pending_joins`` 3.  An evicted join's ack completes it, as it would an open one,
    only from the join's address, before the join would have timed out (5 s), while its
    stranger is there and while it is among the last ``max_pending_joins`` evicted;
    otherwise it is dropped (JOIN_STALE) and completes nothing."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=1,
                                            max_pending_joins=3))
    main, net = pair.main, pair.net
    acks: dict[str, tuple[bytes, Address]] = {}
    names = ("early", "gone", "third", "fourth", "fifth")
    for n, name in enumerate(names):
        request, ack = forged_join(name)
        acks[name] = (ack, (f"10.9.0.{n + 1}", 40000))
        net.inject(request, acks[name][1], MAIN)
        net.run_for(main.config.handshake_grace + 0.01)
    assert main.stats.handshakes_evicted == 4  # all but fifth
    assert len(main._evicted_joins) == 3  # early forgotten
    assert "gone" not in main.names  # its stranger pushed out (max_pending_joins)
    stale = main.stats.dropped[Drop.JOIN_STALE]
    net.inject(*acks["early"], MAIN)
    net.inject(*acks["gone"], MAIN)
    net.inject(acks["third"][0], ("10.9.9.9", 40000), MAIN)  # not its address
    net.run_for(0.01)
    assert main.stats.dropped[Drop.JOIN_STALE] == stale + 3
    assert main.stats.late_join_acks == 0
    net.inject(*acks["third"], MAIN)
    net.run_for(0.01)
    assert main.stats.late_join_acks == 1
    assert main.remote("third").joined
    net.run_to(7.0)  # past fourth's timeout (5 s after its request at 1.53)
    net.inject(*acks["fourth"], MAIN)
    net.run_for(0.01)
    assert main.stats.late_join_acks == 1
    assert not main.remote("fourth").joined


def test_a_late_ack_completes_an_evicted_rejoin_of_a_known_estate() -> None:
    """The minion, joined and allowed over a 0.8 s round trip, joins again (not vacuous: it
    names the main's uid for it); a spoofed join evicts that join 0.5 s after it opened,
    before the ack is back; the ack completes it all the same.  (The main's keepalive is
    off: its own join to the minion, open meanwhile, would leave the ack to that one.)"""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=1,
                                            keepalive=False),
                     impairment=Impairment(delay=SLOW))
    pair.allow()
    completed = pair.main.stats.joins_completed
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.net.run_until(lambda: bool(pair.main._handshakes[TransactionKind.JOIN]),
                              timeout=1.0)
    (joinent,) = pair.main._handshakes[TransactionKind.JOIN]
    assert isinstance(joinent, Joinent)
    assert not joinent.vacuous
    pair.net.run_for(pair.main.config.handshake_grace + 0.01)
    request, _ = forged_join("spoof")
    pair.net.inject(request, ("10.9.0.1", 40000), MAIN)
    pair.net.run_for(0.01)
    assert joinent.ended
    assert pair.main.stats.handshakes_evicted == 1
    assert pair.net.run_until(lambda: pair.main.stats.joins_completed > completed,
                              timeout=1.0)
    assert pair.main.stats.late_join_acks == 1
