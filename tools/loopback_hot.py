"""Many estates on loopback, each joined to two mains in hot mode: join time, idle mains, a fan-out.

The two mains are real ``raetlike estate NAME --main --bus`` processes (the first a manor, so
this tool can be a bus yard on its lane).  The estates live in a few worker processes (this
file with ``--worker``), each estate a RoadStack with a MultiMain in hot mode (what
``raetlike estate NAME --join A --join B --multi hot --bus`` runs) and its EstateBus, each
on its own UDP socket and its own loopback address (127.1.x.y: one host each, so the
mains' per-address join rate applies per estate, as it would on a network).  Workers keep
at most ``--in-flight`` joins open each.

Reports: time until every estate has both mains as bus upstreams, each main's CPU and
memory over ``--idle`` seconds of idle traffic, and one echo request from the first main
(through its lane) to every estate: time until all answered.

    .venv/bin/python tools/loopback_hot.py --estates 10000 --workers 4 [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raetlike.bus import BusConfig, BusNode, Call, Errno, Reply, follows_failover
from raetlike.channels import Hosted
from raetlike.hosting import ECHO_PREFIX, EstateBus, bus_yard, echo
from raetlike.multimain import MultiConfig, MultiMain, MultiMode
from raetlike.run import Loop
from raetlike.udp import UdpDriver, parse_host_port
from raetlike.wire.kinds import AutoMode
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def _host(index: int) -> str:
    return f"127.{1 + (index >> 16)}.{index >> 8 & 255}.{index & 255}"


# == a worker: many hot estates on one loop ===================================

class _Hot:
    """One estate of a worker: stack, MultiMain (hot), bus."""

    def __init__(self, name: str, host: str, mains: list[tuple[str, int]], loop: Loop,
                 now: float, *, period: float, keepalive: float) -> None:
        config = RoadConfig(auto=AutoMode.ALWAYS, period=period)
        self.stack = RoadStack(LocalEstate(name), config, MemoryKeep(AutoMode.ALWAYS), now=now)
        self.road = MultiMain(self.stack, mains, MultiConfig(mode=MultiMode.HOT),
                              movable=follows_failover)
        bus_config = BusConfig(keepalive_interval=keepalive, keepalive_timeout=3 * keepalive)
        self.bus = EstateBus(BusNode(name, config=bus_config, now=now), self.road)
        self.bus.node.serve(ECHO_PREFIX, echo)
        # alone: only its socket, its timers (the bus node's too, through Hosted) and the
        # worker's start (touched) command it; the loop visits it only then
        self.driver = loop.add(UdpDriver(Hosted(self.road, [self.bus]), host, 0), alone=True)
        self.started = False

    def ready(self) -> bool:
        return len(self.bus.node.upstreams) == 2


def worker(first: int, count: int, mains: list[tuple[str, int]], in_flight: int,
           *, period: float, keepalive: float) -> int:
    """Run ``count`` hot estates until SIGTERM; print ``ready N`` as they come up."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    clock = time.monotonic
    loop = Loop(clock)
    estates = [_Hot(f"e{first + i}", _host(first + i), mains, loop, clock(), period=period,
                    keepalive=keepalive)
               for i in range(count)]
    started = ready = told = 0
    last_told = counted = 0.0
    print(f"worker {first} up", flush=True)
    while not stopping:
        loop.run_once(max_wait=0.05)
        if ready < count and clock() - counted >= 0.1:
            # each estate's two upstreams, counted only until all have them, and at most
            # every 0.1 s (every round, the count of 5,000 cost a worker 8 s of 208)
            ready = sum(1 for e in estates[:started] if e.ready())
            counted = clock()
        while started < count and started - ready < in_flight:
            estates[started].road.start(clock())
            estates[started].started = True
            loop.touch(estates[started].driver)
            started += 1
        if ready != told and (ready == count or clock() - last_told > 0.5):
            print(f"ready {ready}", flush=True)
            told, last_told = ready, clock()
    totals: dict[str, int] = {}
    for estate in estates:  # what the estates dropped, for the log (stderr)
        for drop, dropped in estate.stack.stats.dropped.items():
            totals[drop.value] = totals.get(drop.value, 0) + dropped
    print(f"worker {first} drops {json.dumps(totals)} fallbacks "
          f"{sum(e.stack.stats.fast_fallbacks for e in estates)}", file=sys.stderr)
    loop.close()
    return 0


# == the coordinator ============================================================

class _Child:
    def __init__(self, label: str, args: list[str], logs: Path) -> None:
        self.label = label
        self.log = (logs / f"{label}.log").open("wb")
        profiles = os.environ.get("LOOPBACK_HOT_PROFILE")  # a directory: cProfile each child
        if profiles:
            args = [args[0], "-m", "cProfile", "-o", str(Path(profiles) / f"{label}.prof"),
                    *args[1:]]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log,
                                        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.process.stdout is not None  # noqa: S101 - asked for above
        self.stdout: IO[bytes] = self.process.stdout
        os.set_blocking(self.stdout.fileno(), False)
        self.buffer = b""

    def lines(self) -> list[str]:
        try:
            chunk = self.stdout.read() or b""
        except BlockingIOError:
            chunk = b""
        self.buffer += chunk
        *whole, self.buffer = self.buffer.split(b"\n")
        return [line.decode() for line in whole]

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stdout.close()
        self.log.close()


def _first_line(child: _Child, prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            selector.select(0.1)
            for line in child.lines():
                if line.startswith(prefix):
                    return line.removeprefix(prefix)
            if child.process.poll() is not None:
                break
    raise RuntimeError(f"{child.label} did not say {prefix!r}")


def coordinate(estates: int, workers: int, in_flight: int, idle: float,
               timeout: float, *, period: float, keepalive: float) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="hot", dir="/tmp"))
    children: list[_Child] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the children on the way out
    try:
        python = [sys.executable, "-m", "raetlike"]
        mains = []
        for index, name in enumerate(("hota", "hotb")):
            extra = ["--lane", "hotlane", "--dir", str(base / "lane")] if index == 0 else []
            child = _Child(name, [*python, "estate", name, "--main", "--host", "127.0.0.1",
                                  "--port", "0", "--keep", str(base / "keep"),
                                  "--auto", "always", "--bus", "--presence-period",
                                  str(period), "--bus-keepalive", str(keepalive), *extra,
                                  *os.environ.get("LOOPBACK_HOT_MAIN_ARGS", "").split()],
                           base)
            children.append(child)
            mains.append(_first_line(child, f"estate {name} listening on ", 20.0))
        main_children = list(children)
        started = time.monotonic()
        share = -(-estates // workers)
        pool = []
        for w in range(workers):
            first, count = w * share, min(share, estates - w * share)
            if count <= 0:
                break
            child = _Child(f"worker{w}", [sys.executable, __file__, "--worker", str(first),
                                          str(count), "--in-flight", str(in_flight),
                                          "--presence-period", str(period),
                                          "--bus-keepalive", str(keepalive),
                                          "--join", mains[0], "--join", mains[1]], base)
            children.append(child)
            pool.append(child)
        ready = {child.label: 0 for child in pool}
        deadline = started + timeout
        told = started
        while sum(ready.values()) < estates and time.monotonic() < deadline:
            time.sleep(0.2)
            if time.monotonic() - told >= 10:
                told = time.monotonic()
                print(f"{told - started:.0f} s: {sum(ready.values())} ready", file=sys.stderr,
                      flush=True)
            for child in pool:
                for line in child.lines():
                    if line.startswith("ready "):
                        ready[child.label] = int(line.split()[1])
                if child.process.poll() is not None:
                    raise RuntimeError(f"{child.label} exited: see {child.log.name}")
        joined_s = time.monotonic() - started
        all_ready = sum(ready.values())
        time.sleep(2.0)  # the last keepalives settle
        cpu = [child.cpu() for child in main_children]
        time.sleep(idle)
        idle_cpu = [(child.cpu() - c) / idle for child, c in zip(main_children, cpu,
                                                                   strict=True)]
        rss = [child.rss_mb() for child in main_children]
        fan = _fan_out(base, estates, timeout)
        return {"estates": estates, "workers": len(pool), "in_flight_per_worker": in_flight,
                "presence_period_s": period, "bus_keepalive_s": keepalive,
                "all_ready": all_ready == estates, "ready": all_ready,
                "join_s": round(joined_s, 1),
                "idle_s": idle, "main_idle_cpu_percent": [round(c * 100, 1) for c in idle_cpu],
                "main_rss_mb": [round(r, 1) for r in rss], **fan}
    finally:
        for child in reversed(children):
            child.stop()
        _keep_logs(base)
        shutil.rmtree(base, ignore_errors=True)


def _keep_logs(base: Path) -> None:
    """LOOPBACK_HOT_LOGS=DIR: copy the children's logs there before they go."""
    kept = os.environ.get("LOOPBACK_HOT_LOGS")
    if kept:
        for log in base.glob("*.log"):
            shutil.copy(log, kept)


FAN_OUT_WINDOW = 500
"""Fan-out requests in flight at once: under the asker's lane outbox bound
(``LaneConfig.outbox_limit``, 1024), past which the bus fails a request at once with
ENOBUFS, 105 (before, EHOSTUNREACH: 2,000 sent at once, 1,024 answered and 976
"unreachable", no estate lost)."""


def _fan_out(base: Path, estates: int, timeout: float) -> dict[str, Any]:
    """One echo request from the first main's lane to every estate, ``FAN_OUT_WINDOW``
    at a time."""
    asker = bus_yard("asker", "hotlane", str(base / "lane"))
    try:
        warm = asker.call_until_routed("hota", "echo.ping", 0, time.monotonic() + 20)
        if warm.errno is not Errno.OK:
            return {"fan_out_error": f"the first main does not answer: {warm}"}
        replies: list[Reply] = []
        start = time.monotonic()
        deadline, sent = start + timeout, 0
        while len(replies) < estates and time.monotonic() < deadline:
            while sent < estates and sent - len(replies) < FAN_OUT_WINDOW:
                asker.node.send(f"e{sent}", Call("echo.ping", sent), replies.append,
                                now=time.monotonic(), timeout=timeout)
                sent += 1
            more = sent < estates

            def room(more: bool = more, sent: int = sent) -> bool:
                return len(replies) >= estates or (
                    more and sent - len(replies) < FAN_OUT_WINDOW // 2)

            asker.loop.run_until(room, timeout=max(0.0, deadline - time.monotonic()))
        took = time.monotonic() - start
        ok = sum(1 for reply in replies if reply.errno is Errno.OK)
        errors = Counter(reply.errno.name for reply in replies if reply.errno is not Errno.OK)
        return {"fan_out_window": FAN_OUT_WINDOW, "fan_out_answered": ok,
                "fan_out_errors": len(replies) - ok,
                "fan_out_error_kinds": dict(errors), "fan_out_s": round(took, 2)}
    finally:
        asker.loop.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estates", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=100,
                        help="joins a worker keeps open at once")
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--presence-period", type=float, default=1.0,
                        help="RoadConfig.period of mains and estates (seconds)")
    parser.add_argument("--bus-keepalive", type=float, default=5.0,
                        help="BusConfig.keepalive_interval of mains and estates (seconds; "
                             "a link silent 3 times that is lost)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", nargs=2, type=int, metavar=("FIRST", "COUNT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--join", action="append", type=parse_host_port, default=[],
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        return worker(args.worker[0], args.worker[1], args.join, args.in_flight,
                      period=args.presence_period, keepalive=args.bus_keepalive)
    for flag, value in (("--presence-period", args.presence_period),
                        ("--bus-keepalive", args.bus_keepalive)):
        if not math.isfinite(value) or value < 0.05:
            parser.error(f"{flag} {value:g}: a number of seconds, at least 0.05")
    figures = coordinate(args.estates, args.workers, args.in_flight, args.idle, args.timeout,
                         period=args.presence_period, keepalive=args.bus_keepalive)
    print(json.dumps(figures) if args.json else "\n".join(f"{k}: {v}" for k, v in
                                                            figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
