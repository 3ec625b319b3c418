"""Measure the manor's added latency: yard -> manor -> road -> manor -> yard round trips.

Starts a main manor (``raetlike estate main --main --echo --lane moon``), an
echo yard on its lane, and a minion manor (``--lane sun``) joined to it; this
process is the yard ``asker`` on the minion's lane.  It times sequential
round trips asker -> echo yard and back through both manors, and beside them
sequential road round trips to the same main estate (``raetlike.cli.ping`` with a
window of 1, the main manor echoing plain road messages).

Usage: ``.venv/bin/python tools/bench_manor.py [--count 1000] [--size 100]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.cli.ping import percentile, ping
from raetlike.run import Loop
from raetlike.udp import parse_host_port
from raetlike.uxd import UxdDriver

ROOT = Path(__file__).resolve().parent.parent


def _start(base: Path, label: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    log = (base / f"{label}.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "raetlike", "-q", *args],
                               stdout=subprocess.PIPE, stderr=log,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    if process.stdout is None:
        raise SystemExit(f"{label}: no stdout")
    return process, process.stdout.readline().decode().strip().rsplit(" ", 1)[-1]


def _yard_round_trips(base: Path, count: int, size: int) -> list[float]:
    stack = LaneStack(LocalYard("asker", "sun", str(base / "sun")), LaneConfig(main_yard="main"))
    loop = Loop()
    loop.add(UxdDriver(stack))
    body: dict[str, Any] = {"route": {"src": [None, "asker", None], "dst": ["main", "echo", None]},
                            "pad": "x" * size}
    times = []
    try:
        for _ in range(count):
            got: list[Any] = []

            def answered(got: list[Any] = got) -> bool:
                while (event := stack.next_event()) is not None:
                    if isinstance(event, events.MessageReceived):
                        got.append(event.body)
                return bool(got)

            start = time.perf_counter()
            stack.transmit(body, to="main")
            if not loop.run_until(answered, timeout=10):
                raise SystemExit("no answer within 10 s")
            times.append(time.perf_counter() - start)
    finally:
        loop.close()
    return times


def _wait_allowed(base: Path) -> None:
    deadline = time.monotonic() + 10
    while "allowed main" not in (base / "minion.log").read_text():
        if time.monotonic() > deadline:
            raise SystemExit("minion not allowed within 10 s")
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="manor", dir="/tmp"))
    processes = []
    try:
        main_process, main_address = _start(
            base, "main", "estate", "main", "--main", "--echo", "--host", "127.0.0.1",
            "--port", "0", "--keep", str(base / "keep"), "--auto", "always",
            "--lane", "moon", "--dir", str(base / "moon"))
        processes.append(main_process)
        processes.append(_start(base, "echo", "yard", "echo", "--lane", "moon", "--dir",
                                str(base / "moon"), "--echo")[0])
        # -v undoes -q: the minion's "allowed main" line is INFO, and we wait for it
        processes.append(_start(base, "minion", "-v", "estate", "minion", "--host", "127.0.0.1",
                                "--port", "0", "--keep", str(base / "keep"), "--join",
                                main_address, "--lane", "sun", "--dir", str(base / "sun"))[0])
        _wait_allowed(base)
        yard = _yard_round_trips(base, args.count, args.size)
        road = ping(parse_host_port(main_address), count=args.count, size=args.size, window=1,
                    timeout=60).round_trips
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)

    def figures(times: tuple[float, ...] | list[float]) -> dict[str, float]:
        return {"p50_ms": round(percentile(times, 50) * 1e3, 3),
                "p99_ms": round(percentile(times, 99) * 1e3, 3)}

    print(json.dumps({"count": args.count, "size": args.size,
                      "yard_manor_road_manor_yard": figures(yard),
                      "road_direct": figures(road)}))


if __name__ == "__main__":
    main()
