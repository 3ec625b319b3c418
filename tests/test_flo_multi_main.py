"""The ``mains`` deed: a minion house joined to two main houses (failover), in one process."""

from __future__ import annotations

from pathlib import Path

from raetlike.flo import run_plan
from raetlike.multimain import MainActive
from road import events as road_events
from tests.flokit import free_udp_ports
from tests.test_flo_houses import PERIOD, shares

_MAIN = """
house {name}
init .raetlike.road.stack.local with name "{name}" host "127.0.0.1" port {port} main true auto "once"
framer stack be active first start
    frame start
        enter
            do raetlike road stack setup
        recur
            do raetlike road stack service
        exit
            do raetlike road stack closer
framer wait be active first listen
    frame listen
        do raetlike road stack printer
        go done if elapsed >= 6
    frame done
        bid stop all
"""  # noqa: E501 - FloScript lines do not wrap

_MINION = """
house minion
init .raetlike.road.stack.local with name "minion" host "127.0.0.1" port {port}
framer stack be active first start
    frame start
        enter
            do raetlike road stack setup
        recur
            do raetlike road stack service
        exit
            do raetlike road stack closer
framer conversation be active first join
    frame join
        do raetlike road stack mains at enter with joins "127.0.0.1:{alpha} 127.0.0.1:{beta}" multi "failover"
        go greet if allowed in .raetlike.road.stack.status >= 2
        go abort if elapsed >= 5
    frame greet
        do raetlike road stack sender at enter with text "Hello active main"
        go done if sent in .raetlike.road.stack.status >= 1
        go abort if elapsed >= 5
    frame done
        bid stop all
    frame abort
        put "the mains never answered" into meta.failure
        bid stop all
"""  # noqa: E501 - FloScript lines do not wrap


def test_a_minion_house_joins_two_mains_and_greets_the_active_one(tmp_path: Path) -> None:
    alpha, beta, minion = free_udp_ports(3)
    plan = tmp_path / "mains.flo"
    plan.write_text(_MAIN.format(name="alpha", port=alpha) + _MAIN.format(name="beta", port=beta)
                    + _MINION.format(port=minion, alpha=alpha, beta=beta))
    outcome = run_plan(plan, period=PERIOD, real=False)

    assert outcome.ok, outcome.failures
    got = shares(outcome, "minion", ".raetlike.road.stack.")
    assert got["status"]["allowed"] == 2
    assert got["status"]["sent"] == 1
    assert got["status"]["failovers"] == 0
    (active,) = [e.remote for e in got["events"] if isinstance(e, MainActive)]
    heard = {name: [e.body for e in shares(outcome, name, ".raetlike.road.stack.")["events"]
                    if isinstance(e, road_events.MessageReceived)] for name in ("alpha", "beta")}
    other = "beta" if active == "alpha" else "alpha"
    assert heard == {active: [{"text": "Hello active main"}], other: []}
