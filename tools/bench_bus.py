"""Bus and survey figures on loopback, in real processes, beside raw UDP ping-pong.

Usage: ``.venv/bin/python tools/bench_bus.py [--count 500] [--respondents 100]
[--surveys 10] [--json]``

- raw UDP ping-pong (100-byte datagrams, an echo process);
- bus request/reply estate to estate: this process as an estate joined to
  ``raetlike estate hub --main --bus``, calling ``echo.ping`` on ``hub``;
- bus request/reply yard to yard across two estates: this process as the yard
  ``asker`` on the lane of ``raetlike estate leaf --join hub --lane sun --bus``
  calling ``echo.ping`` on ``raetlike yard svc --lane moon --bus`` (on hub's
  lane): asker -> leaf manor -> road -> hub manor -> svc and back;
- a survey of N respondent estates (``python -m raetlike.swarm``, one process)
  from a main estate here: time until every answer is in.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from raetlike.bus import BusNode  # noqa: E402 - after the path is set
from raetlike.hosting import EstateBus, LoopBus, bus_yard  # noqa: E402
from raetlike.run import Loop  # noqa: E402
from raetlike.swarm import SurveyHub  # noqa: E402
from raetlike.udp import UdpDriver, parse_host_port  # noqa: E402
from raetlike.wire.kinds import AutoMode  # noqa: E402
from road.keeping import MemoryKeep  # noqa: E402
from road.stack import LocalEstate, RoadConfig, RoadStack  # noqa: E402

PAYLOAD = "x" * 100
START = 20.0


def _spawn(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start a process; returns it and its first stdout line."""
    with log.open("wb") as err:
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert process.stdout is not None  # noqa: S101 - we asked for a pipe
    return process, process.stdout.readline().decode().strip()


def _raetlike(base: Path, label: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    return _spawn([sys.executable, "-m", "raetlike", *args], base / f"{label}.log")


def _stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "mean_ms": 1000 * statistics.fmean(ordered), "count": len(ordered)}


def raw_udp(count: int, base: Path) -> dict[str, float]:
    """Raw UDP ping-pong against ``raetlike.bench.serve_udp`` in another process."""
    process, line = _spawn([sys.executable, "-c",
                            "from raetlike.bench import serve_udp; serve_udp()"],
                           base / "udp.log")
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect(("127.0.0.1", int(line)))
        sock.settimeout(2.0)
        data = b"P" + PAYLOAD.encode()[1:]
        times = []
        for _ in range(count):
            start = time.perf_counter()
            sock.send(data)
            sock.recv(65535)
            times.append(time.perf_counter() - start)
        sock.close()
        return _stats(times)
    finally:
        process.kill()
        process.wait()


def _round_trips(client: LoopBus, target: str, count: int) -> dict[str, float]:
    reply = client.call_until_routed(target, "echo.ping", PAYLOAD, time.monotonic() + START)
    assert reply.ok, reply  # noqa: S101 - a benchmark of failures is no benchmark
    times = []
    for _ in range(count):
        start = time.perf_counter()
        reply = client.call(target, "echo.ping", PAYLOAD, timeout=10.0)
        times.append(time.perf_counter() - start)
        assert reply.ok, reply  # noqa: S101
    return _stats(times)


def estate_client(hub: str) -> LoopBus:
    """This process as the estate ``benchclient`` joined to ``hub``, its bus upstream hub."""
    stack = RoadStack(LocalEstate("benchclient"), RoadConfig(auto=AutoMode.ALWAYS),
                      MemoryKeep(AutoMode.ALWAYS), now=time.monotonic())
    node = BusNode("benchclient", now=time.monotonic())
    bus = EstateBus(node, stack)
    loop = Loop()

    def on_event(event: Any) -> None:
        bus.handle_road_event(event, time.monotonic())

    loop.add(UdpDriver(stack), on_event=on_event)
    stack.join(parse_host_port(hub), now=time.monotonic())
    loop.run_until(lambda: node.upstream is not None, timeout=START)
    return LoopBus(node, loop, time.monotonic)


def buses(count: int, base: Path) -> dict[str, dict[str, float]]:
    """Estate to estate, and yard to yard through two manors."""
    started: list[subprocess.Popen[bytes]] = []
    loops: list[Loop] = []
    try:
        hub, line = _raetlike(base, "hub", "estate", "hub", "--main", "--host", "127.0.0.1",
                              "--port", "0", "--keep", str(base / "keep"), "--auto", "always",
                              "--lane", "moon", "--dir", str(base / "moon"), "--bus", "-q")
        started.append(hub)
        hub_at = line.rpartition(" ")[2]
        svc, _ = _raetlike(base, "svc", "yard", "svc", "--lane", "moon", "--dir",
                           str(base / "moon"), "--bus", "-q")
        started.append(svc)
        leaf, _ = _raetlike(base, "leaf", "estate", "leaf", "--host", "127.0.0.1", "--port",
                            "0", "--keep", str(base / "keep"), "--join", hub_at, "--lane",
                            "sun", "--dir", str(base / "sun"), "--bus", "-q")
        started.append(leaf)
        estate = estate_client(hub_at)
        loops.append(estate.loop)
        asker = bus_yard("asker", "sun", str(base / "sun"))
        loops.append(asker.loop)
        return {"bus_estate_to_estate": _round_trips(estate, "hub", count),
                "bus_yard_to_yard_two_manors": _round_trips(asker, "svc", count)}
    finally:
        for loop in loops:
            loop.close()
        for process in reversed(started):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


def survey(respondents: int, surveys: int) -> dict[str, float]:
    """Time to collect every answer of a survey of ``respondents`` estates."""
    hub = SurveyHub("hub", survey_time=30.0)
    host, port = hub.address
    swarm, _line = _spawn([sys.executable, "-m", "raetlike.swarm", "--count",
                           str(respondents), "--join", f"{host}:{port}"], Path(os.devnull))
    try:
        start = time.perf_counter()
        if not hub.wait_for(respondents, timeout=120.0):
            raise RuntimeError(f"only {len(hub.channels)} of {respondents} joined")
        joined = time.perf_counter() - start
        times = []
        for index in range(surveys):
            responses, elapsed, in_time = hub.survey({"n": index}, respondents, timeout=30.0)
            if len(responses) != respondents or not in_time:
                raise RuntimeError(f"survey {index}: {len(responses)} of {respondents}")
            times.append(elapsed)
        result = _stats(times)
        result["respondents"] = respondents
        result["join_all_s"] = joined
        return result
    finally:
        hub.close()
        swarm.send_signal(signal.SIGTERM)
        swarm.wait(timeout=20)


def main() -> int:
    """Run every measurement and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=500, help="round trips per path")
    parser.add_argument("--respondents", type=int, default=100)
    parser.add_argument("--surveys", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))  # short: socket paths <= 108 B
    try:
        results: dict[str, dict[str, float]] = {"raw_udp_ping_pong": raw_udp(args.count, base)}
        results.update(buses(args.count, base))
        results["survey"] = survey(args.respondents, args.surveys)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, figures in results.items():
        print(f"{name:30} " + "  ".join(
            f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
            for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
