"""The pipeline's store: each journal segment read from JSON once, kept as Parquet,
and read again only when it changes (issue 19)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from raetlike.journal import JournalWriter
from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline import _store as store_module
from raetlike.pipeline._frames import NoJournalError, find_journals, hour_directories
from raetlike.pipeline._store import (
    MANIFEST,
    MANIFEST_VERSION,
    STORE,
    OutBusyError,
    out_locked,
    refresh_store,
    stored_records,
)
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture


def _write(journal: Path, first: int, count: int, hour: int = 0) -> None:
    with JournalWriter(journal, "main") as writer:
        for n in range(first, first + count):
            writer.append(record(n, received=HOUR_START + hour * 3600 + n))


def _refresh(spark: Any, journal: Path, out: Path,  # noqa: F811
             converter: str = "arrow") -> tuple[int, Any]:
    run = refresh_store(spark, hour_directories([journal]), out, converter=converter)
    return stored_records(spark, run.units).where("valid").count(), run


def _after_each_unit(monkeypatch: pytest.MonkeyPatch, converter: str,
                     then: Callable[[list[str]], None]) -> None:
    """Call ``then(names)`` after each unit's segments are converted, by either converter."""
    if converter == "spark":
        convert = store_module._convert

        def converted(spark: Any, hour: str, names: list[str], part: Path) -> Any:
            made = convert(spark, hour, names, part)
            then(names)
            return made

        monkeypatch.setattr(store_module, "_convert", converted)
    else:
        convert_all = store_module._arrow_units

        def all_converted(spark: Any, units: list[tuple[str, list[str], str]]) -> Any:
            made = convert_all(spark, units)
            for _, names, _ in units:
                then(names)
            return made

        monkeypatch.setattr(store_module, "_arrow_units", all_converted)


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
    kept = {unit.path: (unit.path / "_DONE").stat().st_mtime_ns for unit in run.units}
    _write(journal, 21, 5, hour=1)  # a new segment in the second hour
    [new] = [path for path in _segments(hours[1]) if path != old]
    count, run = _refresh(spark, journal, out)
    assert (count, run.read, run.reused) == (25, [new], sorted([*_segments(hours[0]), old]))
    [made] = [unit for unit in run.units if unit.path not in kept]
    assert (made.segments, made.records) == ((Path(new).name,), 5)  # only the new one read
    assert all((path / "_DONE").stat().st_mtime_ns == stamp for path, stamp in kept.items())

    # rewritten and given back its size and mtime (cp -p, rsync -a): noticed by its ctime
    stamp = os.stat(old)
    Path(old).write_bytes(b"x" * stamp.st_size)
    os.utime(old, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    count, run = _refresh(spark, journal, out)
    assert (count, run.read) == (15, [old])


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


def _line(seq: int, t: float, source: str, node: str) -> str:
    return json.dumps({"version": 1, "node": node, "source_estate": source, "kind": "message",
                       "topic": "t", "sequence": seq, "sent": HOUR_START + t - 0.001,
                       "received": HOUR_START + t}) + "\n"


def test_segments_of_nodes_whose_names_spark_encodes_are_read(tmp_path: Path,
                                                             spark: Any) -> None:  # noqa: F811
    # under a directory Hadoop encodes too: the plain names are joined to its encoded path
    journal, out = tmp_path / "a b%25 é" / "journal", tmp_path / "out"
    names = ["n%41", "n#1", "n[1]", "n{a,b}", "plain", "Plain-2.x_y"]
    for n, node in enumerate(names):  # valid estate names Hadoop percent-encodes in paths
        with JournalWriter(journal, node) as writer:
            writer.append(record(n + 1, node=node, received=HOUR_START + n))
    [hour] = hour_directories([journal])
    foreign = Path(hour) / "_hidden.20260101T100000000000.1.1.jsonl"  # Spark skips it
    foreign.write_text(_line(9, 9, "minion", "main"))
    count, run = _refresh(spark, journal, out)
    assert count == len(names)
    assert str(foreign) not in run.read + run.reused
    for bad in ("_main", "a:b"):  # names Spark skips or Hadoop cannot read: refused
        with pytest.raises(ValueError, match="invalid node name"):
            JournalWriter(journal, bad)


def test_a_path_spark_reads_as_a_pattern_is_refused(tmp_path: Path) -> None:
    for name in ("j[1]", "j{a,b}", "j*", "j?"):
        journal = tmp_path / name
        _write(journal, 1, 2)
        with pytest.raises(NoJournalError, match="as a pattern"):
            find_journals([journal])
    with pytest.raises(NoJournalError, match="as a pattern"):
        PipelineOptions((tmp_path / "j*",), tmp_path / "o[1]")


def test_a_directory_named_like_an_hour_that_is_not_one_is_skipped(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    _write(journal, 1, 2)
    for bad in ("date=2026-13-45/hour=99", "date=2026-01-01/hour=24"):
        (journal / bad).mkdir(parents=True)
    assert len(hour_directories([journal])) == 1


def test_sequences_past_the_audits_range_are_skipped_lines(tmp_path: Path,
                                                          spark: Any) -> None:  # noqa: F811
    hour = tmp_path / "journal" / "date=2026-01-01" / "hour=10"
    hour.mkdir(parents=True)
    (hour / "main.20260101T100000000000.1.1.jsonl").write_text(
        _line(-5, 1, "m", "main") + _line((1 << 63) - 1, 2, "m", "main")
        + _line(-(1 << 63), 3, "m", "main") + _line(7, 4, "m", "main"))
    result = run_pipeline(PipelineOptions((tmp_path / "journal",), tmp_path / "out"), spark)
    assert (result.records, result.skipped_lines) == (2, 2)


def test_pairs_are_told_apart_whatever_their_names_hold(tmp_path: Path,
                                                       spark: Any) -> None:  # noqa: F811
    journal = tmp_path / "journal"
    h10, h11 = (journal / "date=2026-01-01" / f"hour={h}" for h in (10, 11))
    h10.mkdir(parents=True)
    h11.mkdir(parents=True)
    # ("m\0n", "o"): 3 then 2 (one late); ("m", "n\0o"): 5, 4, then 3 an hour on (two late)
    (h10 / "x.20260101T100000000000.1.1.jsonl").write_text(
        _line(3, 1, "m\0n", "o") + _line(2, 2, "m\0n", "o") + _line(5, 3, "m", "n\0o")
        + _line(4, 4, "m", "n\0o"))
    (h11 / "x.20260101T110000000000.1.1.jsonl").write_text(
        _line(3, 3601, "m", "n\0o") + _line(4, 3602, "m\0n", "o"))
    out = tmp_path / "out"
    run_pipeline(PipelineOptions((journal,), out), spark)
    audit = json.loads((out / "summary.json").read_text())["audit"]
    assert {row["source"]: row["out_of_order"] for row in audit} == {"m": 2, "m\0n": 1}


def test_a_second_run_at_once_on_the_same_out_is_refused(tmp_path: Path,
                                                        spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 3)
    with out_locked(out), pytest.raises(OutBusyError, match="another raetlike pipeline"):
        run_pipeline(PipelineOptions((journal,), out), spark)
    assert run_pipeline(PipelineOptions((journal,), out), spark).records == 3


def test_a_damaged_unit_or_another_spelling_is_read_again_not_believed(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    _refresh(spark, journal, out)
    [unit] = list((out / STORE).iterdir())
    shutil.rmtree(unit / "fine")  # a part gone: the unit is made again
    count, run = _refresh(spark, journal, out)
    assert (count, len(run.read)) == (10, 1)
    spelled = tmp_path / "." / "journal" / ".." / "journal"  # the same journal
    run = refresh_store(spark, hour_directories([spelled]), out)
    assert (run.read, len(run.reused)) == ([], 1)
    assert len(list((out / STORE).iterdir())) == 1


@pytest.mark.parametrize("converter", ["arrow", "spark"])
def test_a_segment_sealed_while_it_is_read_is_read_again_under_its_name(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        converter: str) -> None:
    journal, out = tmp_path / "journal", tmp_path / "out"
    writer = JournalWriter(journal, "main")
    for n in range(1, 6):
        writer.append(record(n, received=HOUR_START + n))
    writer.flush()

    def sealed_meanwhile(_names: list[str]) -> None:
        if writer.open_segment is not None:
            writer.close()  # the estate seals the segment while the run reads it

    _after_each_unit(monkeypatch, converter, sealed_meanwhile)
    count, run = _refresh(spark, journal, out, converter)
    assert count == 5
    assert [Path(path).name.endswith(".jsonl") for path in run.read] == [True]
    assert len(run.units) == 1


def test_a_name_or_a_link_spark_cannot_take_is_left_out_or_refused(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    [hour] = hour_directories([journal])
    with open(os.path.join(os.fsencode(hour), b"main.\xff.jsonl"), "wb") as stream:
        stream.write(_line(99, 9, "minion", "main").encode())  # a name that is not UTF-8
    assert _refresh(spark, journal, out)[0] == 10
    target = tmp_path / "disk[1]"
    target.mkdir()
    shutil.move(journal, target / "journal")
    journal.symlink_to(target / "journal")  # the journal, through a link, at a pattern
    with pytest.raises(NoJournalError, match="as a pattern"):
        find_journals([journal])
    with pytest.raises(NoJournalError, match="as a pattern"):
        refresh_store(spark, hour_directories([journal]), out)


def test_a_manifest_time_no_record_can_have_is_not_believed(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    _write(journal, 1, 10)
    _refresh(spark, journal, out)
    manifest = json.loads((out / MANIFEST).read_text())
    [(key, entry)] = manifest["units"].items()
    for forged in ({"first": -1e300, "last": 1e300}, {"first": entry["last"] + 1},
                   {"records": 0}, {"skipped": 1 << 60}):
        manifest["units"] = {key: {**entry, **forged}}
        (out / MANIFEST).write_text(json.dumps(manifest))
        count, run = _refresh(spark, journal, out)
        assert (count, len(run.read), [u.records for u in run.units]) == (10, 1, [10]), forged


@pytest.mark.parametrize("converter", ["arrow", "spark"])
def test_a_segment_sealed_on_every_read_leaves_no_unit_behind(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        converter: str) -> None:
    journal, out = tmp_path / "journal", tmp_path / "out"
    writers = [JournalWriter(journal, "main")]
    writers[0].append(record(1, received=HOUR_START + 1))
    writers[0].flush()

    def sealed_each_time(names: list[str]) -> None:
        if any(name.endswith(".open") for name in names):  # the estate seals, writes on
            writers[-1].close()
            writers.append(JournalWriter(journal, "main"))
            writers[-1].append(record(len(writers), received=HOUR_START + len(writers)))
            writers[-1].flush()

    _after_each_unit(monkeypatch, converter, sealed_each_time)
    try:
        count, run = _refresh(spark, journal, out, converter)
    finally:
        writers[-1].close()
    assert count == 1  # the sealed segment; the open one waits for the next run
    assert all(path.endswith(".jsonl") for path in run.read)
    monkeypatch.undo()
    assert _refresh(spark, journal, out, converter)[0] == len(writers)


def test_a_unit_pyarrow_fails_on_is_reported_and_left_whole_for_spark(tmp_path: Path) -> None:
    """A failure inside the pyarrow converter (here: its output directory cannot be made)
    is the task's answer, not an exception that ends the job; nothing is left behind."""
    from raetlike.pipeline._arrow import try_unit  # noqa: PLC0415 - pyarrow: the spark extra

    journal = tmp_path / "journal"
    _write(journal, 1, 10)
    [hour] = hour_directories([journal])
    names = sorted(path.name for path in Path(hour).iterdir())
    (tmp_path / "file").write_text("not a directory")
    made, failure = try_unit(hour, names, str(tmp_path / "file" / "unit"))
    assert made is None
    assert str(failure).startswith(("NotADirectoryError", "FileExistsError")), failure
    made, failure = try_unit(hour, names, str(tmp_path / "unit"))
    assert failure is None
    assert made is not None
    assert made["records"] == 10
