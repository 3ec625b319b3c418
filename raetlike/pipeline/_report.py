"""The human report: an HTML page with inline SVG plots, the plots as files, a JSON summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from raetlike.pipeline._svg import bar_chart, line_chart
from raetlike.pipeline._tables import LATENCY_EDGES_MS

__all__ = ["ReportData", "write_report"]

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReportData:
    """What the report shows, already collected from Spark (small)."""

    journals: list[str]
    """The journal directories read."""
    records: int
    """Valid records analysed."""
    skipped_lines: int
    """Lines that were not whole records (torn last records)."""
    latency: Row
    """Overall latency: messages, p50_ms, p90_ms, p99_ms, max_ms."""
    histogram: list[Row]
    """Latency histogram rows: bucket, messages."""
    rate: list[Row]
    """Rate rows: window_start (datetime), messages, messages_per_second."""
    estates: list[Row]
    """Per-estate rows (see the estates table)."""
    audit: list[Row]
    """Audit summary rows, per source."""
    missing: list[Row] = field(default_factory=list)
    """The first gaps (source, first_missing, last_missing, missing)."""
    duplicates: list[Row] = field(default_factory=list)
    """The first duplicates (source, sequence, copies, nodes)."""
    window_seconds: float = 60.0
    """The rate window."""


def _bucket_label(bucket: int) -> str:
    if bucket < 0:
        return "<0"
    low = LATENCY_EDGES_MS[bucket]
    return f"≥{low:g}"


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(row.get(c)))}</td>" for c in columns)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _time_label(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S")


def _charts(data: ReportData) -> tuple[str, str]:
    counts = {int(r["bucket"]): float(r["messages"]) for r in data.histogram}
    buckets = range(min(counts), max(counts) + 1) if counts else range(0)  # gaps shown as 0
    latency_svg = bar_chart(
        [_bucket_label(bucket) for bucket in buckets],
        [counts.get(bucket, 0.0) for bucket in buckets],
        title="Latency distribution (received - sent)", x_label="latency bucket (ms)",
        y_label="messages")
    points = [(r["window_start"].replace(tzinfo=UTC).timestamp()
               if isinstance(r["window_start"], datetime) else float(r["window_start"]),
               float(r["messages_per_second"])) for r in data.rate]
    rate_svg = line_chart(points, title=f"Delivered messages/s ({data.window_seconds:g} s windows)",
                          x_label="time (UTC)", y_label="messages/s", x_format=_time_label)
    return latency_svg, rate_svg


_STYLE = ("body{font-family:sans-serif;margin:2em;max-width:60em}"
          "table{border-collapse:collapse;margin:.5em 0}"
          "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
          ".bad{color:#b00}.good{color:#070}")


def write_report(data: ReportData, out: Path) -> Path:
    """Write ``report.html``, ``latency.svg``, ``rate.svg`` and ``summary.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    latency_svg, rate_svg = _charts(data)
    (out / "latency.svg").write_text(latency_svg)
    (out / "rate.svg").write_text(rate_svg)
    missing = sum(int(r["missing"]) for r in data.audit)
    duplicates = sum(int(r["duplicates"]) for r in data.audit)
    if data.records == 0:
        verdict = "<p class=bad>No records: nothing was audited.</p>"
    elif missing == 0 and duplicates == 0:
        verdict = "<p class=good>Every sequenced message arrived exactly once.</p>"
    else:
        verdict = f"<p class=bad>{missing} missing and {duplicates} duplicate message(s).</p>"
    lat = data.latency
    html = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>raetlike delivery report</title>
<style>{_STYLE}</style></head><body>
<h1>raetlike delivery report</h1>
<p>{data.records} records from {len(data.journals)} journal(s): {escape(", ".join(data.journals))}.
{data.skipped_lines} line(s) skipped (torn or damaged records).</p>
<h2>Delivery audit</h2>
{verdict}
{_table(data.audit, ["source", "records", "distinct", "first", "last", "missing", "duplicates",
                     "out_of_order", "complete"])}
<h3>Missing (first {len(data.missing)})</h3>
{_table(data.missing, ["source", "first_missing", "last_missing", "missing"])}
<h3>Duplicates (first {len(data.duplicates)})</h3>
{_table(data.duplicates, ["source", "sequence", "copies", "nodes"])}
<h2>Latency</h2>
<p>{lat.get("messages", 0)} timed messages: p50 {_cell(lat.get("p50_ms"))} ms,
p90 {_cell(lat.get("p90_ms"))} ms, p99 {_cell(lat.get("p99_ms"))} ms,
max {_cell(lat.get("max_ms"))} ms (sender and receiver clocks may differ).</p>
{latency_svg}
<h2>Rate over time</h2>
{rate_svg}
<h2>Estates</h2>
{_table(data.estates, ["estate", "messages_sent", "bytes_sent", "messages_received",
                       "bytes_received", "received_p50_ms", "received_p99_ms"])}
<p>Tables (Parquet) are under <code>tables/</code> beside this page.</p>
</body></html>
"""
    path = out / "report.html"
    path.write_text(html)
    summary = {key: value for key, value in asdict(data).items() if key not in {"rate"}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return path
