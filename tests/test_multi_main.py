"""An estate joined to several mains, hot and failover, on the simulated road.

Two mains (alpha, beta), a minion joined to both through a MultiMain, and a
collector ("sink") joined hot to both and subscribed to ``seq.``: the
application of docs/multi-main.md.  Virtual clock, no sleeps.
"""

from __future__ import annotations

from collections import Counter

import pytest

from raetlike.bus import BusNode, Errno, Reply
from raetlike.bus._api import Call
from raetlike.hosting import EstateBus
from raetlike.metrics import Watch
from raetlike.multimain import MainActive, MultiConfig, MultiMain, MultiMode
from road import events
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.multikit import PRESENCE_PERIOD, Site, failover_run, make_site, percentile
from tests.simlink import Impairment


def _ready(site: Site, mains: tuple[str, ...] = ("alpha", "beta")) -> None:
    site.run_until(lambda: all(site.linked_up(main) for main in mains)
                   and site.collector_ready())


def _call(site: Site, origin: str, target: str, topic: str, payload: object) -> Reply:
    got: list[Reply] = []
    site[origin].node.send(target, Call(topic, payload), got.append, now=site.net.now)
    site.run_until(lambda: bool(got))
    assert len(got) == 1
    return got[0]


def _stream(site: Site, count: int, every: float = 0.05, start: int = 1) -> None:
    for n in range(start, start + count):
        site.minion.node.publish("seq.n", {"n": n}, now=site.net.now)
        site.net.run_for(every)


def _exactly_once(got: Counter[int], count: int) -> None:
    missing = [n for n in range(1, count + 1) if got[n] == 0]
    twice = {n: k for n, k in got.items() if k > 1}
    assert not missing, f"lost: {missing}"
    assert not twice, f"delivered more than once: {twice}"
    assert set(got) == set(range(1, count + 1))


# == hot ====================================================================


def test_hot_every_main_is_upstream_and_requests_from_either_reach_the_minion() -> None:
    site = make_site(MultiMode.HOT)
    _ready(site)
    assert sorted(site.minion.node.upstreams) == ["alpha", "beta"]
    for main in ("alpha", "beta"):
        reply = _call(site, main, "minion", "echo.hi", main)
        assert reply.errno is Errno.OK
        assert reply.payload == {"from": "minion", "payload": main}


def test_hot_events_reach_the_bus_on_every_main_and_the_collector_once() -> None:
    site = make_site(MultiMode.HOT)
    on_main: dict[str, list[int]] = {"alpha": [], "beta": []}
    for main, seen in on_main.items():
        site[main].node.subscribe("seq.", lambda event, seen=seen: seen.append(
            event.payload["n"]), now=site.net.now)
    _ready(site)
    _stream(site, 40)
    site.run_until(lambda: len(site.got) == 40)
    site.net.run_for(5.0)
    assert on_main == {"alpha": list(range(1, 41)), "beta": list(range(1, 41))}
    _exactly_once(site.got, 40)
    assert site["sink"].node.stats.duplicates >= 40  # every event came twice, taken once


def test_hot_a_request_up_goes_to_one_live_main_and_moves_on_when_it_is_gone() -> None:
    site = make_site(MultiMode.HOT)
    _ready(site)
    assert _call(site, "minion", "*any*", "main.up", 1).payload["from"] == "alpha"
    site.down("alpha")
    site.run_until(lambda: site.minion.node.upstream == "beta", timeout=30)
    reply = _call(site, "minion", "*any*", "main.up", 2)
    assert reply.errno is Errno.OK
    assert reply.payload["from"] == "beta"


# == failover ===============================================================


def test_failover_one_active_main_carries_the_events() -> None:
    site = make_site(MultiMode.FAILOVER)
    _ready(site)
    assert site.active() == "alpha"
    assert site.minion.node.upstreams == ["alpha"]
    counts = {"alpha": 0, "beta": 0}
    for main in ("alpha", "beta"):
        site[main].node.subscribe("seq.", lambda _e, main=main: counts.__setitem__(
            main, counts[main] + 1), now=site.net.now)
    _stream(site, 20)
    site.run_until(lambda: len(site.got) == 20)
    assert counts == {"alpha": 20, "beta": 0}
    for main in ("alpha", "beta"):  # the standby is joined and allowed: it reaches us too
        assert _call(site, main, "minion", "echo.hi", 0).errno is Errno.OK


@pytest.mark.parametrize("mode", [MultiMode.HOT, MultiMode.FAILOVER])
def test_the_minion_serves_with_a_main_down_at_start_and_picks_it_up_later(
        mode: MultiMode) -> None:
    site = make_site(mode, down=("beta",))
    _ready(site, ("alpha",))
    assert _call(site, "alpha", "minion", "echo.hi", 1).errno is Errno.OK
    assert site.minion.node.upstreams == ["alpha"]
    site.net.run_for(20.0)  # beta still down: joins to it keep being tried
    site.up("beta")
    _ready(site)
    assert _call(site, "beta", "minion", "echo.hi", 2).errno is Errno.OK
    expected = ["alpha", "beta"] if mode is MultiMode.HOT else ["alpha"]
    assert site.minion.node.upstreams == expected


def test_failover_with_every_main_down_at_start_takes_the_first_to_appear() -> None:
    site = make_site(MultiMode.FAILOVER, down=("alpha", "beta"), collector=False)
    site.net.run_for(15.0)
    assert site.active() is None
    site.up("beta")
    site.run_until(lambda: site.active() == "beta")
    site.up("alpha")
    site.run_until(lambda: site.linked_up("alpha"))
    site.net.run_for(20.0)
    assert site.active() == "beta"  # sticky: no failback unless asked for


def test_failover_moves_to_the_next_main_when_the_active_one_is_cut_mid_stream() -> None:
    run = failover_run(seed=1)
    _exactly_once(run.delivered, run.sent)
    assert 0 <= run.switch <= 2 * PRESENCE_PERIOD


@pytest.mark.parametrize("fast", [True, False], ids=["fast-mode", "raet-mode"])
def test_messages_that_went_both_ways_are_delivered_once(fast: bool) -> None:
    """Cut only the minion's link to alpha (alpha still reaches the collector); restore
    it later: what alpha had and the minion moved arrives twice, delivered once."""
    site = make_site(MultiMode.FAILOVER, seed=3, config=RoadConfig(fast=fast))
    _ready(site)
    _stream(site, 30, every=0.01)  # many in flight when the cut comes
    site.cut("minion", "alpha")
    _stream(site, 30, start=31)
    site.run_until(lambda: site.active() == "beta")
    site.run_until(lambda: len(site.got) == 60, timeout=60)
    site.cut("minion", "alpha", cut=False)
    site.net.run_for(30.0)
    _exactly_once(site.got, 60)
    mains = site.minion.mains
    assert mains is not None
    assert mains.stats.failovers == 1
    # some moved messages had been sent to alpha already: both mains had them, and the
    # collector's dedup took the second copy
    assert mains.stats.moved > mains.stats.withdrawn
    assert site["sink"].node.stats.duplicates > 0


def test_failback_to_the_first_main_once_it_has_been_up_long_enough() -> None:
    site = make_site(MultiMode.FAILOVER, failback_after=10.0)
    _ready(site)
    site.down("alpha")
    site.run_until(lambda: site.active() == "beta", timeout=30)
    site.up("alpha")
    site.run_until(lambda: site.minion.stack.names["alpha"].alive is True
                   and site.minion.stack.names["alpha"].allowed, timeout=60)
    up_at = site.net.now
    site.run_until(lambda: site.active() == "alpha", timeout=60)
    assert site.net.now >= up_at + 10.0 - 2 * PRESENCE_PERIOD  # (up a little before we saw it)
    assert site.minion.node.upstreams == ["alpha"]
    actives = site.stack_events("minion", MainActive)
    assert [e.reason for e in actives] == ["first up", "lost", "failback"]


def test_failover_timing_over_20_seeded_runs_is_within_two_presence_periods(
        capsys: pytest.CaptureFixture[str]) -> None:
    runs = [failover_run(seed, impairment=Impairment(loss=0.01, jitter=0.003))
            for seed in range(20)]
    for run in runs:
        _exactly_once(run.delivered, run.sent)
        assert 0 <= run.switch <= 2 * PRESENCE_PERIOD, (run.seed, run.switch)
        # detection: a presence period, then the unanswered check's 2 s (docs/multi-main.md)
        assert run.total <= PRESENCE_PERIOD + 2.0 + 0.01, (run.seed, run.total)
    switch = [run.switch for run in runs]
    total = [run.total for run in runs]
    lost = sum(1 for run in runs for n in range(1, run.sent + 1) if run.delivered[n] == 0)
    twice = sum(k - 1 for run in runs for k in run.delivered.values() if k > 1)
    with capsys.disabled():
        print(  # noqa: T201 - the figures, in -s output
            f"\nfailover over {len(runs)} seeded runs (presence period "
            f"{PRESENCE_PERIOD:g} s, 1% loss): lost->active p50 {percentile(switch, 0.5):.3f} s "
            f"max {max(switch):.3f} s; cut->active p50 {percentile(total, 0.5):.3f} s "
            f"max {max(total):.3f} s; {sum(run.sent for run in runs)} messages sent, "
            f"{lost} lost, {twice} delivered twice")


# == the policy on its own ==================================================


def test_a_multi_main_needs_distinct_mains() -> None:
    stack = RoadStack(LocalEstate("m"))
    with pytest.raises(Exception, match="at least one main"):
        MultiMain(stack, [])
    with pytest.raises(Exception, match="twice"):
        MultiMain(stack, [("127.0.0.1", 1), ("127.0.0.1", 1)])
    with pytest.raises(Exception, match="failback_after"):
        MultiConfig(failback_after=-1.0)


def test_a_moved_message_expired_at_the_old_main_is_not_reported_twice() -> None:
    site = make_site(MultiMode.FAILOVER, collector=False)
    _ready(site, ("alpha", "beta"))
    site.down("alpha")
    _stream(site, 5, every=0.01)
    site.run_until(lambda: site.active() == "beta", timeout=30)
    site.net.run_for(60.0)  # the old copies' time to live (30 s) runs out at alpha's queue
    expired = site.stack_events("minion", events.MessageExpired)
    assert expired == []


def test_plain_messages_move_keep_their_ids_and_each_is_reported_once() -> None:
    site = make_site(MultiMode.FAILOVER, collector=False)
    _ready(site)
    mains = site.minion.mains
    assert mains is not None
    site.cut("minion", "alpha")
    ids = [mains.transmit({"plain": n}, to="alpha", now=site.net.now) for n in range(10)]
    site.run_until(lambda: site.active() == "beta", timeout=30)
    site.run_until(lambda: len([e for e in site.stack_events("beta", events.MessageReceived)
                                if "plain" in e.body]) == 10)
    site.net.run_for(10.0)
    at_beta = [e.body["plain"] for e in site.stack_events("beta", events.MessageReceived)
               if "plain" in e.body]
    assert at_beta == list(range(10))
    sent = [e.message_id for e in site.stack_events("minion", events.MessageSent)
            if e.message_id in ids]
    assert sorted(sent) == ids  # under the ids transmit returned, once each
    assert site.stack_events("minion", events.MessageExpired) == []
    assert mains.stats.moved == 10


def test_what_failover_remembers_is_bounded_by_max_tracked() -> None:
    stack = RoadStack(LocalEstate("m"))
    mains = MultiMain(stack, [("127.0.0.1", 1), ("127.0.0.1", 2)],
                      MultiConfig(max_tracked=3))
    mains.start(0.0)
    mains.active = stack.register.at(("127.0.0.1", 1)).name  # type: ignore[union-attr]
    for n in range(5):
        mains.transmit({"n": n}, to=mains.active, now=0.0)
    assert mains.stats.untracked == 2


def test_withdraw_takes_back_only_queued_messages_and_no_fate_follows() -> None:
    stack = RoadStack(LocalEstate("m"))
    name = stack.join(("127.0.0.1", 1), now=0.0)  # never answers: everything stays queued
    ids = [stack.transmit({"n": n}, to=name, now=0.0) for n in range(4)]
    stack.remote(name).outbox[0].begun = (1, 1, b"")  # as if partly sent before
    assert stack.withdraw(name, ids[:3]) == ids[1:3]
    assert [o.message_id for o in stack.remote(name).outbox] == [ids[0], ids[3]]
    assert stack.withdraw("nobody", ids) == []
    stack.close(now=1.0)
    expired = []
    while (event := stack.next_event()) is not None:
        if isinstance(event, events.MessageExpired):
            expired.append(event.message_id)
    assert expired == [ids[0], ids[3]]


def test_hot_mode_moves_nothing_it_sends_to_every_main() -> None:
    site = make_site(MultiMode.HOT)
    _ready(site)
    site.cut("minion", "alpha")
    _stream(site, 20)
    site.run_until(lambda: len(site.got) == 20)
    mains = site.minion.mains
    assert mains is not None
    assert mains.stats.moved == 0
    _exactly_once(site.got, 20)


def test_with_every_main_gone_events_wait_and_move_to_the_first_main_back() -> None:
    site = make_site(MultiMode.FAILOVER, seed=5)
    _ready(site)
    site.cut("minion", "alpha")
    site.cut("minion", "beta")
    _stream(site, 20)
    site.run_until(lambda: bool(site.stack_events("minion", events.RemoteLost)), timeout=30)
    site.net.run_for(5.0)
    assert site.active() == "alpha"  # nowhere to go: it stays, its messages queue there
    assert len(site.got) == 0
    site.cut("minion", "beta", cut=False)
    site.run_until(lambda: site.active() == "beta", timeout=30)
    site.run_until(lambda: len(site.got) == 20, timeout=60)
    site.cut("minion", "alpha", cut=False)
    site.net.run_for(30.0)
    _exactly_once(site.got, 20)
    mains = site.minion.mains
    assert mains is not None
    assert mains.stats.moved == 20


def test_estate_bus_takes_only_the_given_mains_as_upstream_or_standby() -> None:
    stack = RoadStack(LocalEstate("leaf"))
    for name, port in (("alpha", 1), ("beta", 2), ("old", 3)):
        stack.add_remote(("127.0.0.1", port), name=name).main = True
    mains = MultiMain(stack, [("127.0.0.1", 1), ("127.0.0.1", 2)])
    mains.active = "alpha"
    bus = EstateBus(BusNode("leaf"), mains)
    for name in ("old", "beta", "alpha"):
        bus.handle_road_event(events.Allowed(name, session_id=1), 0.0)
    assert bus.node.upstreams == ["alpha"]  # not "old", a main only the keep remembers
    bus.handle_road_event(MainActive("beta", "alpha", "lost", 0), 1.0)
    assert bus.node.upstreams == ["beta"]


def test_a_watch_shows_the_failovers_and_the_main_in_use() -> None:
    site = make_site(MultiMode.FAILOVER, collector=False)
    _ready(site)
    site.down("alpha")
    site.run_until(lambda: site.active() == "beta", timeout=30)
    mains = site.minion.mains
    watch = Watch(road=site.minion.stack, mains=mains)
    line = watch.snapshot()["mains"]
    assert (line["failovers"], line["active"], line["upstreams"]) == (1, "beta", ["beta"])
    families = {family.name: family for family in watch.collect()}
    assert families["raetlike_mains_failovers"].samples[0].value == 1
    (upstream,) = families["raetlike_mains_upstream"].samples
    assert upstream.labels == {"estate": "minion", "remote": "beta"}
