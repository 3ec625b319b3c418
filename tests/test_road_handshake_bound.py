"""A main answers at most ``max_open_handshakes`` joins (and as many allows) at once; the
first packet of one more is dropped before any signature is checked, and its joiner's redo
gets in once a place is free (docs/road.md, "A main under a join storm")."""

from __future__ import annotations

import dataclasses

import pytest

from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet, parse_packet
from road import events
from road.stack import RoadConfig
from road.stats import Drop
from tests.roadkit import MAIN, MINION, make_pair
from tests.simlink import Impairment
from tests.test_road_amplification import forged_join
from tests.test_road_join_spam import fake_address


def test_a_join_past_the_bound_is_shed_unverified_and_gets_in_when_a_place_frees() -> None:
    """Shed while every place is younger than ``handshake_grace``; the joiner's redo (1 s
    later) takes the place of the oldest unproven join."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=3))
    for index in range(3):  # three joins that never finish (no ack): every place taken
        request, _ = forged_join(f"fake{index}")
        pair.net.inject(request, fake_address(index), MAIN)
    pair.net.run_for(0.01)
    assert pair.main.stats.dropped[Drop.HANDSHAKES_BUSY] == 0
    assert len(pair.main._handshakes[TransactionKind.JOIN]) == 3
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.4)
    assert pair.main.stats.dropped[Drop.HANDSHAKES_BUSY] >= 1
    assert "minion" not in pair.main.names  # shed: nothing of it kept
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=60.0)
    assert "minion" in pair.main.names
    assert pair.main.stats.handshakes_evicted == 1
    pair.net.run_for(pair.main.config.handshake_grace + 5.0)
    assert len(pair.main._handshakes[TransactionKind.JOIN]) == 0


def test_joins_filling_the_bound_never_hold_an_allow_off() -> None:
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=2))
    pair.allow()
    for index in range(5):
        request, _ = forged_join(f"fake{index}")
        pair.net.inject(request, fake_address(index), MAIN)
    pair.net.run_for(0.01)
    assert len(pair.main._handshakes[TransactionKind.JOIN]) == 2
    allowed = len(pair.events(MINION, events.Allowed))
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) > allowed, timeout=5.0)


def test_an_allow_whose_cookie_came_late_waits_as_long_again_for_the_ack() -> None:
    # 1.5 s each way: the cookie comes 3 s after the hello and the ack 6 s after it.  The
    # allow's 4 s timeout used to give up first while the main finished on its side: two
    # sides, two session keys (fast datagrams undecryptable, presence flapping)
    pair = make_pair(impairment=Impairment(delay=1.5))
    pair.minion.join(MAIN, now=pair.net.now)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=30.0)
    assert pair.events(MINION, events.AllowFailed) == []
    assert pair.main.remote("minion").session_id is not None


def pend_of(request: bytes) -> bytes:
    """The joiner's PEND ("my operator decides on your keys"): unsigned, so anyone who made
    the request can send it blind, without reading the main's response."""
    head = dataclasses.replace(parse_packet(request).head, packet_kind=PacketKind.PEND)
    return pack_packet(head, b"")


def test_a_blind_pend_gives_the_join_place_back_and_never_extends_the_join() -> None:
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=3))
    opened = pair.main._handshakes[TransactionKind.JOIN]
    request, _ = forged_join("fake0")
    pair.net.inject(request, fake_address(0), MAIN)
    pair.net.run_for(0.01)
    assert len(opened) == 1
    pair.net.inject(pend_of(request), fake_address(0), MAIN)
    pair.net.run_for(0.01)
    assert len(opened) == 0  # an unsigned PEND holds no place
    (joinent,) = [t for t in pair.main._transactions if t.address == fake_address(0)]
    limit = pair.net.now + pair.main.config.join_pending_timeout
    while pair.net.now < limit - 1.0:  # a PEND a second re-arms nothing
        pair.net.inject(pend_of(request), fake_address(0), MAIN)
        pair.net.run_for(1.0)
    pair.net.run_for(2.0)
    assert joinent.ended
    assert joinent not in pair.main._transactions


@pytest.mark.parametrize(("places", "addresses"), [(32, 1), (256, 3)])
def test_a_join_gets_in_while_addresses_send_joins_and_blind_pends_at_their_rate(
        places: int, addresses: int) -> None:
    """Joins, each with its PEND at once, at the per-source join rate (2 a second) from each
    address: before, each PEND held its join place 60 s (re-armed by the next), so 32 places
    (one address) or the default 256 (three) stayed full and every real join was shed."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=places))
    opened = pair.main._handshakes[TransactionKind.JOIN]
    sent = [0]

    def attack() -> None:
        n = sent[0]
        request, _ = forged_join(f"fake{n}")
        source = (f"10.0.0.{n % addresses + 1}", 40000 + n)
        pair.net.inject(request, source, MAIN)
        pair.net.inject(pend_of(request), source, MAIN)
        sent[0] += 1

    most = 0
    for _ in range(120 * addresses):  # 2 joins a second each, till full (before) or 60 s
        attack()
        pair.net.run_to(pair.net.now + 0.5 / addresses)
        most = max(most, len(opened))
        if most == places:
            break
    pair.minion.join(MAIN, now=pair.net.now)
    start = pair.net.now
    while pair.net.now < start + 120 and not pair.events(MINION, events.Joined):
        pair.net.step()
        if len(opened) < places:  # a place is free: take it at once (the main's join-rate
            attack()              # limit drops what exceeds 2 a second)
            pair.net.step()
        most = max(most, len(opened))
    assert pair.events(MINION, events.Joined), (
        f"shut out for 120 s by {2 * sent[0]} datagrams from {addresses} address(es) "
        f"({pair.main.stats.dropped[Drop.HANDSHAKES_BUSY]} shed)")
    assert most < places
