"""The human report: one self-contained HTML page with inline SVG plots, the
plots as files, and ``summary.json`` with every figure the page shows.

The page reads top to bottom: a header (raetlike's version, when it was
made, the journals and the time range they cover), the delivery audit's
verdict, the figures by kind and by estate pair (latency p50/p90/p99,
resends), each with a plot of its quantiles, the latency histogram and the
rate over time, and the per-source audit with its gaps and duplicates.
Numbers are shown in human units (``1.2 MiB``, ``850 µs``, ``12.5k/s``); the
JSON keeps the raw values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from raetlike import __version__
from raetlike.pipeline import _units as units
from raetlike.pipeline._plots import latency_plot, quantile_plot, rate_plot
from raetlike.pipeline._tables import LATENCY_EDGES_MS

__all__ = ["ReportData", "rate_series", "write_report"]

Row = dict[str, Any]

REPORT_ROWS = 50
"""At most this many gaps and duplicates are listed (the tables hold them all)."""
Cell = Callable[[Any], str]


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
    kinds: list[Row] = field(default_factory=list)
    """Per kind: messages, bytes, timed, p50/p90/p99/max_ms, segments, resends."""
    pairs: list[Row] = field(default_factory=list)
    """Per (source_estate, destination_estate): as ``kinds``."""
    first_received: float | None = None
    """The earliest receive time analysed (epoch seconds)."""
    last_received: float | None = None
    """The latest receive time analysed (epoch seconds)."""
    resends: Row = field(default_factory=dict)
    """``resends`` (resend requests in all) and ``messages_with_resends``."""


def rate_series(data: ReportData) -> tuple[list[float], list[int], list[float]]:
    """Window starts (epoch s) from the first window to the last, with empty windows as 0.

    Returns ``(edges, messages, messages_per_second)``; window ``i`` is
    ``[edges[i], edges[i] + window_seconds)``.
    """
    width = data.window_seconds
    counts: dict[int, int] = {}
    for row in data.rate:
        start = row["window_start"]
        epoch = (start.replace(tzinfo=UTC).timestamp() if isinstance(start, datetime)
                 else float(start))
        counts[round(epoch / width)] = counts.get(round(epoch / width), 0) + int(row["messages"])
    if not counts:
        return [], [], []
    slots = range(min(counts), max(counts) + 1)
    edges = [slot * width for slot in slots]
    messages = [counts.get(slot, 0) for slot in slots]
    return edges, messages, [n / width for n in messages]


def _bucket_label(bucket: int) -> str:
    if bucket < 0:
        return "< 0 (clocks)"
    low = LATENCY_EDGES_MS[bucket]
    if bucket + 1 < len(LATENCY_EDGES_MS):
        high = units.duration_ms(LATENCY_EDGES_MS[bucket + 1])
        return f"{units.duration_ms(low) if low else '0'}\u2013{high}"
    return f"≥ {units.duration_ms(low)}"


@dataclass(frozen=True, slots=True)
class _Plot:
    svg: str
    """The SVG document."""
    points: int
    """Points (markers or bars) it draws."""


def _pair_label(row: Row) -> str:
    return f"{row['source_estate']} → {row['destination_estate']}"


PLOT_LABEL = 60
"""The most characters of a plot's row label (a longer one is cut, with "…")."""


def _short(text: str) -> str:
    """A plot's row label: at most :data:`PLOT_LABEL` characters, a character no font draws
    (a control, such as a NUL a journal line may hold) shown as U+FFFD."""
    text = text if len(text) <= PLOT_LABEL else text[:PLOT_LABEL - 1] + "…"
    return text if text.isprintable() else "".join(
        char if char.isprintable() else "\ufffd" for char in text)


def _busiest(rows: Sequence[Row]) -> list[Row]:
    """The :data:`REPORT_ROWS` rows with the most messages (a page and a plot of every pair of
    a hostile journal's thousands of estates would take minutes to lay out); the tables
    under ``tables/`` hold them all."""
    return sorted(rows, key=lambda row: -int(row.get("messages") or 0))[:REPORT_ROWS]


def _more(shown: int, rows: int, what: str, table: str) -> str:
    if shown >= rows:
        return ""
    return (f"<p class='note'>The {shown} {what} with the most messages of {units.count(rows)};"
            f" all are in tables/{table}.</p>")


def _quantiles(title: str, rows: Sequence[Row], label: Callable[[Row], str]) -> _Plot:
    timed = [row for row in rows if row.get("p50_ms") is not None]
    svg = quantile_plot(title, [_short(label(row)) for row in timed],
                        [(float(row["p50_ms"]), float(row["p90_ms"]), float(row["p99_ms"]))
                         for row in timed])
    return _Plot(svg, 3 * len(timed))


def _plots(data: ReportData) -> dict[str, _Plot]:
    """Each plot by name (the name of its SVG file and its figure's id on the page)."""
    counts = {int(r["bucket"]): int(r["messages"]) for r in data.histogram}
    buckets = range(min(counts), max(counts) + 1) if counts else range(0)  # gaps shown as 0
    latency_svg = latency_plot([_bucket_label(b) for b in buckets],
                               [counts.get(b, 0) for b in buckets])
    edges, _, per_second = rate_series(data)
    return {
        "kinds": _quantiles("Latency by kind", data.kinds, lambda row: str(row["kind"])),
        "pairs": _quantiles("Latency by estate pair", _busiest(data.pairs), _pair_label),
        "latency": _Plot(latency_svg, len(buckets)),
        "rate": _Plot(rate_plot(edges, per_second, data.window_seconds), len(edges)),
    }


def _table(rows: Sequence[Row], columns: Sequence[tuple[str, str, Cell]]) -> str:
    """An HTML table of ``rows``; ``columns`` are (key, heading, formatter)."""
    head = "".join(f"<th>{escape(title)}</th>" for _, title, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(show(row.get(key)))}</td>" for key, _, show in columns)
        + "</tr>" for row in rows)
    return (f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table></div>")


def _text(value: Any) -> str:
    if value is None:
        return units.NONE
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


_LATENCY_COLUMNS: list[tuple[str, str, Cell]] = [
    ("messages", "messages", units.count), ("bytes", "bytes", units.size),
    ("timed", "timed", units.count),
    ("p50_ms", "p50", units.duration_ms), ("p90_ms", "p90", units.duration_ms),
    ("p99_ms", "p99", units.duration_ms), ("max_ms", "max", units.duration_ms),
    ("resends", "resends", units.count),
    ("messages_with_resends", "resent", units.count),
]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;padding:0 1em}
header{border-bottom:1px solid #ddd;margin-bottom:1em}
header p{margin:.2em 0;color:#555}
.cards{display:flex;flex-wrap:wrap;gap:.8em;margin:1em 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:9em}
.card b{display:block;font-size:1.4em}
table{border-collapse:collapse;margin:.5em 0 1.2em}
.wide{overflow-x:auto}
td,th{border-bottom:1px solid #e4e4e4;padding:.25em .55em;text-align:right;white-space:nowrap}
th{background:#f6f6f6}
td:first-child,th:first-child{text-align:left}
.verdict{font-size:1.15em;font-weight:600;padding:.5em .8em;border-radius:6px}
.good{background:#e7f6e7;color:#136313}.bad{background:#fbe9e9;color:#9b1111}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}
.note{color:#666;font-size:.9em}
"""


def _verdict(data: ReportData) -> str:
    if data.records == 0:
        return "<p class='verdict bad'>No records: nothing was audited.</p>"
    missing = sum(int(r["missing"]) for r in data.audit)
    duplicates = sum(int(r["duplicates"]) for r in data.audit)
    if not data.audit:
        return ("<p class='verdict bad'>No sequenced messages: there was nothing to check for "
                "losses or duplicates.</p>")
    if missing == 0 and duplicates == 0:
        return "<p class='verdict good'>Every sequenced message arrived exactly once.</p>"
    return (f"<p class='verdict bad'>{missing} missing and {duplicates} duplicate "
            f"message(s).</p>")


def _listing(title: str, rows: list[Row], messages: int,
             columns: list[tuple[str, str, Cell]], nothing: str) -> str:
    """A heading with how many messages the rows cover, then the rows (capped)."""
    if not rows:
        return f"<h3>{escape(title)}</h3><p>{escape(nothing)}</p>"
    shown = f"; the first {len(rows)} shown" if len(rows) >= REPORT_ROWS else ""
    heading = f"{title} ({units.count(messages)} message{'s' if messages != 1 else ''}{shown})"
    return f"<h3>{escape(heading)}</h3>{_table(rows, columns)}"


def _untimed_note(kinds: list[str]) -> str:
    if not kinds:
        return ""
    return (f"<p class='note'>No latency for {escape(', '.join(kinds))}: their senders do not "
            "record a send time (body key <code>_sent</code>).</p>")


def _span_text(span: float | None) -> str:
    return "" if span is None else f" ({escape(units.seconds(span))})"


def _figure(name: str, plot: _Plot) -> str:
    """A plot inline; ``data-points`` says how many points it draws (a browser test counts)."""
    return f"<figure class='plot' id='{name}' data-points='{plot.points}'>{plot.svg}</figure>"


def write_report(data: ReportData, out: Path, *, now: datetime | None = None) -> Path:
    """Write ``report.html``, the plots (``kinds.svg``, ``pairs.svg``, ``latency.svg``,
    ``rate.svg``) and ``summary.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    generated = now or datetime.now(UTC)
    plots = _plots(data)
    for name, plot in plots.items():
        (out / f"{name}.svg").write_text(plot.svg)
    edges, messages, per_second = rate_series(data)
    span = (None if data.first_received is None or data.last_received is None
            else data.last_received - data.first_received)
    lat = data.latency
    duplicates_total = sum(int(r["duplicates"]) for r in data.audit)
    missing_total = sum(int(r["missing"]) for r in data.audit)
    audit_rows = [{**r, "complete": units.flag(r.get("complete"))}
                  for r in sorted(data.audit, key=lambda r: (bool(r.get("complete")),
                                                             str(r["source"])))[:REPORT_ROWS]]
    pairs = [{**r, "pair": _pair_label(r)} for r in _busiest(data.pairs)]
    untimed = [str(r["kind"]) for r in data.kinds if not r.get("timed")]
    cards = [
        ("records", units.count(data.records)),
        ("time range", units.NONE if span is None else units.seconds(span)),
        ("latency p50", units.duration_ms(lat.get("p50_ms"))),
        ("latency p99", units.duration_ms(lat.get("p99_ms"))),
        ("resends", units.count(data.resends.get("resends", 0))),
        ("duplicate deliveries", units.count(duplicates_total)),
    ]
    html = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>raetlike delivery report</title><style>{_STYLE}</style></head><body>
<header><h1>raetlike delivery report</h1>
<p>Generated {escape(units.moment(generated.timestamp()))} by raetlike {escape(__version__)}.</p>
<p>{units.count(data.records)} records from {len(data.journals)} journal(s):
{escape(", ".join(data.journals))}; {units.count(data.skipped_lines)} line(s) skipped (torn or
damaged records).</p>
<p>Received from {escape(units.moment(data.first_received))} to
{escape(units.moment(data.last_received))}{_span_text(span)}.</p></header>
{_verdict(data)}
<div class="cards">{"".join(f"<div class=card>{escape(k)}<b>{escape(v)}</b></div>"
                            for k, v in cards)}</div>
<h2>By kind</h2>
{_table(data.kinds, [("kind", "kind", _text), *_LATENCY_COLUMNS])}
<p class="note">Latency is the receiver's clock minus the sender's, for messages that carry
their send time ("timed"); clocks on different hosts may differ. Resends are the resend
requests receivers made for missing segments ("resent": messages that needed any). A retry
shows here only if it arrived again, as a duplicate delivery (a message the journals hold
twice); a retry whose first copy was lost is seen only by its sender.</p>
{_untimed_note(untimed)}
{_figure("kinds", plots["kinds"])}
<h2>By estate pair</h2>
{_table(pairs, [("pair", "source → destination", _text), *_LATENCY_COLUMNS])}
{_more(len(pairs), len(data.pairs), "pairs", "pairs")}
{_figure("pairs", plots["pairs"])}
<h2>Latency</h2>
<p>{units.count(lat.get("messages", 0))} timed messages: p50 {units.duration_ms(lat.get("p50_ms"))},
p90 {units.duration_ms(lat.get("p90_ms"))}, p99 {units.duration_ms(lat.get("p99_ms"))},
max {units.duration_ms(lat.get("max_ms"))}.</p>
{_figure("latency", plots["latency"])}
<h2>Rate over time</h2>
<p>{units.count(sum(messages))} messages in {len(edges)} windows of
{units.seconds(data.window_seconds)}; the busiest window
{units.rate(max(per_second, default=0))}.</p>
{_figure("rate", plots["rate"])}
<h2>Delivery audit, per source</h2>
{_table(audit_rows, [("source", "source", _text), ("records", "records", units.count),
                     ("distinct", "distinct", units.count), ("first", "first", _text),
                     ("last", "last", _text), ("missing", "missing", units.count),
                     ("duplicates", "duplicates", units.count),
                     ("out_of_order", "out of order", units.count),
                     ("complete", "complete", _text)]) if data.audit else
  "<p>No sequenced messages.</p>"}
{"" if len(audit_rows) >= len(data.audit) else
 f"<p class='note'>{len(audit_rows)} of {units.count(len(data.audit))} sources, the incomplete "
 "first; all are in tables/audit_summary.</p>"}
{_listing("Missing", data.missing, missing_total,
          [("source", "source", _text), ("first_missing", "first", _text),
           ("last_missing", "last", _text), ("missing", "missing", units.count)],
          "None missing.")}
{_listing("Duplicates", data.duplicates, duplicates_total,
          [("source", "source", _text), ("sequence", "sequence", _text),
           ("copies", "copies", units.count), ("nodes", "journaled at", _text)],
          "No duplicates.")}
<h2>Estates</h2>
{_table(data.estates, [("estate", "estate", _text), ("messages_sent", "sent", units.count),
                       ("bytes_sent", "bytes sent", units.size),
                       ("messages_received", "received", units.count),
                       ("bytes_received", "bytes received", units.size),
                       ("received_p50_ms", "received p50", units.duration_ms),
                       ("received_p99_ms", "received p99", units.duration_ms)])}
<p class="note">The tables (Parquet) are under <code>tables/</code> beside this page, and every
figure above is in <code>summary.json</code>.</p>
</body></html>
"""
    path = out / "report.html"
    path.write_text(html)
    summary = {key: value for key, value in asdict(data).items() if key != "rate"}
    summary.update(
        version=__version__, generated=generated.isoformat(), time_range_seconds=span,
        rate={"window_seconds": data.window_seconds, "edges": edges, "messages": messages,
              "messages_per_second": per_second},
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return path
