"""The report's pure parts: window and tick choice, human units, the rate series."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

pytest.importorskip("pyspark")

from raetlike.pipeline import _units as units
from raetlike.pipeline._plots import time_step
from raetlike.pipeline._report import ReportData, rate_series
from raetlike.pipeline._tables import WINDOW_STEPS, choose_window


@pytest.mark.parametrize(("span", "width"), [
    (0.0, 0.01), (0.3, 0.01), (2.0, 0.05), (20.0, 0.5), (59.0, 1.0), (600.0, 10.0),
    (3600.0, 60.0), (3601.0, 120.0), (86400.0, 1800.0), (7 * 86400.0, 10800.0),
])
def test_the_rate_window_fits_the_run_in_at_most_60_round_windows(span: float,
                                                                    width: float) -> None:
    assert choose_window(span) == width
    assert span / width <= 60
    assert width in WINDOW_STEPS


def test_a_very_long_run_still_gets_at_most_60_windows() -> None:
    span = 400 * 86400.0
    assert span / choose_window(span) <= 60


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
