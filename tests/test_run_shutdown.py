"""Real sockets: SIGTERM/SIGINT stop the loop at once, close stacks, remove socket files.

Also the idle measurement: a process of joined estates and yards uses
(almost) no CPU while nothing happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lane import LaneStack, LocalYard
from lane import events as lane_events
from raetlike.run import Loop, TaskBody
from raetlike.udp import UdpDriver
from raetlike.uxd import UxdDriver
from road import events as road_events
from road.stack import LocalEstate, RoadConfig, RoadStack

ROOT = Path(__file__).resolve().parent.parent
IDLE_SECONDS = 3.0
IDLE_CPU_LIMIT = 0.02  # of one core


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_wakes_the_sleeping_loop_at_once_and_shutdown_reports_undelivered(
        tmp_path: Path, number: signal.Signals) -> None:
    loop = Loop()
    # no presence checks: the only timer is the message's expiry, ten minutes away
    estate = RoadStack(LocalEstate("alpha"), RoadConfig(keepalive=False), now=loop.clock())
    yard = LaneStack(LocalYard("solo", "test", str(tmp_path)), now=loop.clock())
    loop.add(UdpDriver(estate))
    loop.add(UxdDriver(yard))
    estate.add_remote(("127.0.0.1", 9), name="nobody")
    road_id = estate.transmit({"to": "nobody"}, to="nobody", now=loop.clock())
    assert os.path.exists(yard.path)
    sent_at: list[float] = []

    def killer() -> TaskBody:
        yield 0.05
        sent_at.append(time.monotonic())
        os.kill(os.getpid(), number)
        yield 3600.0

    previous = signal.getsignal(number)
    loop.spawn(killer(), name="killer")
    report = loop.serve()

    assert time.monotonic() - sent_at[0] < 5.0  # woken by the wakeup fd, not a 600 s timer
    assert report.signal == number
    assert [(type(e), e.message_id) for e in report.undelivered] == [
        (road_events.MessageExpired, road_id)]
    assert report.tasks_unfinished == ("killer",)
    assert estate.closed
    assert yard.closed
    assert not os.path.exists(yard.path)
    assert signal.getsignal(number) is previous


def test_shutdown_reports_lane_messages_still_queued_as_yard_unreachable(
        tmp_path: Path) -> None:
    loop = Loop()
    yard = LaneStack(LocalYard("solo", "test", str(tmp_path)), now=loop.clock())
    loop.add(UxdDriver(yard))
    message_id = yard.transmit({"to": "absent"}, to="absent", now=loop.clock())
    loop.run_once(max_wait=0.0)  # the send fails: the yard's socket does not exist
    report = loop.shutdown()
    assert len(report.undelivered) == 1
    unreachable = report.undelivered[0]
    assert isinstance(unreachable, lane_events.YardUnreachable)
    assert unreachable.message_ids == (message_id,)
    assert unreachable.messages == ({"to": "absent"},)
    assert not os.path.exists(yard.path)


def test_an_idle_process_of_estates_and_yards_uses_no_measurable_cpu() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "idle_cpu.py"), "--seconds", str(IDLE_SECONDS),
         "--json", "--undelivered"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["idle_seconds"] >= IDLE_SECONDS
    assert report["cpu_seconds"] / report["idle_seconds"] < IDLE_CPU_LIMIT, report
    # presence checks run about once a second each way; a polling loop would run thousands
    assert report["idle_rounds"] < 10 * IDLE_SECONDS + 10, report
    assert report["signal"] == "SIGTERM"
    assert report["closed"] is True
    assert report["undelivered"] == ["MessageExpired"]
    assert report["socket_files_left"] == []
    assert report["stop_seconds"] < 5.0
