"""``raetlike bench``: raw UDP, pyzmq+CURVE, fast mode, RAET mode and RAET 0.6.8 side by side,
then lanes: raw UXD, pyzmq ipc, lane pages and lane batches.

Every peer is a separate process on loopback.  Each figure is the median of
``repeat`` runs.  :func:`run_bench` returns a JSON-ready mapping (with the
goals judged); :func:`format_table` prints it.  docs/performance.md holds a
run and describes each scenario's scheme.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from raetlike._native import build
from raetlike.bench._common import BenchOptions, Progress, StatusLine, pinned, silent
from raetlike.bench._goals import goals, ratios
from raetlike.bench._lane import measure_lanes
from raetlike.bench._raet068 import measure_raet_068
from raetlike.bench._raetlike import joins, measure_raetlike, serve_estate
from raetlike.bench._raw import measure_raw, serve_udp
from raetlike.bench._table import format_table
from raetlike.bench._zmq import available as zmq_available
from raetlike.bench._zmq import measure_zmq, serve_zmq

__all__ = ["BenchOptions", "Progress", "StatusLine", "format_table", "joins", "main",
           "run_bench", "serve_estate", "serve_udp", "serve_zmq"]

_joins = joins  # the name older scripts use
log = logging.getLogger(__name__)


def _attempt(measure: Callable[[], Any], what: str) -> Any:
    """A scenario's figures, or a string saying why it failed (the rest still runs)."""
    try:
        return measure()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        log.warning("bench: %s failed: %s", what, exc)
        return f"failed: {exc}"


def run_bench(options: BenchOptions, progress: Progress = silent) -> dict[str, Any]:
    """Measure everything; a JSON-ready mapping of scenario -> figures, plus the goals.

    ``progress`` is told the name of each measurement as it starts.  A scenario
    that cannot run, or fails, is a string saying why; the others still run.
    """
    with pinned(options.pin) as cpus:
        result: dict[str, Any] = {
            "raw_udp": _attempt(lambda: measure_raw(options, progress, cpus), "raw UDP"),
            "pyzmq_curve": (_attempt(lambda: measure_zmq(options, progress, cpus), "pyzmq+CURVE")
                            if zmq_available() else "skipped: pyzmq not installed"),
            "fast": _attempt(lambda: measure_raetlike(options, True, progress, cpus), "fast mode"),
            "raet_mode": _attempt(lambda: measure_raetlike(options, False, progress, cpus),
                                  "RAET mode"),
            "raet_0_6_8": (_attempt(lambda: measure_raet_068(options, progress, cpus),
                                    "RAET 0.6.8") or "skipped: RAET 0.6.8 not runnable"),
            "lanes": _attempt(lambda: measure_lanes(options, progress, cpus), "lanes"),
            "repeat": options.repeat,
            "quick": options.quick,
            "pinned": cpus.peer is not None,
            # compiled (mypyc) or pure Python: every process of the run imports the same
            "build": build(),
        }
    result["goals"] = [goal.as_json() for goal in goals(result)]
    result["ratios"] = {ratio.name: ratio.value for ratio in ratios(result)}
    return result


def main(quick: bool, as_json: bool, repeat: int | None, estates: int | None,
         pin: bool = True) -> int:
    """The ``raetlike bench`` command."""
    options = BenchOptions(quick=quick, repeat=repeat or (1 if quick else 3),
                           estates=estates or (200 if quick else 1000), pin=pin)
    status = StatusLine(sys.stdout)
    progress: Progress = silent if as_json else status
    try:
        result = run_bench(options, progress)
    finally:
        status.clear()
    sys.stdout.write((json.dumps(result, indent=2) if as_json else format_table(result)) + "\n")
    return 0
