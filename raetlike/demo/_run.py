"""``raetlike demo`` from start to end: processes, traffic, pipeline, report, exit status."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from raetlike.demo._errors import DemoError
from raetlike.demo._figures import DemoFigures
from raetlike.demo._pipeline import (
    PipelineFigures,
    pipeline_json,
    pipeline_lines,
    run_pipeline_over,
)
from raetlike.demo._processes import Children
from raetlike.demo._report import Screen, table
from raetlike.demo._startup import start
from raetlike.demo._traffic import Plan, traffic

__all__ = ["run_demo"]


def run_demo(out: TextIO, *, quick: bool = False, as_json: bool = False,
             out_dir: Path | None = None, pipeline: bool = True,
             spark: Any | None = None) -> int:
    """Run the demo, writing what happens and a final table to ``out``.

    The estates journal into ``out_dir/journal`` (``out_dir`` None: a new
    temporary directory that is kept); unless ``pipeline`` is False the Spark
    pipeline then writes ``out_dir/report`` (on ``spark`` if given, a
    SparkSession).  Returns 0 when everything was delivered (a pipeline that
    cannot run is reported in one line, not a failure); raises
    :class:`DemoError` with the reason otherwise (130 after Ctrl-C, once
    everything is cleaned up).
    """
    started = time.monotonic()
    screen = Screen(out, live=out.isatty() and not as_json)
    say = (lambda _text: None) if as_json else screen.line
    plan = Plan.of(quick=quick)
    figures = DemoFigures()
    kept = _output_directory(out_dir)
    journals = kept / "journal"
    with tempfile.TemporaryDirectory(prefix="raetlike-demo-") as temp:
        base = Path(temp)
        children = Children(base, journals)
        try:
            dirs = start(children, base, say, quick=quick)
            say(f"traffic for about {plan.seconds:g} s: routed messages yard to yard, "
                "bus events and requests, SP surveys")
            asyncio.run(traffic(dirs, plan, figures, screen.show))
            screen.line(f"traffic done: {figures.progress()}")
        except KeyboardInterrupt:
            children.stop_all()
            screen.line(f"interrupted: every process stopped, temporary files removed "
                        f"(journals kept in {journals})")
            return 130
        finally:
            statuses = children.stop_all()
    for name, status in statuses.items():
        if status:
            figures.problems.append(f"{name} exited with status {status}")
    written = sorted(path.name for path in journals.iterdir()) if journals.is_dir() else []
    say(f"journals of {', '.join(written) or 'no estate'} in {journals}")
    analysed: PipelineFigures | str | None = None
    if pipeline:
        say("running the Spark pipeline over the journals (10-60 s with Spark's start)")
        try:
            analysed = run_pipeline_over(journals, kept / "report", spark)
        except KeyboardInterrupt:
            screen.line(f"pipeline interrupted; journals kept in {journals}")
            return 130
    rows = [kind.row(name) for name, kind in figures.kinds.items()]
    seconds = time.monotonic() - started
    if as_json:
        out.write(json.dumps({"ok": figures.complete() and not figures.problems,
                              "seconds": round(seconds, 2), "retries": figures.retries,
                              "traffic": rows, "problems": figures.problems,
                              "journals": str(journals),
                              "pipeline": pipeline_json(analysed)}) + "\n")
    else:
        out.write(table(rows))
        out.write(pipeline_lines(analysed))
        out.write(f"retries (bus requests resent): {figures.retries}; "
                  f"{len(statuses)} processes stopped; demo took {seconds:.1f} s\n")
        if isinstance(analysed, PipelineFigures):
            out.write(f"report: {analysed.report}\n")
    out.flush()
    if not figures.complete():
        missing = [f"{r['kind']} {r['done']}/{r['expected']}" for r in rows
                   if r["done"] < r["expected"]]
        raise DemoError("not everything was delivered: " + ", ".join(missing)
                        + "".join(f"; {p}" for p in figures.problems[:3]))
    if figures.problems:
        raise DemoError("; ".join(figures.problems[:3]))
    return 0


def _output_directory(out_dir: Path | None) -> Path:
    """``out_dir`` (created), or a new temporary directory the demo does not remove."""
    if out_dir is None:
        return Path(tempfile.mkdtemp(prefix="raetlike-demo-out-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir
