"""End to end in real processes on loopback: yard -> manor -> road -> manor -> yard and back.

Processes: the main estate's manor (``raetlike estate main --main --echo --lane moon``)
with an echo yard on its lane (``raetlike yard echo --echo``), a minion
estate's manor (``raetlike estate minion --join ... --lane sun``), and this
test process as the yard ``asker`` on the minion's lane.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver

ROOT = Path(__file__).resolve().parent.parent
START = 10.0  # seconds a process gets to print its first line
DEADLINE = 10.0  # seconds a round trip may take before the test fails


class Process:
    """A ``raetlike`` process whose first stdout line says where it listens."""

    def __init__(self, logs: Path, label: str, *args: str, prefix: str) -> None:
        self.log = logs / f"{label}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "raetlike", *args], stdout=subprocess.PIPE, stderr=log,
                env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            assert selector.select(START), f"{label} printed nothing: {self.log.read_text()}"
        line = self.process.stdout.readline().decode().strip()
        assert line.startswith(prefix), f"{line!r}: {self.log.read_text()}"
        self.where = line.removeprefix(prefix)

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"no {text!r} in {self.log.read_text()}"
            time.sleep(0.02)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code


@dataclass
class Asker:
    """This test process as the yard ``asker`` on the minion's lane."""

    stack: LaneStack
    loop: Loop

    def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send ``body`` to the manor (main yard) and wait for the next message back."""
        self.stack.transmit(body, to="main")
        got: list[dict[str, Any]] = []

        def answered() -> bool:
            while (event := self.stack.next_event()) is not None:
                if isinstance(event, events.MessageReceived):
                    got.append(event.body)
            return bool(got)

        assert self.loop.run_until(answered, timeout=DEADLINE), "no answer"
        return got[0]


@dataclass
class Estates:
    """Both manors, the echo yard and the asker."""

    main: Process
    minion: Process
    echo: Process
    asker: Asker


@pytest.fixture(scope="module")
def estates() -> Iterator[Estates]:
    base = Path(tempfile.mkdtemp(prefix="manor", dir="/tmp"))  # short: socket paths <= 108 B
    started: list[Process] = []
    loop = Loop()
    try:
        main = Process(base, "main", "estate", "main", "--main", "--host", "127.0.0.1",
                       "--port", "0", "--keep", str(base / "keep"), "--auto", "always",
                       "--echo", "--lane", "moon", "--dir", str(base / "moon"),
                       prefix="estate main listening on ")
        started.append(main)
        minion = Process(base, "minion", "estate", "minion", "--host", "127.0.0.1",
                         "--port", "0", "--keep", str(base / "keep"), "--join", main.where,
                         "--lane", "sun", "--dir", str(base / "sun"),
                         prefix="estate minion listening on ")
        started.append(minion)
        echo = Process(base, "echo", "yard", "echo", "--lane", "moon", "--dir",
                       str(base / "moon"), "--echo", prefix="yard echo listening on ")
        started.append(echo)
        stack = LaneStack(LocalYard("asker", "sun", str(base / "sun")),
                          LaneConfig(main_yard="main"))
        loop.add(UxdDriver(stack))
        minion.wait_for_log("estate minion: allowed main", DEADLINE)
        yield Estates(main, minion, echo, Asker(stack, loop))
        for process in reversed(started):
            assert process.stop() == 0, process.log.read_text()
    finally:
        loop.close()
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait()
        shutil.rmtree(base, ignore_errors=True)


def _route(source: list[Any], destination: list[Any]) -> dict[str, Any]:
    return {"src": source, "dst": destination}


def test_a_yard_on_a_minion_gets_the_echo_of_a_yard_on_the_main_estate(
        estates: Estates) -> None:
    body = {"route": _route([None, "asker", "q"], ["main", "echo", "jobs"]), "n": 1}
    answer = estates.asker.ask(body)
    assert answer == {"route": _route(["main", "echo", "jobs"], ["minion", "asker", "q"]),
                      "n": 1}


def test_a_large_message_crosses_road_and_lane_both_ways(estates: Estates) -> None:
    blob = "x" * 300_000  # several lane pages and many road segments
    body = {"route": _route(["minion", "asker", None], ["main", "echo", None]), "blob": blob}
    answer = estates.asker.ask(body)
    assert answer["blob"] == blob
    assert answer["route"]["dst"] == ["minion", "asker", None]


def test_the_main_manor_itself_echoes_a_message_with_an_empty_yard(estates: Estates) -> None:
    answer = estates.asker.ask({"route": _route([None, "asker", None], ["main", None, "ping"]),
                                "n": 2})
    assert answer == {"route": _route(["main", "main", "ping"], ["minion", "asker", None]),
                      "n": 2}


def test_an_unknown_yard_on_the_far_estate_gets_an_error_back(estates: Estates) -> None:
    route = _route([None, "asker", None], ["main", "nobody", None])
    answer = estates.asker.ask({"route": route, "n": 3})
    assert answer["route"] == _route(["main", "main", None], ["minion", "asker", None])
    assert answer["error"]["reason"] == "unknown yard"
    assert "nobody" in answer["error"]["detail"]
    assert answer["error"]["route"]["dst"] == ["main", "nobody", None]


def test_an_unknown_estate_gets_an_error_back_from_the_main_estate(estates: Estates) -> None:
    route = _route([None, "asker", None], ["atlantis", "echo", None])
    answer = estates.asker.ask({"route": route, "n": 4})
    assert answer["route"] == _route(["main", "main", None], ["minion", "asker", None])
    assert answer["error"]["reason"] == "unknown estate"
    assert "atlantis" in answer["error"]["detail"]


def test_an_unknown_yard_on_the_local_estate_gets_an_error_from_the_local_manor(
        estates: Estates) -> None:
    route = _route([None, "asker", None], [None, "ghost", None])
    answer = estates.asker.ask({"route": route, "n": 5})
    assert answer["route"] == _route(["minion", "main", None], ["minion", "asker", None])
    assert answer["error"]["reason"] == "unknown yard"


def test_round_trips_through_two_manors_take_milliseconds(estates: Estates) -> None:
    body = {"route": _route([None, "asker", None], ["main", "echo", None])}
    times = []
    for _ in range(50):
        start = time.perf_counter()
        estates.asker.ask(body)
        times.append(time.perf_counter() - start)
    times.sort()
    assert times[len(times) // 2] < 0.5  # median; tools/bench_manor.py reports figures
