"""ioflo houses: the example plans run on ioflo's own skedder, in this process.

The plans are the ones in docs/examples, with their fixed ports (or socket
directory) swapped for free ones.  They run on simulated time
(``real=False``): ticks follow one another without sleeping, the sockets are
real, and every plan stops by itself (done, or a bounded ``elapsed`` abort).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lane import events as lane_events
from raetlike.durable import DurableMessageReceived
from raetlike.flo import PlanError, run_plan
from road import events as road_events
from tests.flokit import free_udp_ports, lane_plan, road_plan

PERIOD = 0.05


def shares(outcome: object, house: str, node: str) -> dict[str, object]:
    store = outcome.store(house)  # type: ignore[attr-defined]
    return {
        "status": dict(store.fetch(node + "status").items()),
        "events": list(store.fetch(node + "events").value),
        "stack": store.fetch(node + "stack").value,
    }


def test_master_and_minion_houses_join_allow_and_exchange_messages(tmp_path: Path) -> None:
    master_port, minion_port = free_udp_ports(2)
    outcome = run_plan(road_plan(tmp_path, master_port, minion_port), period=PERIOD, real=False)

    assert outcome.ok, outcome.failures
    assert [h.name for h in outcome.houses] == ["master", "minion"]
    assert outcome.ticks < 40  # done long before any abort (10 s = 200 ticks)
    master = shares(outcome, "master", ".raetlike.road.stack.")
    minion = shares(outcome, "minion", ".raetlike.road.stack.")
    for side in (master, minion):
        assert side["status"]["joined"] == 1
        assert side["status"]["allowed"] == 1
        assert side["status"]["received"] == 1
        assert side["status"]["sent"] == 1
        assert side["stack"] is None  # the closer ran when the framers stopped
    heard_by_master = [e for e in master["events"] if isinstance(e, road_events.MessageReceived)]
    heard_by_minion = [e for e in minion["events"] if isinstance(e, road_events.MessageReceived)]
    assert [(e.remote, e.body) for e in heard_by_master] == [
        ("minion", {"text": "Hello master", "count": 1})]
    assert [(e.remote, e.body) for e in heard_by_minion] == [("master", {"text": "Hello minion"})]
    joined = next(e for e in minion["events"] if isinstance(e, road_events.Joined))
    assert (joined.remote, joined.main, joined.initiator) == ("master", True, True)
    address = outcome.store("master").fetch(".raetlike.road.stack.address")
    assert (address["host"], address["port"]) == ("127.0.0.1", master_port)


def test_a_minion_house_alone_gives_up_and_says_why(tmp_path: Path) -> None:
    nobody, minion_port = free_udp_ports(2)
    outcome = run_plan(road_plan(tmp_path, nobody, minion_port), house="minion",
                       period=PERIOD, real=False)

    assert [h.name for h in outcome.houses] == ["minion"]
    assert outcome.failures == {"minion": "no answer from the master"}
    assert not outcome.ok
    assert 200 <= outcome.ticks <= 210  # the plan's 10 s abort, on simulated time


def test_lane_house_pair_exchanges_messages_and_removes_its_sockets(tmp_path: Path) -> None:
    plan, directory = lane_plan(tmp_path)
    outcome = run_plan(plan, period=PERIOD, real=False)

    assert outcome.ok, outcome.failures
    lord = shares(outcome, "lord", ".raetlike.lane.stack.")
    serf = shares(outcome, "serf", ".raetlike.lane.stack.")
    heard_by_lord = [e for e in lord["events"] if isinstance(e, lane_events.MessageReceived)]
    heard_by_serf = [e for e in serf["events"] if isinstance(e, lane_events.MessageReceived)]
    assert [(e.yard, e.body) for e in heard_by_lord] == [("serf", {"text": "Serf says hello"})]
    assert [(e.yard, e.body) for e in heard_by_serf] == [("lord", {"text": "Lord says hello"})]
    path = outcome.store("lord").fetch(".raetlike.lane.stack.address")["path"]
    assert path == str(directory / "ash.lord.uxd")
    assert list(directory.iterdir()) == []  # both closers removed their socket files


def test_deeds_keep_a_second_stack_under_another_inode(tmp_path: Path) -> None:
    plan = tmp_path / "two.flo"
    directory = tmp_path / "lanes"
    plan.write_text(f"""
house pair
init .left.local with name "left" lane "duo" directory "{directory}"
init .right.local with name "right" lane "duo" directory "{directory}"
framer stacks be active first start
    frame start
        enter
            do raetlike lane stack setup per inode ".left"
            do raetlike lane stack setup per inode ".right"
        recur
            do raetlike lane stack service per inode ".left"
            do raetlike lane stack service per inode ".right"
        exit
            do raetlike lane stack closer per inode ".left"
            do raetlike lane stack closer per inode ".right"
framer talk be active first send
    frame send
        do raetlike lane stack sender at enter per inode ".left" with destination "right" n 7
        go stop if received in .right.status >= 1
        go stop if elapsed >= 5
    frame stop
        bid stop all
""")
    outcome = run_plan(plan, period=PERIOD, real=False)

    store = outcome.store("pair")
    assert list(store.fetch(".right.rxmsgs").value) == [({"n": 7}, "left")]
    assert store.fetch(".left.status")["received"] == 0
    assert store.fetch(".raetlike.lane.stack.status") is None  # nothing under the default inode


def test_an_unknown_house_is_a_plan_error_naming_the_houses(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"no house 'boss' \(houses: master, minion\)"):
        run_plan(road_plan(tmp_path, 7530, 7531), house="boss", real=False)


def test_a_plan_that_does_not_build_is_a_plan_error(tmp_path: Path) -> None:
    plan = tmp_path / "bad.flo"
    plan.write_text("house broken\nframer f be active first a\n    frame a\n"
                    "        do raetlike road stack teleporter\n")
    with pytest.raises(PlanError, match="does not build"):
        run_plan(plan, real=False)


def test_importing_raetlike_flo_patches_nothing_but_makes_ioflo_importable() -> None:
    script = """
import collections, json
json_loads = json.loads
import msgpack
packb, unpackb = msgpack.packb, msgpack.unpackb
import raetlike.flo
import ioflo.app.run, ioflo.base.skedding
assert json.loads is json_loads
assert (msgpack.packb, msgpack.unpackb) == (packb, unpackb)
assert not hasattr(collections, "Mapping")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.stdout.strip() == "ok", done.stderr


def test_houses_with_keeps_remember_each_other_across_runs(tmp_path: Path) -> None:
    keeps = tmp_path / "keeps"
    master_port, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, master_port, minion_port)
    text = plan.read_text()
    text = text.replace("main true", f'main true keep "{keeps}"')
    text = text.replace(f"port {minion_port}\n", f'port {minion_port} keep "{keeps}"\n')
    plan.write_text(text)

    first = run_plan(plan, period=PERIOD, real=False)
    second = run_plan(plan, period=PERIOD, real=False)

    assert first.ok, first.failures
    assert second.ok, second.failures
    assert sorted(p.name for p in keeps.iterdir()) == ["master", "minion"]
    assert any((keeps / "minion" / "remote").iterdir())
    restored = [e for e in shares(second, "minion", ".raetlike.road.stack.")["events"]
                if isinstance(e, road_events.Joined)]
    assert [e.remote for e in restored] == ["master"]


def test_houses_with_durable_stores_exchange_messages_through_them(tmp_path: Path) -> None:
    keeps, stores = tmp_path / "keeps", tmp_path / "durable"
    master_port, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, master_port, minion_port)
    text = plan.read_text()
    text = text.replace("main true", f'main true keep "{keeps}" durable "{stores / "master"}"')
    text = text.replace(f"port {minion_port}\n",
                        f'port {minion_port} keep "{keeps}" durable "{stores / "minion"}"\n')
    plan.write_text(text)

    outcome = run_plan(plan, period=PERIOD, real=False)

    assert outcome.ok, outcome.failures
    for house in ("master", "minion"):
        side = shares(outcome, house, ".raetlike.road.stack.")
        assert side["status"]["sent"] == 1
        (received,) = [e for e in side["events"] if isinstance(e, road_events.MessageReceived)]
        assert isinstance(received, DurableMessageReceived)
        assert received.durable_seq == 1
        assert sorted(p.name for p in (stores / house).iterdir()) == ["lock", "outbox", "seen"]
