"""Where a fast-mode burst just after the allow spends its time, burst by burst (issue 16).

Each run is a fresh client interpreter and a fresh peer (the bench's ``serve_estate``),
pinned to CPUs 0 and 1 as the bench pins them.  The client joins, is allowed, and
sends four bursts of 5,000 with the bench's ``Client.one_way``.  For each burst it
records, per side, the CPU spent and the time spent runnable but waiting for a CPU
(``/proc/<pid>/task/*/schedstat``), minor page faults (``/proc/<pid>/stat``), and on
the client the CPU inside garbage collections (``gc.callbacks``).  The summary gives
the medians per burst over the runs, and the median over runs of burst 0 against
the later three: what the first burst pays that later ones do not.

Variants (alternated run by run, so the machine's drift falls on all):

- ``plain``: as the bench;
- ``warm``: the client process first sends a burst on another link, to another
  fresh peer (is the cost the process's, or the new link's?);
- ``link``: a first client of this process bursts to the peer, then a new one (a new
  estate, a new link) is measured: both processes warm, as the bench's "a burst of
  5,000, new";
- ``collect``: ``gc.collect()`` in the client after its allow and in the peer before
  it serves;
- ``freeze``: ``gc.collect(); gc.freeze()`` there.

    python tools/burst_probe.py --runs 8 plain warm collect freeze

``--profile N OUT`` instead records one plain run's burst N alone with ``perf record``
(cpu-clock, call graphs) into OUT, enabled and disabled around that burst through
perf's control FIFOs; compare burst 0 with burst 1 by ``perf report -i OUT
--no-children --sort dso,sym``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BURSTS = 4
# the peer with a collection (and a freeze) after its set-up, before it serves
_SETTLED_PEER = ("import gc; from raetlike.bench import _raetlike as r; run = r._Pump.run\n"
                 "def settled(self, *a, **k):\n"
                 "    gc.collect(); {freeze}r._Pump.run = run; return run(self, *a, **k)\n"
                 "r._Pump.run = settled; r.serve_estate(True)")


def _sched(pid: int) -> tuple[float, float]:
    """CPU seconds and run-queue seconds of every thread of ``pid``."""
    cpu = wait = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
            fields = stat.read().split()
        cpu, wait = cpu + int(fields[0]), wait + int(fields[1])
    return cpu / 1e9, wait / 1e9


def _faults(pid: int) -> int:
    """Minor page faults of ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def _perf(fifos: str | None, command: str) -> None:
    """Tell a ``perf record --control`` to enable or disable, and wait for its ack."""
    if fifos is not None:
        control, ack = fifos.split(",")
        Path(control).write_text(command + "\n")
        with open(ack, encoding="ascii") as answer:
            answer.readline()


def _one(variant: str, count: int, fifos: str | None = None,
         profiled: int = -1) -> list[dict[str, float]]:
    """A fresh client's bursts (this process is the client; burst ``profiled`` under perf)."""
    from raetlike.bench._common import pin, spawn, stop  # noqa: PLC0415 - child mode only
    from raetlike.bench._raetlike import Client  # noqa: PLC0415

    collecting = [0.0, 0.0]  # CPU in collections, the start of the current one

    def timed(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    gc.callbacks.append(timed)
    pin(0, 0)
    peers = []

    def peer() -> tuple[Any, int]:
        code = "from raetlike.bench import serve_estate; serve_estate(True)"
        if variant in ("collect", "freeze"):
            code = _SETTLED_PEER.format(freeze="gc.freeze(); " if variant == "freeze" else "")
        process, line = spawn(code, 1)
        peers.append(process)
        return process, int(line)

    try:
        if variant == "warm":
            _, port = peer()
            other = Client(port, True, name="warmup")
            other.one_way(count)
            other.close()
        process, port = peer()
        if variant == "link":
            first = Client(port, True, name="first")
            first.one_way(count)
            first.close()
        client = Client(port, True)
        if variant in ("collect", "freeze"):
            gc.collect()
            if variant == "freeze":
                gc.freeze()
        rows = []
        for index in range(BURSTS):
            me, them = os.getpid(), process.pid
            if index == profiled:
                _perf(fifos, "enable")
            before = (*_sched(me), _faults(me), *_sched(them), _faults(them))
            collecting[0] = 0.0
            wall = client.one_way(count)
            after = (*_sched(me), _faults(me), *_sched(them), _faults(them))
            if index == profiled:
                _perf(fifos, "disable")
            spent = [b - a for a, b in zip(before, after, strict=True)]
            rows.append({"wall": wall * 1e3, "cpu_c": spent[0] * 1e3, "wait_c": spent[1] * 1e3,
                         "flt_c": spent[2], "cpu_p": spent[3] * 1e3, "wait_p": spent[4] * 1e3,
                         "flt_p": spent[5], "gc_c": collecting[0] * 1e3})
        client.close()
    finally:
        for process in peers:
            stop(process)
    return rows


def _record(index: int, out: str, count: int) -> int:
    """One plain run under ``perf record``, sampling burst ``index`` only."""
    if not 0 <= index < BURSTS:
        sys.exit(f"burst_probe: --profile N: N must be 0 to {BURSTS - 1}")
    with tempfile.TemporaryDirectory() as scratch:
        control, ack = f"{scratch}/control", f"{scratch}/ack"
        os.mkfifo(control)
        os.mkfifo(ack)
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "20000", "-g",
                        "-D", "-1", "--control", f"fifo:{control},{ack}", "-o", out,
                        sys.executable, __file__, "--one", "plain", "--count", str(count),
                        "--fifos", f"{control},{ack}", "--profiled", str(index)],
                       check=True, stdout=subprocess.DEVNULL)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*",
                        help="plain (default), warm, link, collect, freeze")
    parser.add_argument("--runs", type=int, default=8, help="fresh processes per variant")
    parser.add_argument("--count", type=int, default=5000, help="messages per burst")
    parser.add_argument("--profile", nargs=2, metavar=("N", "OUT"),
                        help="record burst N of one plain run with perf into OUT")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--fifos", help=argparse.SUPPRESS)
    parser.add_argument("--profiled", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one, args.count, args.fifos, args.profiled)))
        return 0
    if args.profile:
        return _record(int(args.profile[0]), args.profile[1], args.count)
    if args.runs < 1 or args.count < 1:
        parser.error("--runs and --count must be at least 1")
    args.variants = args.variants or ["plain"]
    unknown = set(args.variants) - {"plain", "warm", "link", "collect", "freeze"}
    if unknown:
        parser.error(f"unknown variant {sorted(unknown)[0]!r}: "
                     "plain, warm, link, collect or freeze")
    results: dict[str, list[list[dict[str, float]]]] = {v: [] for v in args.variants}
    for run in range(args.runs):
        for variant in args.variants if run % 2 == 0 else args.variants[::-1]:
            out = subprocess.run(
                [sys.executable, __file__, "--one", variant, "--count", str(args.count)],
                capture_output=True, text=True, check=True)
            results[variant].append(json.loads(out.stdout))
    keys = ["wall", "cpu_c", "wait_c", "flt_c", "gc_c", "cpu_p", "wait_p", "flt_p"]
    for variant, runs in results.items():
        print(f"{variant} ({len(runs)} runs), medians (ms; faults as counts); "
              "c = client (sender), p = peer (receiver), wait = runnable, not running")
        print("burst " + " ".join(f"{key:>7}" for key in keys))
        for index in range(BURSTS):
            print(f"{index:5} " + " ".join(
                f"{statistics.median(run[index][key] for run in runs):7.2f}" for key in keys))

        def excess(key: str, runs: list[list[dict[str, float]]] = runs) -> float:
            return statistics.median(
                run[0][key] - statistics.median(row[key] for row in run[1:]) for run in runs)

        print("  burst 0 minus the later ones (median over runs): " + ", ".join(
            f"{key} {excess(key):+.2f}" for key in ("wall", "cpu_c", "gc_c", "flt_c",
                                                    "cpu_p", "flt_p")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
