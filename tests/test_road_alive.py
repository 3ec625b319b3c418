"""Alive: presence checks, dead remotes, coming back, reaping by main."""

from __future__ import annotations

import itertools

import pytest

from raetlike.wire.kinds import PacketKind, TransactionKind
from road import events
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, allowed_pair

ALIVE = TransactionKind.ALIVE
RTT = 0.001  # two link delays of 0.5 ms


def test_main_checks_presence_every_period_and_answers_keep_the_minion_quiet() -> None:
    pair = allowed_pair()
    start = pair.net.now
    pair.net.run_for(5.0)
    asks = [s.at for s in pair.sent(ALIVE, PacketKind.REQUEST, source=MAIN) if s.at > start]
    assert len(asks) >= 4
    gaps = [b - a for a, b in itertools.pairwise(asks)]
    assert gaps == pytest.approx([1.0 + RTT] * len(gaps), abs=1e-9)
    assert not pair.sent(ALIVE, PacketKind.REQUEST, source=MINION)
    # a minion hears from main, so its own check (period + offset) keeps moving away
    assert pair.minion.remote("main").presence_due > pair.net.now


def test_a_configured_period_sets_the_presence_deadline() -> None:
    pair = allowed_pair(main_config=RoadConfig(period=3.0, fast=False),
                        minion_config=RoadConfig(period=3.0, fast=False))
    start = pair.net.now
    pair.net.run_for(7.0)
    asks = [s.at for s in pair.sent(ALIVE, PacketKind.REQUEST, source=MAIN) if s.at > start]
    gaps = [b - a for a, b in itertools.pairwise(asks)]
    assert gaps
    assert gaps == pytest.approx([3.0 + RTT] * len(gaps), abs=1e-9)


def test_an_unanswered_presence_check_marks_the_remote_dead_after_two_seconds() -> None:
    pair = allowed_pair()
    pair.net.blocked.add(MINION)
    pair.run_until(lambda: bool(pair.events(MAIN, events.RemoteLost)), timeout=5.0)
    asks = pair.sent(ALIVE, PacketKind.REQUEST, source=MAIN)
    first_unanswered = next(s.at for s in asks if s.at >= asks[-1].at - 2.0 - 1e-9)
    assert pair.net.now == pytest.approx(first_unanswered + 2.0)
    [lost] = pair.events(MAIN, events.RemoteLost)
    assert lost.remote == "minion"
    assert lost.reason == "no answer to alive"
    assert pair.main.remote("minion").alive is False
    resends = [s.at - first_unanswered for s in asks if s.at >= first_unanswered]
    assert resends == pytest.approx([0.0, 0.25, 0.75, 1.75])


def test_a_remote_given_its_own_alive_timeout_is_lost_that_much_after_the_check() -> None:
    pair = allowed_pair()
    pair.main.remote("minion").alive_timeout = 0.6
    pair.net.blocked.add(MINION)
    pair.run_until(lambda: bool(pair.events(MAIN, events.RemoteLost)), timeout=5.0)
    asks = pair.sent(ALIVE, PacketKind.REQUEST, source=MAIN)
    first_unanswered = next(s.at for s in asks if s.at >= asks[-1].at - 0.6 - 1e-9)
    assert pair.net.now == pytest.approx(first_unanswered + 0.6)
    resends = [s.at - first_unanswered for s in asks if s.at >= first_unanswered]
    assert resends == pytest.approx([0.0, 0.25])  # the redos as before, up to the deadline


def test_a_dead_remote_that_answers_again_is_alive_again() -> None:
    pair = allowed_pair()
    pair.net.blocked.add(MINION)
    pair.run_until(lambda: bool(pair.events(MAIN, events.RemoteLost)), timeout=5.0)
    pair.net.blocked.clear()
    pair.run_until(lambda: len(pair.events(MAIN, events.Alive)) == 2, timeout=3.0)
    kinds = [type(e) for e in pair.net.events[MAIN] if isinstance(
        e, events.Alive | events.RemoteLost)]
    assert kinds == [events.Alive, events.RemoteLost, events.Alive]
    assert pair.main.remote("minion").alive is True


def test_main_reaps_a_remote_unseen_for_the_reap_interval_and_unreaps_it_when_heard() -> None:
    # the minion keeps to "alive?" checks (no allow or join afresh after its unanswered
    # checks: tests/test_road_main_restart.py), so its one asked check is what main hears
    pair = allowed_pair(main_config=RoadConfig(reap_interval=10.0),
                        minion_config=RoadConfig(allow_tries_before_rejoin=0))
    blocked_at = pair.net.now
    pair.net.blocked.add(MINION)
    pair.run_until(lambda: bool(pair.events(MAIN, events.RemoteReaped)), timeout=15.0)
    last_heard = max(s.at for s in pair.sent(source=MINION) if s.at <= blocked_at) + 0.0005
    assert last_heard + 10.0 - 0.002 <= pair.net.now <= last_heard + 10.0
    remote = pair.main.remote("minion")
    assert remote.reaped
    pair.net.run_for(2.5)  # the check already under way runs out
    before = len(pair.sent(source=MAIN))
    pair.net.run_for(5.0)
    assert len(pair.sent(source=MAIN)) == before  # a reaped remote is not pestered
    pair.minion.alive("main", now=pair.net.now)
    pair.net.blocked.clear()
    pair.net.run_for(1.0)
    assert not remote.reaped
    assert pair.main.get_timer() is not None
    kinds = [type(e) for e in pair.net.events[MAIN]]
    assert kinds.index(events.RemoteLost) < kinds.index(events.RemoteReaped)
    assert kinds[-1] is events.Alive


def test_only_main_reaps() -> None:
    pair = allowed_pair(minion_config=RoadConfig(reap_interval=5.0))
    pair.net.blocked.add(MAIN)
    pair.net.run_for(12.0)
    assert pair.events(MINION, events.RemoteLost)
    assert not pair.events(MINION, events.RemoteReaped)


def test_an_alive_answered_with_unallowed_makes_the_asker_allow_again() -> None:
    pair = allowed_pair()
    pair.main.remote("minion").allowed = False
    pair.minion.alive("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) == 2, timeout=5.0)
    assert pair.sent(ALIVE, PacketKind.UNALLOWED, source=MAIN)


def test_an_alive_answered_with_unjoined_makes_the_asker_join_again() -> None:
    pair = allowed_pair()
    pair.main.remote("minion").joined = False
    pair.minion.alive("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) == 2, timeout=5.0)
    assert pair.sent(ALIVE, PacketKind.UNJOINED, source=MAIN)
    assert len(pair.events(MINION, events.Joined)) == 2
