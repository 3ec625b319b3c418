"""Choosing input without Spark: hour partitions pruned by --since/--until, times parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from raetlike.journal import JournalWriter
from raetlike.pipeline._frames import hour_directories
from raetlike.pipeline.cli import parse_time
from tests.journalkit import HOUR_START, record


def test_times_are_iso_8601_in_utc_unless_zoned_or_epoch_seconds() -> None:
    assert parse_time("2026-01-01T10:00") == HOUR_START
    assert parse_time("2026-01-01T11:00+01:00") == HOUR_START
    assert parse_time(str(HOUR_START + 0.5)) == HOUR_START + 0.5
    with pytest.raises(ValueError, match="invalid time 'soon'"):
        parse_time("soon")


def test_only_hours_overlapping_the_window_are_listed(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, "main") as writer:
        for hour in range(4):
            writer.append(record(hour, received=HOUR_START + hour * 3600 + 10))
    names = [Path(d).name for d in hour_directories([tmp_path])]
    assert names == ["hour=10", "hour=11", "hour=12", "hour=13"]
    window = hour_directories([tmp_path], since=HOUR_START + 3599, until=HOUR_START + 7200)
    assert [Path(d).name for d in window] == ["hour=10", "hour=11"]
    assert hour_directories([tmp_path], since=HOUR_START + 4 * 3600) == []
