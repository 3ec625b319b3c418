"""The pipeline's store: each journal hour read from JSON once, kept as Parquet,
and read again only when its segments change (issue 19)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from raetlike.journal import JournalWriter
from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline._frames import hour_directories
from raetlike.pipeline._store import (
    MANIFEST,
    MANIFEST_VERSION,
    STORE,
    refresh_store,
    stored_records,
)
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture


def _write(journal: Path, first: int, count: int, hour: int = 0) -> None:
    with JournalWriter(journal, "main") as writer:
        for n in range(first, first + count):
            writer.append(record(n, received=HOUR_START + hour * 3600 + n))


def _refresh(spark: Any, journal: Path, out: Path) -> tuple[int, Any]:  # noqa: F811
    run = refresh_store(spark, hour_directories([journal]), out)
    return stored_records(spark, run.hours).where("valid").count(), run


def test_a_second_run_reads_only_the_hours_whose_segments_changed(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10, hour=0)
    _write(journal, 11, 10, hour=1)
    hours = hour_directories([journal])
    assert len(hours) == 2

    count, run = _refresh(spark, journal, out)
    assert (count, run.read, run.reused) == (20, hours, [])
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(manifest["hours"]) == hours
    assert all((out / STORE / entry["key"]).is_dir() for entry in manifest["hours"].values())

    count, run = _refresh(spark, journal, out)  # nothing new: no JSON read at all
    assert (count, run.read, run.reused) == (20, [], hours)

    _write(journal, 21, 5, hour=1)  # a new segment in the second hour
    count, run = _refresh(spark, journal, out)
    assert (count, run.read, run.reused) == (25, [hours[1]], [hours[0]])


def test_a_changed_or_deleted_segment_or_hour_is_noticed(tmp_path: Path,
                                                        spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10, hour=0)
    _write(journal, 11, 10, hour=1)
    hours = hour_directories([journal])
    _refresh(spark, journal, out)

    [segment] = sorted(Path(hours[0]).glob("*.jsonl"))
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:4]))  # changed: six records fewer
    count, run = _refresh(spark, journal, out)
    assert (count, run.read) == (14, [hours[0]])

    stamp = segment.stat()
    os.utime(segment, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # same size, touched
    assert _refresh(spark, journal, out)[1].read == [hours[0]]

    segment.unlink()  # deleted: the hour has no records now
    count, run = _refresh(spark, journal, out)
    assert (count, run.read) == (10, [hours[0]])

    shutil.rmtree(hours[1])  # a whole hour gone: dropped from the store and the manifest
    count, run = _refresh(spark, journal, out)
    assert run.removed == [hours[1]]
    assert hours[1] not in json.loads((out / MANIFEST).read_text())["hours"]
    assert len(list((out / STORE).iterdir())) == 1


def test_a_damaged_manifest_means_reading_everything_again(tmp_path: Path,
                                                           spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    _refresh(spark, journal, out)
    (out / MANIFEST).write_text("{not json")
    count, run = _refresh(spark, journal, out)
    assert (count, len(run.read)) == (10, 1)
    assert json.loads((out / MANIFEST).read_text())["version"] == MANIFEST_VERSION


def test_the_pipeline_gives_the_same_figures_from_the_store_as_from_the_json(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal = tmp_path / "journal"
    _write(journal, 1, 30)
    first = run_pipeline(PipelineOptions((journal,), tmp_path / "out"), spark)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    again = run_pipeline(PipelineOptions((journal,), tmp_path / "out"), spark)
    assert first.records == again.records == 30
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["audit"] == summary["audit"]
