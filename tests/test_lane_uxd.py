"""Real UNIX datagram sockets: permissions, stale and live sockets, two processes, restarts."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver, YardRunningError

ROOT = Path(__file__).resolve().parent.parent

ECHO_YARD = """
import sys
from lane import LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
stack = LaneStack(LocalYard("echo", "test", sys.argv[1]))
loop = Loop()
loop.add(UxdDriver(stack))
print("ready", flush=True)
def echo():
    while (event := stack.next_event()) is not None:
        if isinstance(event, events.MessageReceived):
            stack.transmit(event.body, to=event.yard)
    return False
loop.run_until(echo, timeout=60)
"""


@pytest.fixture
def lane_dir(tmp_path: Path) -> Path:
    return tmp_path / "uxd"


@pytest.fixture
def loop() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.close()


def start_echo(directory: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", ECHO_YARD, str(directory)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def collect(stack: LaneStack, into: list[events.Event]) -> bool:
    """Move the stack's events into ``into``; False, so it chains with ``or``."""
    while (event := stack.next_event()) is not None:
        into.append(event)
    return False


def received(seen: list[events.Event]) -> list[events.MessageReceived]:
    return [e for e in seen if isinstance(e, events.MessageReceived)]


def test_the_socket_directory_is_owner_only_and_the_socket_is_removed_on_close(
        lane_dir: Path, loop: Loop) -> None:
    stack = LaneStack(LocalYard("a", "test", str(lane_dir)))
    driver = UxdDriver(stack)
    assert stat.S_IMODE(lane_dir.stat().st_mode) == 0o700
    info = os.lstat(stack.path)
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert stack.path == str(lane_dir / "test.a.uxd")
    driver.close()
    assert not os.path.exists(stack.path)


def test_a_live_yard_socket_is_never_stolen(lane_dir: Path) -> None:
    first = UxdDriver(LaneStack(LocalYard("a", "test", str(lane_dir))))
    try:
        with pytest.raises(YardRunningError,
                           match=f"yard a already running at {lane_dir / 'test.a.uxd'}"):
            UxdDriver(LaneStack(LocalYard("a", "test", str(lane_dir))))
        assert os.path.exists(first.path)
    finally:
        first.close()


def test_a_stale_socket_left_by_a_dead_yard_is_replaced(lane_dir: Path, loop: Loop) -> None:
    lane_dir.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(lane_dir / "test.b.uxd"))
    dead.close()  # the file stays behind, nobody listens
    b = LaneStack(LocalYard("b", "test", str(lane_dir)))
    a = LaneStack(LocalYard("a", "test", str(lane_dir)))
    loop.add(UxdDriver(b))
    loop.add(UxdDriver(a))
    a.transmit({"hello": "b"}, to="b")
    seen: list[events.Event] = []
    assert loop.run_until(lambda: collect(b, seen) or bool(received(seen)), timeout=5)
    assert received(seen)[0].body == {"hello": "b"}


def test_a_path_holding_something_other_than_a_socket_is_refused(lane_dir: Path) -> None:
    lane_dir.mkdir(mode=0o700)
    (lane_dir / "test.a.uxd").write_text("not a socket")
    with pytest.raises(YardRunningError, match="is not a socket"):
        UxdDriver(LaneStack(LocalYard("a", "test", str(lane_dir))))


def test_two_yards_in_two_processes_exchange_large_messages_across_a_restart(
        lane_dir: Path, loop: Loop) -> None:
    echo = start_echo(lane_dir)
    config = LaneConfig(gone_retry=0.02, max_retry=0.1, unreachable_after=30)
    a = LaneStack(LocalYard("a", "test", str(lane_dir)), config)
    loop.add(UxdDriver(a))
    seen: list[events.Event] = []
    try:
        messages: list[dict[str, Any]] = [
            {"n": 1}, {"n": 2, "blob": "x" * 3_000_000}, {"n": 3, "blob": "y" * 70_000}]
        for message in messages:
            a.transmit(message, to="echo")
        assert loop.run_until(lambda: collect(a, seen) or len(received(seen)) == 3, timeout=10)
        assert [m.body for m in received(seen)] == messages
        assert received(seen)[1].pages == 46
        # kill the echo yard: its socket file stays behind
        echo.send_signal(signal.SIGKILL)
        echo.wait(5)
        assert os.path.exists(lane_dir / "test.echo.uxd")
        a.transmit({"n": 4, "blob": "z" * 500_000}, to="echo")
        assert loop.run_until(lambda: a.stats.send_failures > 0, timeout=5)
        echo = start_echo(lane_dir)  # replaces the stale socket
        assert loop.run_until(lambda: collect(a, seen) or len(received(seen)) == 4, timeout=10)
        assert received(seen)[3].body["n"] == 4
        restarted = [e for e in seen if isinstance(e, events.YardRestarted)]
        assert [e.yard for e in restarted] == ["echo"]
        assert not any(isinstance(e, events.YardUnreachable) for e in seen)
    finally:
        echo.kill()
        echo.wait(5)


def test_a_killed_yard_that_never_returns_hands_its_messages_back(
        lane_dir: Path, loop: Loop) -> None:
    echo = start_echo(lane_dir)
    echo.kill()
    echo.wait(5)
    config = LaneConfig(gone_retry=0.02, max_retry=0.05, unreachable_after=0.3)
    a = LaneStack(LocalYard("a", "test", str(lane_dir)), config)
    loop.add(UxdDriver(a))
    a.transmit({"n": 1}, to="echo")
    seen: list[events.Event] = []
    started = time.monotonic()
    assert loop.run_until(
        lambda: collect(a, seen) or any(isinstance(e, events.YardUnreachable) for e in seen),
        timeout=5)
    [gone] = [e for e in seen if isinstance(e, events.YardUnreachable)]
    assert gone.messages == ({"n": 1},)
    assert gone.reason == "Connection refused"
    assert time.monotonic() - started >= 0.3
