"""Lane faults on real UNIX sockets: a yard's socket deleted, a socket we may not write to,
a receiver that stops reading until its receive buffer is full.  Nothing handed to the
stack is lost silently or delivered twice."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver

ROOT = Path(__file__).resolve().parent.parent
PR_CAPBSET_DROP = 24  # prctl option (linux/prctl.h)
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # linux/capability.h

ECHO_YARD = """
import sys
from lane import LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
stack = LaneStack(LocalYard("echo", "faults", sys.argv[1]))
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

# A sender yard "a" (without root's permission override when the tests run as root, since
# root writes to any socket): sends two messages to yard "b", prints one JSON line when the
# first send is refused, then runs until both are sent whole or handed back.
SENDER = """
import json, sys
from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
directory, unreachable_after = sys.argv[1], float(sys.argv[2])
config = LaneConfig(gone_retry=0.05, max_retry=0.2, unreachable_after=unreachable_after)
a = LaneStack(LocalYard("a", "faults", directory), config)
loop = Loop()
driver = UxdDriver(a)
loop.add(driver)
for n in range(2):
    a.transmit({"n": n}, to="b")
handed_back = []
def refused():
    return a.stats.send_failures > 0
def settled():
    while (event := a.next_event()) is not None:
        if isinstance(event, events.YardUnreachable):
            handed_back.append({"reason": event.reason, "messages": list(event.messages)})
    return bool(handed_back) or a.stats.messages_sent == 2
loop.run_until(refused, timeout=5)
print(json.dumps({"refused": a.stats.send_failures}), flush=True)
sys.stdin.readline()  # the parent may fix the socket now
loop.run_until(settled, timeout=10)
print(json.dumps({"sent": a.stats.messages_sent, "handed_back": handed_back,
                  "send_failures": a.stats.send_failures}), flush=True)
loop.close()
"""


@pytest.fixture
def loop() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.close()


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def received(stack: LaneStack, into: list[Any]) -> bool:
    """Move the bodies of the stack's messages into ``into``; False, so it chains."""
    while (event := stack.next_event()) is not None:
        if isinstance(event, events.MessageReceived):
            into.append(event.body)
    return False


def drop_permission_override() -> None:
    """In the child, before exec: give up root's power to ignore file permissions."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def start_sender(directory: Path, unreachable_after: float) -> subprocess.Popen[str]:
    preexec = drop_permission_override if os.geteuid() == 0 else None
    return subprocess.Popen(
        [sys.executable, "-c", SENDER, str(directory), str(unreachable_after)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env(),
        preexec_fn=preexec)  # noqa: PLW1509 - no threads here; one prctl per capability


def read_json(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "the sender died"
    result: dict[str, Any] = json.loads(line)
    return result


def go_on(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()


def bind(name: str, directory: Path, loop: Loop, config: LaneConfig | None = None) -> LaneStack:
    stack = LaneStack(LocalYard(name, "faults", str(directory)), config or LaneConfig())
    loop.add(UxdDriver(stack))
    return stack


# -- a yard's socket deleted ----------------------------------------------------------------

def test_messages_to_a_yard_whose_socket_was_deleted_wait_and_arrive_once_it_binds_again(
        tmp_path: Path, loop: Loop) -> None:
    config = LaneConfig(gone_retry=0.02, max_retry=0.1, unreachable_after=30)
    a = bind("a", tmp_path, loop, config)
    b_loop = Loop()
    b = bind("b", tmp_path, b_loop)
    try:
        os.unlink(b.local.path)  # b keeps running, deaf: nothing can reach it any more
        for n in range(3):
            a.transmit({"n": n, "pad": "x" * 50_000}, to="b")
        assert loop.run_until(lambda: a.stats.send_failures >= 2, timeout=5)
        assert a.stats.messages_sent == 0
        got: list[Any] = []
        b_loop.run_once(max_wait=0.05)
        received(b, got)
        assert got == []
    finally:
        b_loop.close()
    b2 = bind("b", tmp_path, loop)  # the yard restarts and binds its path again
    assert loop.run_until(lambda: received(b2, got) or len(got) >= 3, timeout=5)
    loop.run_once(max_wait=0.2)
    received(b2, got)
    assert [m["n"] for m in got] == [0, 1, 2]
    assert a.stats.messages_sent == 3


def test_a_yard_whose_socket_stays_deleted_gets_every_message_handed_back(
        tmp_path: Path, loop: Loop) -> None:
    config = LaneConfig(gone_retry=0.02, max_retry=0.05, unreachable_after=0.3)
    a = bind("a", tmp_path, loop, config)
    b = bind("b", tmp_path, loop)
    os.unlink(b.local.path)
    first = a.transmit({"n": 1}, to="b")
    second = a.transmit({"n": 2, "pad": "y" * 100_000}, to="b")
    seen: list[events.Event] = []

    def unreachable() -> bool:
        while (event := a.next_event()) is not None:
            seen.append(event)
        return any(isinstance(e, events.YardUnreachable) for e in seen)

    assert loop.run_until(unreachable, timeout=5)
    [gone] = [e for e in seen if isinstance(e, events.YardUnreachable)]
    assert gone.reason == "No such file or directory"
    assert gone.message_ids == (first, second)
    assert [m["n"] for m in gone.messages] == [1, 2]
    assert a.stats.messages_undelivered == 2
    got: list[Any] = []
    loop.run_once(max_wait=0.05)
    received(b, got)
    assert got == []


# -- a permission-denied socket -------------------------------------------------------------

def test_a_socket_the_sender_may_not_write_to_hands_the_messages_back_as_permission_denied(
        tmp_path: Path, loop: Loop) -> None:
    b = bind("b", tmp_path, loop)
    os.chmod(b.local.path, 0)
    sender = start_sender(tmp_path, unreachable_after=0.4)
    try:
        assert read_json(sender)["refused"] >= 1
        go_on(sender)
        result = read_json(sender)
    finally:
        sender.kill()
        sender.wait(5)
    assert result["sent"] == 0
    [back] = result["handed_back"]
    assert back["reason"] == "Permission denied"
    assert back["messages"] == [{"n": 0}, {"n": 1}]
    got: list[Any] = []
    loop.run_once(max_wait=0.05)
    received(b, got)
    assert got == []


def test_messages_refused_for_permission_arrive_once_when_the_permission_is_granted(
        tmp_path: Path, loop: Loop) -> None:
    b = bind("b", tmp_path, loop)
    os.chmod(b.local.path, 0)
    sender = start_sender(tmp_path, unreachable_after=10)
    got: list[Any] = []
    try:
        assert read_json(sender)["refused"] >= 1
        os.chmod(b.local.path, 0o600)  # the owner may write again
        go_on(sender)
        assert loop.run_until(lambda: received(b, got) or len(got) >= 2, timeout=5)
        result = read_json(sender)
    finally:
        sender.kill()
        sender.wait(5)
    loop.run_once(max_wait=0.2)
    received(b, got)
    assert got == [{"n": 0}, {"n": 1}]
    assert result["sent"] == 2
    assert result["handed_back"] == []
    assert result["send_failures"] >= 1


# -- a full receive buffer ------------------------------------------------------------------

def test_a_stopped_yard_whose_receive_buffer_fills_gets_every_message_once_when_it_resumes(
        tmp_path: Path, loop: Loop) -> None:
    echo = subprocess.Popen([sys.executable, "-c", ECHO_YARD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, env=env())
    assert echo.stdout is not None
    assert echo.stdout.readline().strip() == "ready"
    config = LaneConfig(busy_retry=0.01, max_retry=0.2, unreachable_after=30)
    a = bind("a", tmp_path, loop, config)
    count = 300
    try:
        echo.send_signal(signal.SIGSTOP)  # it reads nothing: its receive queue fills up
        for n in range(count):
            a.transmit({"n": n, "pad": "x" * 1000}, to="echo")
        assert loop.run_until(lambda: a.stats.send_failures > 0, timeout=5)
        loop.run_until(lambda: False, timeout=0.5)
        stalled = a.stats.messages_sent
        assert stalled < count  # the buffer is full: most messages still wait in the outbox
        echoes: list[Any] = []
        received(a, echoes)
        assert echoes == []
        echo.send_signal(signal.SIGCONT)
        assert loop.run_until(lambda: received(a, echoes) or len(echoes) >= count, timeout=15)
        loop.run_until(lambda: received(a, echoes), timeout=0.3)
    finally:
        echo.kill()
        echo.wait(5)
    assert sorted(m["n"] for m in echoes) == list(range(count))  # each exactly once
    assert a.stats.messages_sent == count
    assert a.stats.messages_undelivered == 0
