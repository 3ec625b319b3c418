"""The demo's last step: the Spark pipeline over the estates' journals, and what it found."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PipelineFigures", "pipeline_json", "pipeline_lines", "run_pipeline_over"]


@dataclass(frozen=True, slots=True)
class PipelineFigures:
    """What the pipeline found in the demo's journals."""

    report: Path
    records: int
    skipped_lines: int
    sources: int
    """Sources with ``_seq`` numbers (the audited streams)."""
    complete_sources: int
    missing: int
    duplicates: int
    out_of_order: int
    seconds: float


def run_pipeline_over(journals: Path, report: Path, spark: Any | None) -> PipelineFigures | str:
    """Run the pipeline over every journal directory; its figures, or why it could not run."""
    directories = sorted(path for path in journals.iterdir() if path.is_dir()) \
        if journals.is_dir() else []
    if not directories:
        return "no journals were written"
    try:
        from raetlike.pipeline import (  # noqa: PLC0415 - PySpark is optional
            PipelineOptions,
            run_pipeline,
            spark_session,
        )
    except ImportError as exc:
        return f"PySpark is not installed (pip install 'raetlike[spark]'): {exc}"
    logging.getLogger("py4j").setLevel(max(logging.WARNING, logging.getLogger().level))
    started = time.monotonic()
    session = spark
    try:
        if session is None:
            session = spark_session()
        result = run_pipeline(PipelineOptions(journals=tuple(directories), out=report), session)
    except Exception as exc:  # noqa: BLE001 - Spark/Java fail in many ways; the demo goes on
        return f"{type(exc).__name__}: {_first_line(str(exc))}"
    finally:
        if spark is None and session is not None:
            with contextlib.suppress(Exception):
                session.stop()
    audit = json.loads((result.report.parent / "summary.json").read_text()).get("audit", [])
    return PipelineFigures(
        report=result.report, records=result.records, skipped_lines=result.skipped_lines,
        sources=len(audit), complete_sources=sum(1 for row in audit if row["complete"]),
        missing=sum(int(row["missing"]) for row in audit),
        duplicates=sum(int(row["duplicates"]) for row in audit),
        out_of_order=sum(int(row["out_of_order"]) for row in audit),
        seconds=time.monotonic() - started)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def pipeline_json(analysed: PipelineFigures | str | None) -> dict[str, Any] | None:
    """The pipeline's part of ``--json``: None when skipped, else ok and its figures or error."""
    if analysed is None:
        return None
    if isinstance(analysed, str):
        return {"ok": False, "error": analysed}
    return {"ok": True, "report": str(analysed.report), "records": analysed.records,
            "skipped_lines": analysed.skipped_lines, "audited_sources": analysed.sources,
            "complete_sources": analysed.complete_sources, "missing": analysed.missing,
            "duplicates": analysed.duplicates, "out_of_order": analysed.out_of_order,
            "seconds": round(analysed.seconds, 2)}


def pipeline_lines(analysed: PipelineFigures | str | None) -> str:
    """The pipeline's lines under the table: skipped, why it did not run, or its audit."""
    if analysed is None:
        return "pipeline: skipped (--no-pipeline)\n"
    if isinstance(analysed, str):
        return f"pipeline: not run: {analysed}\n"
    verdict = ("complete" if analysed.complete_sources == analysed.sources
               else f"{analysed.sources - analysed.complete_sources} incomplete")
    return (f"journal  {analysed.records} records ({analysed.skipped_lines} skipped lines), "
            f"pipeline {analysed.seconds:.1f} s\n"
            f"audit    {analysed.sources} numbered streams: {analysed.missing} missing, "
            f"{analysed.duplicates} duplicates, {analysed.out_of_order} out of order "
            f"-> {verdict}\n")

