"""A relay estate in real processes on loopback: a bus request from the top reaches a leaf.

Processes: ``raetlike estate top --main --lane sky --bus --trust-relay relay`` (a
manor: this test process is the bus yard ``asker`` on its lane), ``raetlike estate
relay --main --join TOP --bus`` and ``raetlike estate leaf --join RELAY --bus``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from raetlike.bus import Errno
from raetlike.hosting import bus_yard
from tests.test_manor_processes import Process

DEADLINE = 20.0


def test_a_request_from_the_top_reaches_a_leaf_below_a_relay_and_comes_back() -> None:
    base = Path(tempfile.mkdtemp(prefix="relay", dir="/tmp"))  # short: socket paths <= 108 B
    keep = str(base / "keep")
    started: list[Process] = []
    asker = None
    try:
        top = Process(base, "top", "estate", "top", "--main", "--host", "127.0.0.1",
                      "--port", "0", "--keep", keep, "--auto", "always", "--lane", "sky",
                      "--dir", str(base / "sky"), "--bus", "--trust-relay", "relay",
                      prefix="estate top listening on ")
        started.append(top)
        relay = Process(base, "relay", "estate", "relay", "--main", "--host", "127.0.0.1",
                        "--port", "0", "--keep", keep, "--auto", "always", "--join", top.where,
                        "--bus", prefix="estate relay listening on ")
        started.append(relay)
        leaf = Process(base, "leaf", "estate", "leaf", "--host", "127.0.0.1", "--port", "0",
                       "--keep", keep, "--join", relay.where, "--bus",
                       prefix="estate leaf listening on ")
        started.append(leaf)
        asker = bus_yard("asker", "sky", str(base / "sky"))
        relay.wait_for_log("estate relay: allowed top", DEADLINE)
        leaf.wait_for_log("estate leaf: allowed relay", DEADLINE)
        relay.wait_for_log("bus relay: remote top linked (upstream)", DEADLINE)
        deadline = time.monotonic() + DEADLINE
        reply = asker.call_until_routed("leaf", "echo.ping", {"n": 1}, deadline)
        assert (reply.errno, reply.payload, reply.userid) == (Errno.OK, {"n": 1}, "leaf"), reply
        assert asker.call("relay", "echo.who", "r", timeout=DEADLINE).userid == "relay"
        assert asker.call("nobody", "echo.ping", 0, timeout=DEADLINE).errno \
            is Errno.EHOSTUNREACH
        for process in reversed(started):
            assert process.stop() == 0, process.log.read_text()
        assert "remote relay linked (relay)" in top.log.read_text()
    finally:
        if asker is not None:
            asker.loop.close()
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
                process.process.wait()
        shutil.rmtree(base, ignore_errors=True)
