"""The report's parts: window and tick choice, human units, the rate series, the plots' ticks
and points, and latency quantiles per kind and per pair (over a small real Spark run)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline import _tables as tables
from raetlike.pipeline import _units as units
from raetlike.pipeline._plots import latency_plot, quantile_plot, rate_plot, time_step
from raetlike.pipeline._report import ReportData, rate_series
from raetlike.pipeline._tables import WINDOW_STEPS, choose_window
from tests.journalkit import write_known_traffic
from tests.sparkkit import spark  # noqa: F401 - the session fixture


@pytest.mark.parametrize(("span", "width"), [
    (0.0, 0.01), (0.3, 0.01), (2.0, 0.05), (12.4, 0.5), (20.0, 0.5), (59.0, 1.0), (60.0, 2.0),
    (600.0, 15.0), (3600.0, 120.0), (86400.0, 1800.0), (7 * 86400.0, 10800.0),
])
def test_the_rate_window_fits_the_run_in_at_most_60_round_windows(span: float,
                                                                    width: float) -> None:
    assert choose_window(span) == width
    assert span / width + 1 <= 60
    assert width in WINDOW_STEPS


def test_a_very_long_run_still_gets_at_most_60_windows() -> None:
    span = 400 * 86400.0
    width = choose_window(span)
    assert span / width + 1 <= 60
    assert width % 86400 == 0  # whole days


@pytest.mark.parametrize("span", [1.0, 2.33, 7.0, 12.4, 45.0, 59.5, 61.0, 299.0, 1000.0,
                                  3599.0, 5000.0, 86399.0, 200_000.0])
@pytest.mark.parametrize("start", [1_700_000_000.0, 1_700_000_000.37, 1_700_000_059.99])
def test_the_plotted_series_has_between_24_and_60_windows_wherever_the_run_starts(
        span: float, start: float) -> None:
    width = choose_window(span)
    rows: list[dict[str, object]] = [{"window_start": (at // width) * width, "messages": 1}
                                     for at in (start, start + span)]
    edges, messages, _ = rate_series(_data(rows, width))
    assert 24 <= len(edges) <= 60, (span, width, len(edges))
    assert sum(messages) == 2


@pytest.mark.parametrize(("span", "step"), [(30.0, 5), (61.0, 10), (3100.0, 600),
                                            (7200.0, 900), (5.0, 1)])
def test_time_ticks_are_round_steps(span: float, step: float) -> None:
    assert time_step(span) == step
    assert span / step <= 8


def test_human_units() -> None:
    assert units.count(1234567) == "1,234,567"
    assert units.count(156.2) == "156.2"
    assert units.count(None) == units.NONE
    assert units.size(512) == "512 B"
    assert units.size(1536) == "1.5 KiB"
    assert units.size(5 * 1024 * 1024) == "5.0 MiB"
    assert units.duration_ms(0.085) == "85 µs"
    assert units.duration_ms(1.24) == "1.24 ms"
    assert units.duration_ms(250) == "250 ms"
    assert units.duration_ms(3200) == "3.2 s"
    assert units.seconds(245) == "4 min 5 s"
    assert units.seconds(3 * 3600 + 120) == "3 h 2 min"
    assert units.rate(850) == "850/s"
    assert units.rate(12500) == "12.5k/s"
    assert units.rate(1.5) == "1.5/s"
    assert units.flag(True) == "✓"
    assert units.flag(False) == "✗"
    assert units.moment(0) == "1970-01-01 00:00:00 UTC"


def _data(rate: list[dict[str, object]], window: float) -> ReportData:
    return ReportData(journals=[], records=0, skipped_lines=0, latency={}, histogram=[],
                      rate=rate, estates=[], audit=[], window_seconds=window)


def test_the_rate_series_runs_from_first_to_last_window_with_empty_ones_as_zero() -> None:
    start = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC).replace(tzinfo=None)
    rows: list[dict[str, object]] = [
        {"window_start": start, "messages": 10},
        {"window_start": start.replace(second=3), "messages": 4},
    ]
    edges, messages, per_second = rate_series(_data(rows, 1.0))
    first = datetime(2026, 1, 1, 10, tzinfo=UTC).timestamp()
    assert edges == [first, first + 1, first + 2, first + 3]
    assert messages == [10, 0, 0, 4]
    assert per_second == [10.0, 0.0, 0.0, 4.0]
    assert rate_series(_data([], 1.0)) == ([], [], [])
    _, halves, rates = rate_series(_data(rows[:1], 0.5))
    assert halves == [10]
    assert rates == [20.0]


def _tick_labels(svg: str, axis: str) -> list[str]:
    return re.findall(rf'<g id="{axis}tick_\d+">.*?<text[^>]*>([^<]*)</text>', svg, re.DOTALL)


def _round(value: float) -> bool:
    """1, 2, 2.5 or 5 times a power of ten (or 0)."""
    if value == 0:
        return True
    mantissa = value / 10 ** math.floor(math.log10(value))
    return any(math.isclose(mantissa, step) for step in (1, 2, 2.5, 5, 10))


def _evenly_round(values: list[float]) -> bool:
    """Equal steps of 1, 2, 2.5 or 5 times a power of ten, each value a multiple of it."""
    step = values[1] - values[0]
    return _round(step) and all(
        math.isclose(b - a, step) and math.isclose(v / step, round(v / step), abs_tol=1e-9)
        for a, b, v in zip(values, values[1:], values[1:], strict=False))


_SCALES = {"k/s": 1e3, "M/s": 1e6, "/s": 1.0, " µs": 1e-3, " ms": 1.0, " s": 1e3, "": 1.0}


def _number(label: str) -> float:
    """A tick label's value ('1.5k/s' -> 1500, '250 µs' -> 0.25 (ms), '2 s' -> 2000 (ms))."""
    match = re.fullmatch(r"([\d.,]+)(k/s|M/s|/s| µs| ms| s|)", label)
    assert match is not None, label
    return float(match.group(1).replace(",", "")) * _SCALES[match.group(2)]


@pytest.mark.parametrize("peak", [3.1, 156.2, 1_234.5, 98_765.4])
def test_rate_ticks_are_round_values_in_messages_per_second(peak: float) -> None:
    svg = rate_plot([0.0, 0.5, 1.0, 1.5], [peak / 3, peak, 0.0, peak / 7], 0.5)
    labels = _tick_labels(svg, "y")
    assert len(labels) >= 3
    assert all(label.endswith("/s") for label in labels), labels
    assert _evenly_round([_number(label) for label in labels]), labels
    assert not any(str(peak) in label for label in labels)
    times = _tick_labels(svg, "x")
    assert times[0] == "0 s"
    assert all(label.endswith(" s") for label in times), times
    assert _evenly_round([_number(label) for label in times]), times


def test_latency_ticks_are_round_durations_and_bars_are_whole_counts() -> None:
    svg = quantile_plot("t", ["a → b", "b → a"], [(0.31, 4.7, 17.3), (1.1, 2.2, 3.3)])
    labels = _tick_labels(svg, "x")
    assert labels[0] == "0"
    assert all(label.endswith(" ms") for label in labels[1:]), labels
    assert _evenly_round([0.0, *(_number(label) for label in labels[1:])]), labels
    assert len(set(re.findall(r'id="quantile-point-(\d+)"', svg))) == 6
    bars = latency_plot(["0-1 ms", "1 ms-2 ms", "2 ms-5 ms"], [7, 156, 3])
    counts = _tick_labels(bars, "y")
    assert all(re.fullmatch(r"\d+", label) for label in counts), counts
    assert len(set(re.findall(r'id="latency-bar-(\d+)"', bars))) == 3


def test_a_plot_with_nothing_to_draw_says_so() -> None:
    assert "no timed messages" in quantile_plot("t", [], [])
    assert "no records" in rate_plot([], [], 1.0)


KNOWN_LATENCIES = {  # (kind, source, destination): latencies (ms) of its messages
    ("message", "a", "b"): [float(n) for n in range(1, 101)],  # p50 50, p90 90, p99 99
    ("request", "b", "a"): [10.0 * n for n in range(1, 11)],  # p50 50, p90 90, p99 100
    ("event", "a", "c"): [0.5, 0.5, 0.5, 7.0],
}


def _exact(values: list[float], fraction: float) -> float:
    """The smallest value with at least ``fraction`` of all at or below it."""
    ordered = sorted(values)
    return ordered[math.ceil(fraction * len(ordered)) - 1]


def _records(session: Any) -> Any:
    rows = [(kind, source, destination, destination, latency, 100, 1, 1 if index == 0 else 0)
            for (kind, source, destination), latencies in KNOWN_LATENCIES.items()
            for index, latency in enumerate(latencies)]
    rows.append(("survey", "c", "a", "a", None, 10, 1, 0))  # no send time: not timed
    frame = session.createDataFrame(rows, "kind string, source_estate string, "
                                    "destination_estate string, node string, latency_ms double, "
                                    "body_bytes long, segments long, resends long")
    nothing = F.lit(None).cast("string")
    return frame.select(  # the rest of a normalised record's columns
        "*", F.col("source_estate").alias("source"),
        F.col("destination_estate").alias("destination"), nothing.alias("topic"),
        nothing.alias("source_yard"), nothing.alias("source_share"),
        nothing.alias("destination_yard"), nothing.alias("destination_share"),
        F.lit(None).cast("long").alias("sequence"),
        F.timestamp_seconds(F.lit(1_767_261_600)).alias("received_at"))


def test_latency_quantiles_per_kind_and_per_pair_are_the_exact_ones(
        spark: Any) -> None:  # noqa: F811
    records = _records(spark)
    counts, latencies = tables.fine_counts(records, 60.0), tables.latency_counts(records)
    by_kind = {row["kind"]: row.asDict() for row in tables.kinds(counts, latencies).collect()}
    by_pair = {(row["source_estate"], row["destination_estate"]): row.asDict()
               for row in tables.pairs(counts, latencies).collect()}
    for (kind, source, destination), latencies in KNOWN_LATENCIES.items():
        for row in (by_kind[kind], by_pair[(source, destination)]):
            assert row["messages"] == row["timed"] == len(latencies)
            for name, fraction in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
                assert row[name] == _exact(latencies, fraction), (kind, name)
            assert row["max_ms"] == max(latencies)
            assert row["resends"] == row["messages_with_resends"] == 1
    assert by_kind["request"]["p99_ms"] == 100.0
    survey = by_kind["survey"]
    assert (survey["messages"], survey["timed"], survey["p50_ms"]) == (1, 0, None)


def test_a_window_the_user_gives_is_used_as_it_is(tmp_path: Path,
                                                   spark: Any) -> None:  # noqa: F811
    truth = write_known_traffic(tmp_path / "journals")
    journals = (tmp_path / "journals" / "main", tmp_path / "journals" / "other")
    run_pipeline(PipelineOptions(journals, tmp_path / "out", window_seconds=7.0), spark)
    rate = json.loads((tmp_path / "out" / "summary.json").read_text())["rate"]
    assert rate["window_seconds"] == 7.0
    assert {round(b - a, 6) for a, b in zip(rate["edges"], rate["edges"][1:], strict=False)} \
        == {7.0}
    assert sum(rate["messages"]) == truth["records"]
    assert rate["messages_per_second"] == [n / 7.0 for n in rate["messages"]]
    assert len(rate["edges"]) > 60  # the user's width, not one fitted to at most 60 windows


def test_the_page_shows_the_busiest_pairs_and_sources_when_there_are_thousands(
        tmp_path: Path) -> None:
    from raetlike.pipeline._report import REPORT_ROWS, write_report  # noqa: PLC0415

    many = 3000  # a hostile journal's distinct estates, each with a long name
    pairs = [{"source_estate": f"{'s' * 900}{n}", "destination_estate": "main",
              "messages": n, "bytes": n, "timed": 1, "p50_ms": 1.0, "p90_ms": 2.0,
              "p99_ms": 3.0, "max_ms": 4.0, "segments": n, "resends": 0,
              "messages_with_resends": 0} for n in range(many)]
    audit = [{"source": f"s{n}", "records": 1, "distinct": 1, "first": 1, "last": 1,
              "missing": 0, "duplicates": 0, "out_of_order": 0, "complete": n != 7}
             for n in range(many)]
    data = dataclasses.replace(_data([], 60.0), pairs=pairs, audit=audit)
    write_report(data, tmp_path)
    page = (tmp_path / "report.html").read_text()
    svg = (tmp_path / "pairs.svg").read_text()
    assert svg.count('id="quantile-point-') == 3 * REPORT_ROWS
    assert f"s{'s' * 900}{many - 1}" not in svg  # labels cut short
    assert page.count("→ main") == REPORT_ROWS
    assert f"{REPORT_ROWS} pairs with the most messages of 3,000" in page
    assert page.index(">s7<") < page.index(">s0<")  # the incomplete source first
    assert "all are in tables/audit_summary" in page
