"""Measure the CPU an idle process of estates and yards uses on the cooperative loop.

Starts a child process that runs, on one ``raetlike.run.Loop``, a main
estate and a minion estate over UDP on 127.0.0.1 (joined and allowed, so
presence checks run) and a main yard with one other yard over UXD (one
message exchanged).  Once the child says it is ready, the parent reads the
child's CPU time from /proc, waits ``--seconds``, reads it again, then
stops the child with SIGTERM and checks the shutdown report: stacks
closed, undelivered messages reported, socket files gone.

    tools/idle_cpu.py                 # 30 idle seconds, a readable report
    tools/idle_cpu.py --seconds 3 --json
    tools/idle_cpu.py --undelivered   # also queue a message nobody takes

Linux only (/proc).  Exit status 0 when the child shut down cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 20.0


def child(directory: str, undelivered: bool) -> int:
    """The measured process: set up, say ready, serve until SIGTERM, print the report."""
    sys.path.insert(0, str(ROOT))
    from lane import LaneStack, LocalYard  # noqa: PLC0415 - only the child needs the stacks
    from lane import events as lane_events  # noqa: PLC0415
    from raetlike.run import Loop, TaskBody, Until  # noqa: PLC0415
    from raetlike.udp import UdpDriver  # noqa: PLC0415
    from raetlike.uxd import UxdDriver  # noqa: PLC0415
    from raetlike.wire.kinds import AutoMode  # noqa: PLC0415
    from road import events  # noqa: PLC0415
    from road.keeping import MemoryKeep  # noqa: PLC0415
    from road.stack import LocalEstate, RoadConfig, RoadStack  # noqa: PLC0415

    loop = Loop()
    now = loop.clock()
    seen: list[Any] = []
    config = RoadConfig(auto=AutoMode.ALWAYS)
    main = RoadStack(LocalEstate("main", main=True), config, MemoryKeep(AutoMode.ALWAYS), now)
    minion = RoadStack(LocalEstate("minion"), config, MemoryKeep(AutoMode.ALWAYS), now)
    main_driver = UdpDriver(main)
    loop.add(main_driver, seen.append)
    loop.add(UdpDriver(minion), seen.append)
    hub = LaneStack(LocalYard("hub", "idle", directory, main=True), now=now)
    worker = LaneStack(LocalYard("worker", "idle", directory), now=now)
    paths = [hub.path, worker.path]
    loop.add(UxdDriver(hub), seen.append)
    loop.add(UxdDriver(worker), seen.append)

    def setup() -> TaskBody:
        minion.join(main_driver.address, now=loop.clock())
        allowed = yield Until(lambda: any(isinstance(e, events.Allowed) for e in seen), 10.0)
        worker.transmit({"hello": "hub"}, to="hub", now=loop.clock())
        got = yield Until(lambda: any(isinstance(e, lane_events.MessageReceived)
                                      for e in seen), 10.0)
        return allowed and got

    if not loop.run_task(setup(), timeout=20.0):
        print(json.dumps({"error": "set-up failed"}), flush=True)
        return 1
    if undelivered:
        minion.add_remote(("127.0.0.1", 9), name="nobody")
        minion.transmit({"never": "delivered"}, to="nobody", now=loop.clock())
    print(json.dumps({"ready": True}), flush=True)
    rounds = loop.rounds
    report = loop.serve()
    print(json.dumps({
        "signal": signal.Signals(report.signal).name if report.signal else None,
        "undelivered": [type(e).__name__ for e in report.undelivered],
        "closed": main.closed and minion.closed and hub.closed and worker.closed,
        "socket_files_left": [p for p in paths if os.path.exists(p)],
        "idle_rounds": loop.rounds - rounds,
    }), flush=True)
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text.rpartition(")")[2].split()
    user, system = int(fields[11]), int(fields[12])
    return (user + system) / os.sysconf("SC_CLK_TCK")


def measure(seconds: float, undelivered: bool) -> dict[str, Any]:
    """Run the child, measure its CPU over ``seconds`` idle seconds, stop it, report."""
    with tempfile.TemporaryDirectory(prefix="raetlike-idle-") as directory:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = [sys.executable, __file__, "--child", directory]
        if undelivered:
            args.append("--undelivered")
        process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        if process.stdout is None:  # pragma: no cover - stdout=PIPE always gives one
            raise RuntimeError("no pipe to the child")
        try:
            first = json.loads(process.stdout.readline() or "{}")
            if not first.get("ready"):
                raise RuntimeError(f"child not ready: {first}")
            cpu_start, wall_start = _cpu_seconds(process.pid), time.monotonic()
            time.sleep(seconds)
            cpu_end, wall_end = _cpu_seconds(process.pid), time.monotonic()
            process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            last = json.loads(process.stdout.readline() or "{}")
            code = process.wait(timeout=10)
            stop_seconds = time.monotonic() - stopped
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
    cpu = cpu_end - cpu_start
    wall = wall_end - wall_start
    return {"idle_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
            "cpu_percent": round(100 * cpu / wall, 3), "stop_seconds": round(stop_seconds, 3),
            "exit_code": code, **last}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle seconds to measure")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--undelivered", action="store_true",
                        help="queue a message to an estate that never answers")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.undelivered)
    report = measure(args.seconds, args.undelivered)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"idle {report['idle_seconds']} s: {report['cpu_seconds']} CPU s "
              f"({report['cpu_percent']} %), {report['idle_rounds']} loop rounds; "
              f"stopped by {report['signal']} in {report['stop_seconds']} s, "
              f"undelivered {report['undelivered']}, "
              f"socket files left {report['socket_files_left']}")
    return 0 if report["exit_code"] == 0 and report["closed"] else 1


if __name__ == "__main__":
    sys.exit(main())
