"""Partial aggregates per journal hour (issue 19): merged, they give the tables a full
read of the records gives, across hours, with late arrivals and duplicates that cross
hours, with --since/--until cutting hours, and after segments change."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.journal import Endpoint, JournalWriter
from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline import _store as store_module
from raetlike.pipeline import _tables as tables
from raetlike.pipeline._audit import SUMMARY_SCHEMA, SourceSpan, audit, clean_pairs
from raetlike.pipeline._frames import find_journals, hour_directories, normalise, read_json_journal
from raetlike.pipeline._job import DRIVER_ROWS
from raetlike.pipeline._store import MANIFEST
from raetlike.pipeline._tables import TABLES, WINDOW_STEPS, choose_window, fine_step
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture

H0, H1, H2 = HOUR_START, HOUR_START + 3600, HOUR_START + 7200


def _deliver(writer: JournalWriter, node: str, source: str, numbers: list[int], *,
             start: float, step: float) -> None:
    for index, n in enumerate(numbers):
        at = start + index * step
        writer.append(record(n, node=node, source=source, received=at,
                             sent=at - (n % 7 + 1) / 1000, segments=1 + n % 2,
                             resends=1 if n % 9 == 0 else 0, topic=f"t{n % 2}"))


def _journals(root: Path) -> tuple[Path, Path]:
    """Three hours at two nodes.

    - minion1 -> main: 1..40 less 30 in the first hour; 30 first in the second hour,
      then 41..60: late across hours only (its highest before is 40);
    - minion2 -> main: 1..35 less 7, with 10 again in the third hour and 15 again at
      node other: duplicates across hours and nodes;
    - minion3 -> other: 1..10 with 5 after 6, in one hour: late within it;
    - minion4 -> main: 1..20 in two hours, nothing wrong.
    """
    main, other = root / "main", root / "other"
    with JournalWriter(main, "main") as writer:
        _deliver(writer, "main", "minion1", [n for n in range(1, 41) if n != 30],
                 start=H0 + 10, step=10)
        _deliver(writer, "main", "minion2", [n for n in range(1, 21) if n != 7],
                 start=H0 + 2000, step=3)
        _deliver(writer, "main", "minion4", list(range(1, 11)), start=H0 + 3000, step=1)
        _deliver(writer, "main", "minion1", [30, *range(41, 61)], start=H1 + 10, step=10)
        _deliver(writer, "main", "minion2", list(range(21, 31)), start=H1 + 1000, step=5)
        _deliver(writer, "main", "minion4", list(range(11, 21)), start=H1 + 3000, step=1)
        _deliver(writer, "main", "minion1", list(range(61, 71)), start=H2 + 10, step=10)
        _deliver(writer, "main", "minion2", [10, *range(31, 36)], start=H2 + 100, step=7)
    with JournalWriter(other, "other") as writer:
        _deliver(writer, "other", "minion3", [1, 2, 3, 4, 6, 5, 7, 8, 9, 10],
                 start=H0 + 500, step=2)
        _deliver(writer, "other", "minion2", [15], start=H1 + 50, step=1)
    return main, other


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _full_read(spark: Any, journals: tuple[Path, ...], window: float,  # noqa: F811
               since: float | None = None, until: float | None = None) -> dict[str, Any]:
    """Every table computed the way the pipeline did before partials: from all records."""
    valid = F.col("valid")
    if since is not None:
        valid = valid & (F.col("received") >= since)
    if until is not None:
        valid = valid & (F.col("received") < until)
    records = normalise(read_json_journal(spark, hour_directories(journals))).where(valid)
    counts = tables.fine_counts(records, window)
    latencies = tables.latency_counts(records)
    spans = {row["source"]: SourceSpan(int(row["n"]), int(row["lo"]), int(row["hi"]))
             for row in counts.groupBy("source").agg(
                 F.sum("sequenced").alias("n"), F.min("sequence_min").alias("lo"),
                 F.max("sequence_max").alias("hi")).collect() if row["n"]}
    checked = audit(records, spans, most_bitmaps=0)  # the sorting path: no bitmaps at all
    frames = {
        "traffic": tables.traffic(counts, window),
        "rate": tables.rate_over_time(counts, window),
        "latency": tables.latency(counts, latencies),
        "latency_histogram": tables.latency_histogram(latencies),
        "remotes": tables.remotes(counts),
        "estates": tables.estates(counts, latencies),
        "kinds": tables.kinds(counts, latencies),
        "pairs": tables.pairs(counts, latencies),
        "audit_missing": checked.missing,
        "audit_duplicates": checked.duplicates,
        "audit_out_of_order": checked.out_of_order,
        "audit_summary": spark.createDataFrame(
            [tuple(row.values()) for row in checked.summary], SUMMARY_SCHEMA),
    }
    return {name: _rows(frame) for name, frame in frames.items()}


def _written(spark: Any, out: Path) -> dict[str, Any]:  # noqa: F811
    return {name: _rows(spark.read.parquet(str(out / "tables" / name))) for name in TABLES}


def _window(out: Path) -> float:
    return float(json.loads((out / "summary.json").read_text())["rate"]["window_seconds"])


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    return _journals(tmp_path_factory.mktemp("partials"))


@pytest.mark.parametrize("converter", ["arrow", "spark"])
def test_merged_partials_give_the_tables_of_a_full_read(
        journals: tuple[Path, ...], tmp_path: Path, spark: Any,  # noqa: F811
        converter: str) -> None:
    """Whichever converter made the store (pyarrow, or Spark's reader)."""
    out = tmp_path / "out"
    first = run_pipeline(PipelineOptions(journals, out, converter=converter), spark)
    written = _written(spark, out)
    assert written == _full_read(spark, journals, _window(out))
    late = {(row[0], row[1], row[2], row[3]) for row in written["audit_out_of_order"]}
    assert late == {("minion1", "main", 30, 40), ("minion3", "other", 5, 6)}
    assert {(row[0], row[1], row[2]) for row in written["audit_duplicates"]} == {
        ("minion2", 10, 2), ("minion2", 15, 2)}
    # a second run reads no JSON, only the partials, and writes the same tables
    again = run_pipeline(PipelineOptions(journals, out, converter=converter), spark)
    assert again.records == first.records == 70 + 35 + 20 + 11
    assert _written(spark, out) == written


def test_since_and_until_cutting_hours_give_the_tables_of_a_full_read(
        journals: tuple[Path, ...], tmp_path: Path, spark: Any) -> None:  # noqa: F811
    since, until = H0 + 205, H2 + 45  # inside minion1's first hour and its last
    out = tmp_path / "out"
    run_pipeline(PipelineOptions(journals, out), spark)  # the store holds every hour whole
    result = run_pipeline(PipelineOptions(journals, out, since=since, until=until), spark)
    written = _written(spark, out)
    assert written == _full_read(spark, journals, _window(out), since, until)
    assert result.records == sum(row[1] for row in written["audit_summary"]) < 136


def test_a_window_the_stored_partials_cannot_roll_up_to_is_computed_from_the_records(
        journals: tuple[Path, ...], tmp_path: Path, spark: Any) -> None:  # noqa: F811
    out = tmp_path / "out"
    run_pipeline(PipelineOptions(journals, out, window_seconds=7.0), spark)
    assert _window(out) == 7.0
    assert _written(spark, out) == _full_read(spark, journals, 7.0)


def test_a_changed_or_deleted_segment_changes_the_tables(tmp_path: Path,
                                                         spark: Any) -> None:  # noqa: F811
    root = tmp_path / "journals"
    journals = _journals(root)
    out = tmp_path / "out"
    run_pipeline(PipelineOptions(journals, out), spark)
    manifest = json.loads((out / MANIFEST).read_text())
    assert all(entry["records"] > 0 for entry in manifest["units"].values())
    [segment] = sorted(Path(hour_directories([journals[1]])[0]).glob("*.jsonl"))
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(b"".join(lines[:4]))  # minion3 keeps 1..4: nothing late any more
    result = run_pipeline(PipelineOptions(journals, out), spark)
    assert result.records == 136 - 6
    written = _written(spark, out)
    assert written == _full_read(spark, journals, _window(out))
    assert all(row[0] != "minion3" for row in written["audit_out_of_order"])
    shutil.rmtree(hour_directories([journals[0]])[2])  # main's third hour: gone
    result = run_pipeline(PipelineOptions(journals, out), spark)
    assert result.records == 136 - 6 - 16
    assert _written(spark, out) == _full_read(spark, journals, _window(out))


def test_a_journal_given_twice_is_counted_once(journals: tuple[Path, ...], tmp_path: Path,
                                               spark: Any) -> None:  # noqa: F811
    main, other = journals
    out = tmp_path / "out"
    run_pipeline(PipelineOptions((main, other), out), spark)
    full = _full_read(spark, (main, other), _window(out))
    for again in ((main, other, main), (main, other, main.parent / "." / main.name)):
        result = run_pipeline(PipelineOptions(again, out), spark)
        assert result.records == 136
        assert _written(spark, out) == full
    # the CLI's journal list: a journal given and inside a directory given is listed once
    assert find_journals([main.parent, main, other]) == [main, other]


def test_an_hour_read_as_many_small_units_gives_the_tables_of_a_full_read(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The pyarrow converter reads a busy hour as units of at most ``UNIT_BYTES`` each
    (here a few segments): late arrivals and duplicates across those units still give
    the tables a pass over every record gives."""
    journal = tmp_path / "journals" / "main"
    with JournalWriter(journal, "main", max_bytes=2_000) as writer:  # a segment each ~5 lines
        _deliver(writer, "main", "minion1", [n for n in range(1, 41) if n != 30],
                 start=H0 + 10, step=10)
        _deliver(writer, "main", "minion1", [30, 12, *range(41, 51)], start=H0 + 1000, step=5)
        _deliver(writer, "main", "minion2", list(range(1, 21)), start=H0 + 2000, step=3)
    [hour] = hour_directories([journal])
    assert len(list(Path(hour).glob("*.jsonl"))) > 6
    monkeypatch.setattr(store_module, "UNIT_BYTES", 4_000)
    out = tmp_path / "out"
    result = run_pipeline(PipelineOptions((journal,), out), spark)
    assert result.records == 39 + 12 + 20
    units = json.loads((out / "manifest.json").read_text())["units"]
    assert len(units) > 3
    assert _written(spark, out) == _full_read(spark, (journal,), _window(out))


def test_a_receive_time_that_is_not_finite_is_a_skipped_line(tmp_path: Path,
                                                             spark: Any) -> None:  # noqa: F811
    journals = _journals(tmp_path / "journals")
    [segment] = sorted(Path(hour_directories([journals[0]])[0]).glob("*.jsonl"))
    line = segment.read_bytes().splitlines()[0]
    assert re.search(rb'"received":[0-9.e+]+', line) is not None
    bad = [re.sub(rb'"received":[0-9.e+]+', b'"received":' + value, line)
           for value in (b"NaN", b"Infinity", b"-Infinity")]
    with segment.open("ab") as file:
        file.write(b"\n".join(bad) + b"\n")  # Spark's JSON reader parses all three
    out = tmp_path / "out"
    for _ in range(2):  # converted, then from the store
        result = run_pipeline(PipelineOptions(journals, out), spark)
        assert (result.records, result.skipped_lines) == (136, 3)
        assert _written(spark, out) == _full_read(spark, journals, _window(out))


def test_sources_joined_alike_are_one_source_for_late_arrivals(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal = tmp_path / "journals" / "main"
    with JournalWriter(journal, "main") as writer:
        for index, (n, endpoint) in enumerate([(1, Endpoint("a", None, "b")),
                                               (2, Endpoint("a", None, "b")),
                                               (4, Endpoint("a", None, "b")),
                                               (5, Endpoint("a", None, "b")),
                                               (3, Endpoint("a", "b", None))]):
            writer.append(dataclasses.replace(record(n, received=H0 + 10 + index),
                                              source=endpoint))
    out = tmp_path / "out"
    run_pipeline(PipelineOptions((journal,), out), spark)
    written = _written(spark, out)
    assert written == _full_read(spark, (journal,), _window(out))
    # both endpoints are source "a/b": 3 came after 5 at main
    assert [row[:4] for row in written["audit_out_of_order"]] == [("a/b", "main", 3, 5)]


def _jobs_of_a_second_run(spark: Any, root: Path, hours: int,  # noqa: F811
                          driver_rows: int = DRIVER_ROWS) -> int:
    """Spark jobs of a run over ``hours`` hours of journal when nothing is new."""
    journal, out = root / "journal", root / "out"
    with JournalWriter(journal, "main") as writer:
        for hour in range(hours):
            _deliver(writer, "main", "minion1", list(range(1 + 10 * hour, 11 + 10 * hour)),
                     start=H0 + 3600 * hour + 10, step=60)
    assert len(hour_directories([journal])) == hours
    run_pipeline(PipelineOptions((journal,), out), spark)
    group = f"second-run-{hours}-{root}"  # a job group counts every job ever in it
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        result = run_pipeline(PipelineOptions((journal,), out, driver_rows=driver_rows), spark)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    assert result.records == 10 * hours
    return len(context.statusTracker().getJobIdsForGroup(group))


def test_a_second_run_with_nothing_new_costs_no_spark_job_per_hour(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    """When Spark computes the tables (``driver_rows`` 0), a fixed number of jobs."""
    two = _jobs_of_a_second_run(spark, tmp_path / "two", 2, driver_rows=0)
    eight = _jobs_of_a_second_run(spark, tmp_path / "eight", 8, driver_rows=0)
    assert two > 0
    assert eight <= two + 2, (two, eight)


def test_units_that_overlap_or_run_back_are_sorted_afresh() -> None:
    ranges = [
        ("a", "n", 1, 10, 0.0, 9.0), ("a", "n", 11, 20, 10.0, 19.0),  # in order
        ("b", "n", 1, 10, 0.0, 9.0), ("b", "n", 5, 20, 10.0, 19.0),  # 5 comes back
        ("c", "n", 1, 10, 0.0, 9.0), ("c", "n", 11, 20, 9.0, 19.0),  # overlap at 9.0
        ("d", "n", 11, 20, 10.0, 19.0), ("d", "n", 1, 10, 0.0, 9.0),  # any order given
    ]
    assert clean_pairs(ranges) == ({("a", "n"), ("d", "n")}, {("b", "n"), ("c", "n")})


@given(st.floats(min_value=0, max_value=1e9), st.floats(min_value=0, max_value=1e9))
def test_every_window_a_longer_run_chooses_is_a_multiple_of_the_fine_step(
        span: float, more: float) -> None:
    step = round(fine_step(span) * 1000)
    wider = round(choose_window(span + more) * 1000)
    assert wider % step == 0
    assert step <= round(choose_window(span) * 1000)
    assert round(fine_step(3600) * 1000) == 60_000  # an hour's records: minute windows
    assert WINDOW_STEPS[0] * 1000 <= step


def test_a_second_run_collects_and_writes_in_few_jobs(tmp_path: Path, spark: Any) -> None:  # noqa: F811
    """The stored partials are read, the tables and the audit computed (``_rows``,
    ``audit_rows``) and every table written on the driver with pyarrow: a second run over
    two or eight hours costs no Spark job (19 when Spark wrote the tables, 28 when Spark
    computed them, 29 before the report's totals came with the audit's spans)."""
    assert _jobs_of_a_second_run(spark, tmp_path / "two", 2) == 0
    assert _jobs_of_a_second_run(spark, tmp_path / "eight", 8) == 0
