"""The burst part of ``raetlike bench`` alone, repeated in fresh processes: fast mode's
bursts of 5,000 just after an allow beside the stream (issue 16).

Each run is a fresh interpreter (a fresh peer too) running
:func:`raetlike.bench._raetlike.measure_bursts`, pinned as the bench pins, and
prints its figures; the summary gives the medians over the runs of

- ``new link``: a burst on a new link in warm processes (median of ``--repeat``), the
  bench's "a burst of 5,000, new link";
- ``first``: the processes' first burst (their one-time costs included);
- ``stream``: the one-way stream of 20,000 (5,000 with ``--quick``) on the first link;

and of the ratios of the first two to the stream.  ``--against DIR`` alternates the
runs (ABBA) with a second source tree (its ``raetlike``, ``road`` and ``lane``
packages first on the path, e.g. a worktree of another commit with its build; it needs
``measure_bursts``): a before/after on a shared machine.

    python tools/bench_burst.py --runs 8
    python tools/bench_burst.py --runs 8 --against /path/to/other/tree
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_ONE = """
import json
from raetlike.bench._common import BenchOptions, pinned
from raetlike.bench._raetlike import measure_bursts
from raetlike._native import build
options = BenchOptions(quick={quick}, repeat={repeat})
with pinned(True) as cpus:
    figures = measure_bursts(options, cpus=cpus)
print(json.dumps({{**figures, "build": build()}}))
"""


def _run(tree: Path | None, quick: bool, repeat: int) -> dict[str, float]:
    """One fresh interpreter's figures (from ``tree`` when given)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", _ONE.format(quick=quick, repeat=repeat)],
        capture_output=True, text=True, env=env, check=True, cwd=tree or Path.cwd())
    figures: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return figures


def _summary(name: str, runs: list[dict[str, float]]) -> str:
    def middle(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    def ratio(key: str) -> float:
        return statistics.median(run[key] / run["one_way_msgs_per_s"] for run in runs)

    return (f"{name} ({len(runs)} runs, {runs[0]['build']}): medians: new link "
            f"{middle('burst_msgs_per_s'):,.0f}, first {middle('first_burst_msgs_per_s'):,.0f}, "
            f"stream {middle('one_way_msgs_per_s'):,.0f} msgs/s; new link / stream "
            f"{ratio('burst_msgs_per_s'):.2f}, "
            f"first / stream {ratio('first_burst_msgs_per_s'):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="fresh processes per tree")
    parser.add_argument("--repeat", type=int, default=3, help="bursts and streams per run")
    parser.add_argument("--quick", action="store_true", help="a stream of 5,000, as --quick")
    parser.add_argument("--against", type=Path, help="a second source tree, alternated")
    args = parser.parse_args()
    if args.runs < 1 or args.repeat < 1:
        parser.error("--runs and --repeat must be at least 1")
    if args.against is not None and not (args.against / "raetlike").is_dir():
        parser.error(f"--against {args.against}: no raetlike package there")
    trees: list[Path | None] = [None] if args.against is None else [None, args.against]
    results: dict[Path | None, list[dict[str, float]]] = {tree: [] for tree in trees}
    for run in range(args.runs):
        for tree in trees if run % 2 == 0 else trees[::-1]:
            figures = _run(tree, args.quick, args.repeat)
            results[tree].append(figures)
            print(f"{'this tree' if tree is None else tree}: new link "
                  f"{figures['burst_msgs_per_s']:,.0f}, first "
                  f"{figures['first_burst_msgs_per_s']:,.0f}, stream "
                  f"{figures['one_way_msgs_per_s']:,.0f}", flush=True)
    for tree, runs in results.items():
        print(_summary("this tree" if tree is None else str(tree), runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
