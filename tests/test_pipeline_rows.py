"""Tables computed on the driver from the partials' rows (``_rows``, issue 19): the same
tables Spark computes from the same partials, on journals made to hit Spark's semantics
(null keys and values, NaN and infinite latencies, negative times, relayed copies,
duplicates and late arrivals); the bound that sends a run back to Spark; and the join
that lost every null-topic stream's quantiles."""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline import _tables as tables
from raetlike.pipeline._frames import JOURNAL_SCHEMA, normalise
from raetlike.pipeline._partials import PARTIAL_SCHEMAS, PARTS, compute_partials
from raetlike.pipeline._tables import TABLES
from tests.journalkit import HOUR_START
from tests.sparkkit import spark  # noqa: F401 - the session fixture


def _line(rng: random.Random, n: int, received: float) -> dict[str, Any]:
    node = rng.choice(["main", "main", "other"])
    sent = rng.choice([None, received - rng.randrange(1, 9000) / 1e6, received + 0.003,
                       math.nan, math.inf, -math.inf, received - 4e7, received - 0.0005])
    return {
        "version": 1, "node": node,
        "source_estate": rng.choice(["minion1", "minion2", "minion3"]),
        "source_yard": rng.choice([None, "y1"]), "source_share": rng.choice([None, None, "s"]),
        "destination_estate": rng.choice([None, node, node, "elsewhere"]),
        "destination_yard": rng.choice([None, "yard1"]),
        "destination_share": rng.choice([None, "d"]),
        "kind": rng.choice(["message", "request", "event"]),
        "topic": rng.choice([None, None, "t1"]),
        "transaction_id": n, "request_id": None,
        "sequence": rng.choice([None, n // 2 + 1, n // 2 + 1, n // 2 + 1, n // 3 + 1]),
        "body_bytes": rng.choice([None, 10, 100, 1000]),
        "segments": rng.choice([1, 1, 2, 5]), "resends": rng.choice([0, 0, 0, 1, 3]),
        "sent": sent, "received": received, "session_id": 7,
    }


def _journal(root: Path, seed: int, hours: list[float], per_hour: int) -> Path:
    """One journal of ``per_hour`` odd lines in each hour starting at ``hours``."""
    rng = random.Random(seed)
    n = 0
    for start in hours:
        when = datetime.fromtimestamp(start, UTC)
        directory = root / f"date={when:%Y-%m-%d}" / f"hour={when:%H}"
        directory.mkdir(parents=True)
        lines = []
        for index in range(per_hour):
            n += 1
            lines.append(json.dumps(_line(rng, n, start + index * 3599 / per_hour)))
        (directory / "main.1.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _written(spark: Any, out: Path) -> dict[str, list[str]]:  # noqa: F811
    """Each table's rows, each as its repr (NaN equals NaN), sorted."""
    return {name: sorted(repr(tuple(row)) for row in
                         spark.read.parquet(str(out / "tables" / name)).collect())
            for name in TABLES}


def _schemas(spark: Any, out: Path) -> dict[str, str]:  # noqa: F811
    return {name: spark.read.parquet(str(out / "tables" / name)).schema.simpleString()
            for name in TABLES}


def _same_tables(spark: Any, journal: Path, tmp_path: Path,  # noqa: F811
                 caplog: pytest.LogCaptureFixture) -> tuple[Any, dict[str, list[str]]]:
    """Run both ways over ``journal``; assert the same tables, schemas and summary."""
    by_spark = run_pipeline(PipelineOptions((journal,), tmp_path / "spark", driver_rows=0),
                            spark)
    with caplog.at_level(logging.INFO, logger="raetlike.pipeline"):
        by_driver = run_pipeline(PipelineOptions((journal,), tmp_path / "driver"), spark)
    assert "Spark computes the tables" not in caplog.text
    assert (by_driver.records, by_driver.skipped_lines) == (by_spark.records,
                                                            by_spark.skipped_lines)
    driver, spark_tables = _written(spark, tmp_path / "driver"), _written(spark, tmp_path / "spark")
    assert driver == spark_tables
    assert _schemas(spark, tmp_path / "driver") == _schemas(spark, tmp_path / "spark")
    summaries = [json.loads((tmp_path / side / "summary.json").read_text())
                 for side in ("driver", "spark")]
    for summary in summaries:
        summary.pop("generated", None)
    assert repr(summaries[0]) == repr(summaries[1])
    return by_driver, driver


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The driver's local zone set to New York (UTC-5): a timestamp collected from Spark is a
    naive local datetime, which the report must not take for UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("hours", [
    [HOUR_START, HOUR_START + 3600],
    [HOUR_START, 64_060_588_800.0],  # and in the year 4000
], ids=["two-hours", "year-4000"])
def test_the_driver_computes_the_tables_spark_computes(
        tmp_path: Path, spark: Any, hours: list[float],  # noqa: F811
        caplog: pytest.LogCaptureFixture, new_york: None) -> None:
    journal = _journal(tmp_path / "journal", 19, hours, 300)
    result, driver = _same_tables(spark, journal, tmp_path, caplog)
    assert result.records > 0
    assert all(driver[name] for name in ("traffic", "rate", "latency", "kinds", "pairs"))
    if hours[1] == HOUR_START + 3600:  # 2-minute windows from the first record's
        edges = json.loads((tmp_path / "driver" / "summary.json").read_text())["rate"]["edges"]
        assert edges[0] == HOUR_START  # UTC, not shifted by New York's 5 hours


def test_hostile_numbers_are_skipped_lines_in_both_ways(
        tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    """Receive times past year 9999 or before 1970, a latency that overflows, counts whose
    sums overflow: each once crashed one way or both (a Python datetime past 9999, the
    report's formatting of inf, Spark's ANSI sum, a Python int past 2**63)."""
    root = tmp_path / "journal" / "date=2026-01-01" / "hour=10"
    root.mkdir(parents=True)
    good = {"version": 1, "node": "main", "source_estate": "m", "kind": "message",
            "received": HOUR_START + 1, "sent": HOUR_START + 0.5, "sequence": 1}
    bad = [{"received": 253_402_300_799.0}, {"received": 253_402_300_805.0},
           {"received": -62_135_600_400.0}, {"received": -5.0}, {"received": 1e11},
           {"body_bytes": 2**62}, {"body_bytes": 2**62}, {"body_bytes": -1},
           {"segments": 2**33}, {"resends": -3}]
    lines = [good, {**good, "sequence": 2, "sent": -1e306, "kind": "event"},
             {**good, "sequence": 3, "body_bytes": 2**32, "kind": "survey"},
             {**good, "sequence": 4, "kind": "request"}]
    lines += [{**good, "sequence": 10 + n, **change} for n, change in enumerate(bad)]
    (root / "main.1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result, _ = _same_tables(spark, tmp_path / "journal", tmp_path, caplog)
    assert (result.records, result.skipped_lines) == (4, len(bad))
    summary = json.loads((tmp_path / "driver" / "summary.json").read_text())
    assert summary["latency"]["max_ms"] == 500.0  # the overflowing latency is untimed
    # kinds with as many messages are listed by name, the same both ways
    assert [row["kind"] for row in summary["kinds"]] == ["event", "message", "request", "survey"]


def test_partials_past_driver_rows_are_left_to_spark(
        tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    journal = _journal(tmp_path / "journal", 7, [HOUR_START], 200)
    with caplog.at_level(logging.INFO, logger="raetlike.pipeline"):
        run_pipeline(PipelineOptions((journal,), tmp_path / "few", driver_rows=3), spark)
    assert "partials past 3 rows: Spark computes the tables" in caplog.text
    run_pipeline(PipelineOptions((journal,), tmp_path / "many"), spark)
    assert _written(spark, tmp_path / "few") == _written(spark, tmp_path / "many")


@pytest.mark.parametrize("driver_rows", [0, 200_000])
def test_a_stream_without_a_topic_has_its_latency_quantiles(
        tmp_path: Path, spark: Any, driver_rows: int) -> None:  # noqa: F811
    """Spark's join on (source, destination, kind, topic) matched no null topic, so every
    stream without one had null p50/p90/p99 in the latency table."""
    root = tmp_path / "journal" / "date=2026-01-01" / "hour=10"
    root.mkdir(parents=True)
    lines = [{"version": 1, "node": "main", "source_estate": "minion", "kind": "message",
              "topic": None, "sequence": n, "received": HOUR_START + n,
              "sent": HOUR_START + n - n / 1024} for n in range(1, 11)]  # exact in binary
    (root / "main.1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    run_pipeline(PipelineOptions((tmp_path / "journal",), out, driver_rows=driver_rows), spark)
    (row,) = spark.read.parquet(str(out / "tables" / "latency")).collect()
    assert row["topic"] is None
    # the 5th, 9th and 10th of n * 0.9765625 ms, to the microsecond below
    assert (row["p50_ms"], row["p90_ms"], row["p99_ms"]) == (4.882, 8.789, 9.765)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_driver_rows_must_be_a_whole_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="driver_rows must be a whole number"):
        PipelineOptions((Path("j"),), Path("o"), driver_rows=bad)


def test_a_send_time_that_is_not_finite_gives_no_latency(tmp_path: Path,
                                                          spark: Any) -> None:  # noqa: F811
    """Spark's JSON reader takes ``NaN`` and ``Infinity``: a line's send time of either made
    a NaN or infinite latency, and the report failed on the NaN maximum."""
    root = tmp_path / "journal" / "date=2026-01-01" / "hour=10"
    root.mkdir(parents=True)
    sends = [HOUR_START + 1 - 0.5, math.nan, math.inf, -math.inf]
    text = "".join(json.dumps({"version": 1, "node": "main", "source_estate": "minion",
                               "kind": "message", "sequence": n + 1,
                               "received": HOUR_START + 1, "sent": sent}) + "\n"
                   for n, sent in enumerate(sends))
    assert "NaN" in text
    assert "Infinity" in text
    (root / "main.1.jsonl").write_text(text)
    out = tmp_path / "out"
    result = run_pipeline(PipelineOptions((tmp_path / "journal",), out), spark)
    assert result.records == 4
    (row,) = spark.read.parquet(str(out / "tables" / "kinds")).collect()
    assert (row["messages"], row["timed"], row["max_ms"]) == (4, 1, 500.0)
    assert json.loads((out / "summary.json").read_text())["latency"]["max_ms"] == 500.0


def test_the_declared_table_schemas_are_spark_s(spark: Any) -> None:  # noqa: F811
    empty = normalise(spark.createDataFrame([], JOURNAL_SCHEMA)).where("valid")
    made = compute_partials(empty, 60.0)
    assert {name: getattr(made, name).schema for name in PARTS} == PARTIAL_SCHEMAS
    partial = PARTIAL_SCHEMAS
    counts = tables.roll_up(spark.createDataFrame([], partial["fine"]), 60.0)
    latencies = tables.merge_latency(spark.createDataFrame([], partial["latency"]))
    planned = {
        "traffic": tables.traffic(counts, 60.0), "rate": tables.rate_over_time(counts, 60.0),
        "latency": tables.latency(counts, latencies),
        "latency_histogram": tables.latency_histogram(latencies),
        "remotes": tables.remotes(counts), "estates": tables.estates(counts, latencies),
        "kinds": tables.kinds(counts, latencies), "pairs": tables.pairs(counts, latencies)}
    assert {name: frame.schema for name, frame in planned.items()} == tables.TABLE_SCHEMAS
