"""RAET 0.6.8 at its best: a main and a joiner, each in its own process, tight loops.

Both peers are raetlike/_raetbench/raet_peer.py run by this interpreter (RAET
0.6.8 imports only in a child process, behind compatibility shims).  The
joiner measures one-way (``window`` messages in flight, timed from the first
transmit to the main's receipt of the last), windowed echo, and a 1 MB message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raetlike.bench._common import UNPINNED, BenchOptions, Cpus, Progress, median, pin, silent

__all__ = ["ONE_WAY_WINDOW", "measure_raet_068", "run_plan"]

PEER = Path(__file__).resolve().parent.parent / "_raetbench" / "raet_peer.py"
ONE_WAY_WINDOW = 128  # raetlike's RoadConfig.max_messages_in_flight; RAET did best near it
ECHO_WINDOW = 32
_START = 20.0


def run_plan(plan: list[list[Any]], cap: float,
             cpus: Cpus = UNPINNED) -> list[dict[str, Any]] | None:
    """Start a RAET 0.6.8 main, run ``plan`` from a RAET 0.6.8 joiner; its results or None."""
    with tempfile.TemporaryDirectory() as directory:
        port_file = Path(directory) / "port"
        # the peers' RAET keeps (tempfile.mkdtemp) go in here, removed with it: the main is
        # killed, so it cannot remove its own
        env = {**os.environ, "TMPDIR": directory}
        main = subprocess.Popen(  # noqa: S603 - our own script
            [sys.executable, str(PEER), "main", str(port_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        pin(main.pid, cpus.peer)
        try:
            deadline = time.monotonic() + _START
            while not (port_file.exists() and port_file.read_text()):
                if time.monotonic() > deadline or main.poll() is not None:
                    return None
                time.sleep(0.02)
            steps = sum(2 if step[0] == "one" else 1 for step in plan)
            client = subprocess.Popen(  # noqa: S603 - our own script
                [sys.executable, str(PEER), "client", f"127.0.0.1:{port_file.read_text()}",
                 json.dumps(plan), str(cap), str(main.pid)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            pin(client.pid, cpus.measuring)
            try:
                out, _errors = client.communicate(timeout=_START + cap * steps)
            except subprocess.TimeoutExpired:
                client.kill()
                client.communicate()
                return None
        finally:
            main.kill()
            main.wait()
    if client.returncode != 0 or not out.strip():
        return None
    results: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return results


def measure_raet_068(options: BenchOptions, progress: Progress = silent,
                     cpus: Cpus = UNPINNED) -> dict[str, float | None] | None:
    """RAET 0.6.8 one-way and echo messages/s and a 1 MB message; None when it cannot run."""
    count = options.count(1000, 400)
    echoes = options.count(300, 120)
    plan: list[list[Any]] = []
    for _ in range(options.repeat):
        plan += [["one", count, ONE_WAY_WINDOW], ["echo", echoes, ECHO_WINDOW],
                 ["big", 1_000_000 // options.scale]]
    progress(f"RAET 0.6.8: one-way {count:,}, echo {echoes:,}, 1 MB"
             + (f" (x{options.repeat})" if options.repeat > 1 else ""))
    results = run_plan(plan, options.cap, cpus)
    if results is None:
        return None

    def rates(step: str) -> list[float | None]:
        return [None if r["seconds"] is None else r["count"] / r["seconds"]
                for r in results if r["step"] == step]

    def middle(values: list[float | None]) -> float | None:
        done = [v for v in values if v is not None]
        return median(done) if done and len(done) == len(values) else None

    ones = [r for r in results if r["step"] == "one" and r["seconds"] is not None]
    cpu: dict[str, float] = {}
    for side in ("sender", "receiver"):
        spent = [r[f"cpu_{side}"] / r["count"] for r in ones if r.get(f"cpu_{side}") is not None]
        if spent and len(spent) == len(ones):
            cpu[f"one_way_cpu_{side}_us"] = median(spent) * 1e6
    return {
        **cpu,
        "one_way_msgs_per_s": middle(rates("one")),
        "echo_msgs_per_s": middle(rates("echo")),
        "one_mb_s": middle([r["seconds"] for r in results if r["step"] == "big"]),
        "one_way_window": ONE_WAY_WINDOW, "echo_window": ECHO_WINDOW, "cap_s": options.cap,
    }
