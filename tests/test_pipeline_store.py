"""The pipeline's store: each journal segment read from JSON once, kept as Parquet,
and read again only when it changes (issue 19)."""

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
    return stored_records(spark, run.units).where("valid").count(), run


def _segments(hour: str, pattern: str = "*.jsonl") -> list[str]:
    return sorted(str(path) for path in Path(hour).glob(pattern))


def test_a_second_run_reads_only_the_segments_that_are_new(tmp_path: Path,
                                                          spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10, hour=0)
    _write(journal, 11, 10, hour=1)
    hours = hour_directories([journal])
    assert len(hours) == 2
    everything = _segments(hours[0]) + _segments(hours[1])

    count, run = _refresh(spark, journal, out)
    assert (count, run.read, run.reused) == (20, everything, [])
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(entry["hour"] for entry in manifest["units"].values()) == hours
    assert all((out / STORE / key).is_dir() for key in manifest["units"])

    count, run = _refresh(spark, journal, out)  # nothing new: no JSON read at all
    assert (count, run.read, run.reused) == (20, [], everything)

    [old] = _segments(hours[1])
    _write(journal, 21, 5, hour=1)  # a new segment in the second hour
    [new] = [path for path in _segments(hours[1]) if path != old]
    # the old segment's bytes are not read again: garbage of its size and time is not seen
    stamp = os.stat(old)
    Path(old).write_bytes(b"x" * stamp.st_size)
    os.utime(old, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    count, run = _refresh(spark, journal, out)
    assert (count, run.read, run.reused) == (25, [new], sorted([*_segments(hours[0]), old]))
    assert stored_records(spark, run.units).where("not valid").count() == 0


def test_an_open_segment_is_read_apart_from_the_sealed_ones(tmp_path: Path,
                                                           spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    writer = JournalWriter(journal, "main")
    try:
        for n in range(11, 14):
            writer.append(record(n, received=HOUR_START + n))
        writer.flush()
        [hour] = hour_directories([journal])
        [sealed], [opened] = _segments(hour), _segments(hour, "*.jsonl.open")
        count, run = _refresh(spark, journal, out)
        assert (count, run.read) == (13, [sealed, opened])
        assert len(run.units) == 2  # the sealed segments, and the open one

        for n in range(14, 16):
            writer.append(record(n, received=HOUR_START + n))
        writer.flush()
        count, run = _refresh(spark, journal, out)  # the open one grew: only it again
        assert (count, run.read, run.reused) == (15, [opened], [sealed])
    finally:
        writer.close()
    [renamed] = [path for path in _segments(hour) if path != sealed]
    count, run = _refresh(spark, journal, out)  # sealed under its own name: read once more
    assert (count, run.read, run.reused) == (15, [renamed], [sealed])
    assert not json.loads((out / MANIFEST).read_text())["units"].keys() - {
        path.name for path in (out / STORE).iterdir()}


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
    assert (count, run.read) == (14, [str(segment)])

    stamp = segment.stat()
    os.utime(segment, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # same size, touched
    assert _refresh(spark, journal, out)[1].read == [str(segment)]

    segment.unlink()  # deleted: the hour has no records now
    count, run = _refresh(spark, journal, out)
    assert (count, run.read) == (10, [])
    assert [unit.hour for unit in run.units] == [hours[1]]

    shutil.rmtree(hours[1])  # a whole hour gone: dropped from the store and the manifest
    count, run = _refresh(spark, journal, out)
    assert run.removed == [hours[1]]
    assert json.loads((out / MANIFEST).read_text())["units"] == {}
    assert list((out / STORE).iterdir()) == []


def test_a_hostile_manifest_is_not_believed(tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    _refresh(spark, journal, out)
    victim = tmp_path / "victim"
    victim.mkdir()
    manifest = json.loads((out / MANIFEST).read_text())
    [(key, entry)] = manifest["units"].items()
    # a key that is a path is never a directory to use or remove; the true entry stands
    manifest["units"] = {"../../victim": entry, key: entry}
    (out / MANIFEST).write_text(json.dumps(manifest))
    count, run = _refresh(spark, journal, out)
    assert (count, run.read, victim.is_dir()) == (10, [], True)

    for bad in ({**entry, "step": 0}, {**entry, "step": float("nan")}, {**entry, "records": -1},
                {**entry, "records": True}, {**entry, "first": "x"}, {**entry, "hour": 7},
                {**entry, "files": {}}, {**entry, "hour": str(victim)}, []):
        manifest["units"] = {key: bad}
        (out / MANIFEST).write_text(json.dumps(manifest))
        count, run = _refresh(spark, journal, out)
        assert (count, len(run.read), [u.records for u in run.units]) == (10, 1, [10]), bad
    assert victim.is_dir()


def test_a_damaged_manifest_means_reading_everything_again(tmp_path: Path,
                                                           spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    _refresh(spark, journal, out)
    (out / MANIFEST).write_text("{not json")
    count, run = _refresh(spark, journal, out)
    assert (count, len(run.read)) == (10, 1)
    assert json.loads((out / MANIFEST).read_text())["version"] == MANIFEST_VERSION
    (out / MANIFEST).write_text("[" * 100_000)  # too deep for the parser: damaged too
    assert len(_refresh(spark, journal, out)[1].read) == 1


def test_the_pipeline_gives_the_same_figures_from_the_store_as_from_the_json(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal = tmp_path / "journal"
    _write(journal, 1, 30)
    first = run_pipeline(PipelineOptions((journal,), tmp_path / "out"), spark)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    again = run_pipeline(PipelineOptions((journal,), tmp_path / "out"), spark)
    assert first.records == again.records == 30
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["audit"] == summary["audit"]
