"""The bus in real processes on loopback: yard to yard through two manors, estate to estate.

Processes: ``raetlike estate hub --main --lane moon --bus`` with
``raetlike yard svc --lane moon --bus`` on its lane, ``raetlike estate leaf
--join ... --lane sun --bus``, and this test process as the bus yard
``asker`` on the leaf's lane.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raetlike.bus import Errno
from raetlike.hosting import LoopBus, bus_yard
from tests.test_manor_processes import Process

DEADLINE = 10.0


@dataclass
class Tree:
    hub: Process
    leaf: Process
    svc: Process
    asker: LoopBus


@pytest.fixture(scope="module")
def tree() -> Iterator[Tree]:
    base = Path(tempfile.mkdtemp(prefix="bus", dir="/tmp"))  # short: socket paths <= 108 B
    started: list[Process] = []
    asker: LoopBus | None = None
    try:
        hub = Process(base, "hub", "estate", "hub", "--main", "--host", "127.0.0.1",
                      "--port", "0", "--keep", str(base / "keep"), "--auto", "always",
                      "--lane", "moon", "--dir", str(base / "moon"), "--bus",
                      prefix="estate hub listening on ")
        started.append(hub)
        svc = Process(base, "svc", "yard", "svc", "--lane", "moon", "--dir", str(base / "moon"),
                      "--bus", prefix="yard svc listening on ")
        started.append(svc)
        leaf = Process(base, "leaf", "estate", "leaf", "--host", "127.0.0.1", "--port", "0",
                       "--keep", str(base / "keep"), "--join", hub.where, "--lane", "sun",
                       "--dir", str(base / "sun"), "--bus", prefix="estate leaf listening on ")
        started.append(leaf)
        asker = bus_yard("asker", "sun", str(base / "sun"))
        leaf.wait_for_log("estate leaf: allowed hub", DEADLINE)
        yield Tree(hub, leaf, svc, asker)
        for process in reversed(started):
            assert process.stop() == 0, process.log.read_text()
    finally:
        if asker is not None:
            asker.loop.close()
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait()
        shutil.rmtree(base, ignore_errors=True)


def test_a_yard_on_a_minion_calls_a_service_on_a_yard_of_another_estate_through_two_manors(
        tree: Tree) -> None:
    deadline = time.monotonic() + DEADLINE
    reply = tree.asker.call_until_routed("svc", "echo.ping", {"n": 1}, deadline)
    assert reply.ok, reply
    assert reply.payload == {"n": 1}
    assert reply.userid == "svc"
    for n in range(2, 12):
        again = tree.asker.call("svc", "echo.ping", {"n": n}, timeout=DEADLINE)
        assert (again.errno, again.payload) == (Errno.OK, {"n": n})


def test_a_yard_calls_the_main_estate_and_its_own_manor_by_name(tree: Tree) -> None:
    deadline = time.monotonic() + DEADLINE
    for target in ("hub", "leaf"):
        reply = tree.asker.call_until_routed(target, "echo.who", target, deadline)
        assert (reply.errno, reply.payload, reply.userid) == (Errno.OK, target, target)


def test_an_unknown_method_and_an_unknown_node_answer_38_and_113(tree: Tree) -> None:
    deadline = time.monotonic() + DEADLINE
    assert tree.asker.call_until_routed("svc", "echo.ping", 0, deadline).ok
    assert tree.asker.call("svc", "kvs.get", 0, timeout=DEADLINE).errno is Errno.ENOSYS
    assert tree.asker.call("nobody", "echo.ping", 0, timeout=DEADLINE).errno \
        is Errno.EHOSTUNREACH

