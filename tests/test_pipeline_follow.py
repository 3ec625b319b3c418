"""``--follow``: Structured Streaming picks up segments as they are sealed, each only once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raetlike.journal import JournalWriter
from raetlike.pipeline import PipelineOptions, follow_journals
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture


def _sequences(session: Any, out: Path) -> tuple[int, int]:
    [row] = session.read.parquet(str(out / "tables" / "audit_summary")).collect()
    return row["records"], row["last"]


def test_follow_picks_up_a_new_sealed_segment_and_reads_each_once(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    journal, out = tmp_path / "journal", tmp_path / "out"
    options = PipelineOptions((journal,), out)
    writer = JournalWriter(journal, "main")
    for n in range(1, 21):
        writer.append(record(n, received=HOUR_START + n))
    writer.rotate()
    writer.append(record(21, received=HOUR_START + 21))  # still open: not yet followed

    first = follow_journals(options, spark, rounds=1)
    assert first.records == 20
    assert _sequences(spark, out) == (20, 20)

    for n in range(22, 31):
        writer.append(record(n, received=HOUR_START + n))
    writer.close()  # seals 21..30: a new segment appears
    second = follow_journals(options, spark, rounds=1)
    assert second.records == 30
    assert _sequences(spark, out) == (30, 30)
    missing = spark.read.parquet(str(out / "tables" / "audit_missing")).count()
    assert missing == 0
