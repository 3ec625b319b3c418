"""A main answers at most ``max_open_handshakes`` joins (and as many allows) at once; the
first packet of one more is dropped before any signature is checked, and its joiner's redo
gets in once a place is free (docs/road.md, "A main under a join storm")."""

from __future__ import annotations

from raetlike.wire.kinds import TransactionKind
from road import events
from road.stack import RoadConfig
from road.stats import Drop
from tests.roadkit import MAIN, MINION, make_pair
from tests.simlink import Impairment
from tests.test_road_amplification import forged_join
from tests.test_road_join_spam import fake_address


def test_a_join_past_the_bound_is_shed_unverified_and_gets_in_when_a_place_frees() -> None:
    pair = make_pair(main_config=RoadConfig(fast=False, max_open_handshakes=3))
    for index in range(3):  # three joins that never finish (no ack): every place taken
        request, _ = forged_join(f"fake{index}")
        pair.net.inject(request, fake_address(index), MAIN)
    pair.net.run_for(0.01)
    assert pair.main.stats.dropped[Drop.HANDSHAKES_BUSY] == 0
    assert len(pair.main._handshakes[TransactionKind.JOIN]) == 3
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.5)
    assert pair.main.stats.dropped[Drop.HANDSHAKES_BUSY] >= 1
    assert "minion" not in pair.main.names  # shed: nothing of it kept
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=60.0)
    assert "minion" in pair.main.names
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
