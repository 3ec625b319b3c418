"""The delivery audit: gaps read from Spark's bitmaps equal the ones found by sorting.

The bitmap path folds a source's sequence numbers into 4 KiB bitmaps of 32,768
numbers; the driver finds the runs of zeros.  Checked against a set-based
oracle without Spark (any numbers, gaps across bitmap edges), and on real Spark
against the sorting path it falls back to, which must give the same tables.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.journal import JournalWriter
from raetlike.pipeline._audit import BITMAP_BITS, SourceSpan, _gaps, audit
from raetlike.pipeline._frames import hour_directories
from raetlike.pipeline._store import refresh_store, stored_records
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture


def _bitmaps(numbers: dict[str, set[int]]) -> dict[tuple[str, int], bytes]:
    """Spark's layout: bucket (n - 1) // 32768 + 1, bit (n - 1) % 32768, low bit first."""
    words: dict[tuple[str, int], int] = {}
    for source, seen in numbers.items():
        for n in seen:
            key = (source, (n - 1) // BITMAP_BITS + 1)
            words[key] = words.get(key, 0) | 1 << ((n - 1) % BITMAP_BITS)
    return {key: word.to_bytes(BITMAP_BITS // 8, "little") for key, word in words.items()}


def _oracle(seen: set[int]) -> list[tuple[int, int]]:
    ordered = sorted(seen)
    return [(a + 1, b - 1) for a, b in itertools.pairwise(ordered) if b - a > 1]


_EDGE = st.sampled_from([1, BITMAP_BITS - 2, BITMAP_BITS, BITMAP_BITS + 1, 3 * BITMAP_BITS])
_NUMBERS = st.sets(st.one_of(st.integers(min_value=1, max_value=5 * BITMAP_BITS),
                             _EDGE.flatmap(lambda e: st.integers(min_value=max(1, e - 3),
                                                                 max_value=e + 3))),
                   min_size=1, max_size=200)


@settings(max_examples=300, deadline=None)
@given(numbers=st.dictionaries(st.sampled_from(["a", "b", "c"]), _NUMBERS, min_size=1,
                               max_size=3))
def test_gaps_from_bitmaps_are_the_sorted_numbers_gaps(numbers: dict[str, set[int]]) -> None:
    spans = {s: SourceSpan(len(seen), min(seen), max(seen)) for s, seen in numbers.items()}
    found = _gaps(spans, _bitmaps(numbers), most=10**9)
    assert found is not None
    gaps, distinct = found
    for source, seen in numbers.items():
        assert [(first, last) for s, first, last, _ in gaps if s == source] == _oracle(seen)
        assert all(count == last - first + 1 for s, first, last, count in gaps)
        assert distinct[source] == len(seen)


def test_a_whole_bitmap_of_missing_numbers_is_one_gap() -> None:
    seen = {1, 2, 4 * BITMAP_BITS}  # buckets 2 and 3 hold nothing at all
    found = _gaps({"a": SourceSpan(3, 1, 4 * BITMAP_BITS)}, _bitmaps({"a": seen}), most=10)
    assert found == ([("a", 3, 4 * BITMAP_BITS - 1, 4 * BITMAP_BITS - 3)], {"a": 3})


def test_more_gaps_than_the_bound_is_left_to_spark() -> None:
    seen = set(range(1, 400, 2))  # 199 gaps
    spans = {"a": SourceSpan(len(seen), 1, 399)}
    assert _gaps(spans, _bitmaps({"a": seen}), most=100) is None
    assert _gaps(spans, _bitmaps({"a": seen}), most=199) is not None


def _journal(journal: Path) -> None:
    """minion1: 1..70,000 less a few (across bitmap edges), 32,768 twice (at two nodes),
    40,000 arriving after 40,001 and 50,000 after 50,100; minion2: 5..9 complete."""
    lost = {2, 32_767, 32_769, 65_530, 65_531, 65_532, 65_533, 65_534, 65_535, 65_536, 65_537}
    order = [n for n in range(1, 70_001) if n not in lost]
    swap = order.index(40_000)
    order[swap], order[swap + 1] = order[swap + 1], order[swap]
    order.remove(50_000)  # late by a hundred: another block of 64 numbers
    order.insert(order.index(50_100) + 1, 50_000)
    with JournalWriter(journal / "main", "main") as main, \
            JournalWriter(journal / "other", "other") as other:
        for index, n in enumerate(order):
            main.append(record(n, source="minion1", received=HOUR_START + index * 0.01))
        other.append(record(32_768, node="other", source="minion1",
                            received=HOUR_START + 1_000.0))
        for n in range(5, 10):
            main.append(record(n, source="minion2", received=HOUR_START + 2_000.0 + n))


def _audit(spark: Any, tmp_path: Path, **bounds: int) -> tuple[Any, ...]:  # noqa: F811
    journal = tmp_path / "journal"
    if not journal.exists():
        _journal(journal)
    run = refresh_store(spark, hour_directories([journal / "main", journal / "other"]),
                        tmp_path / f"out{len(bounds)}")
    records = stored_records(spark, run.units)
    valid = records.where("valid")
    spans = {row["source"]: SourceSpan(row["n"], row["lo"], row["hi"])
             for row in valid.groupBy("source").agg(
                 F.count("*").alias("n"), F.min("sequence").alias("lo"),
                 F.max("sequence").alias("hi")).collect()}
    result = audit(valid, spans, **bounds)
    return (result.summary,
            sorted(tuple(row) for row in result.missing.collect()),
            sorted((row["source"], row["sequence"], row["copies"], tuple(row["nodes"]))
                   for row in result.duplicates.collect()),
            sorted((row["source"], row["sequence"]) for row in result.out_of_order.collect()))


def test_bitmaps_and_sorting_give_the_same_audit(tmp_path: Path, spark: Any) -> None:  # noqa: F811
    by_bitmaps = _audit(spark, tmp_path)
    by_sorting = _audit(spark, tmp_path, most_bitmaps=0)
    few_gaps = _audit(spark, tmp_path, most_bitmaps=10, most_gaps=1)
    assert by_bitmaps == by_sorting == few_gaps
    summary, missing, duplicates, late = by_bitmaps
    assert missing == [("minion1", 2, 2, 1), ("minion1", 32_767, 32_767, 1),
                       ("minion1", 32_769, 32_769, 1), ("minion1", 65_530, 65_537, 8)]
    assert duplicates == [("minion1", 32_768, 2, ("main", "other"))]
    assert late == [("minion1", 40_000), ("minion1", 50_000)]
    assert summary == [
        {"source": "minion1", "records": 69_990, "distinct": 69_989, "first": 1,
         "last": 70_000, "missing": 11, "duplicates": 1, "out_of_order": 2, "complete": False},
        {"source": "minion2", "records": 5, "distinct": 5, "first": 5, "last": 9,
         "missing": 0, "duplicates": 0, "out_of_order": 0, "complete": True}]

