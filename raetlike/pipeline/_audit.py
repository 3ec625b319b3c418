"""The delivery audit: per source, which sequence numbers arrived, which are missing,
which came twice, and which came after a higher one.

Gaps and distinct numbers are read from bitmaps: Spark folds each source's
numbers into one 4 KiB bitmap per 32,768 (``bitmap_construct_agg``, partial
aggregation before the shuffle, so a million numbers move as a few dozen
bitmaps), and the driver finds the runs of zeros.  Where that would take more
than :data:`MOST_BITMAPS` bitmaps (numbers spread wider, or below 1) or list
more than :data:`MOST_GAPS` gaps, the gaps are found by sorting in Spark
instead, as they always could be.  Duplicates are looked for only at sources
whose records outnumber their distinct numbers; arrivals out of order take a
sort of each (source, node)'s first arrivals.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.pipeline._session import inheriting
from raetlike.pipeline._tables import at_destination

__all__ = ["BITMAP_BITS", "MOST_BITMAPS", "MOST_GAPS", "Audit", "Folded", "SourceSpan", "audit",
           "audit_duplicates", "audit_missing", "audit_out_of_order", "audit_partials",
           "audit_rows", "clean_pairs", "fold_sequences"]

log = logging.getLogger(__name__)

BITMAP_BITS = 32_768
"""Sequence numbers per bitmap (Spark's ``bitmap_bucket_number``)."""
MOST_BITMAPS = 4_096
"""Bitmaps (4 KiB each, 16 MiB in all) the driver collects at most for one audit."""
MOST_GAPS = 100_000
"""Gaps the driver lists at most; past it Spark lists them (all of them, in the table)."""

MISSING_SCHEMA = "source string, first_missing long, last_missing long, missing long"
DUPLICATES_SCHEMA = "source string, sequence long, copies long, nodes array<string>"
SUMMARY_SCHEMA = ("source string, records long, distinct long, first long, last long, "
                  "missing long, duplicates long, out_of_order long, complete boolean")


@dataclass(frozen=True, slots=True)
class SourceSpan:
    """A source's numbered deliveries at their destination: how many, lowest, highest."""

    records: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Audit:
    """The audit's tables, and the per-source summary already on the driver."""

    summary: list[dict[str, Any]]
    missing: DataFrame | None
    """None when ``rows`` holds the table (:func:`audit_rows`), as for the next two."""
    duplicates: DataFrame | None
    out_of_order: DataFrame | None
    """Persisted (its rows were counted): the caller unpersists it when written."""
    twice: list[str] = field(default_factory=list)
    """Sources that delivered a number more than once (``duplicates`` has rows of these)."""
    missing_rows: list[tuple[str, int, int, int]] | None = None
    """``missing``'s rows when the driver found the gaps (None: Spark sorted them)."""
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    """Every table's rows, by name (``missing``, ``duplicates``, ``out_of_order``), when the
    driver made them all (:func:`audit_rows`; timestamps in µs); else empty."""


def _sequenced(records: DataFrame) -> DataFrame:
    """Numbered deliveries at their destination estate."""
    return records.where(F.col("sequence").isNotNull() & at_destination())


def audit_duplicates(records: DataFrame) -> DataFrame:
    """Sequence numbers delivered more than once (anywhere), per source.

    Counted first, and only the few numbers seen twice have their nodes
    gathered: collecting a set for every number of a million costs seconds.
    """
    sequenced = _sequenced(records)
    twice = (sequenced.groupBy("source", "sequence").agg(F.count("*").alias("copies"))
             .where(F.col("copies") > 1))
    nodes = (sequenced.join(twice.select("source", "sequence"),
                            ["source", "sequence"])
             .groupBy("source", "sequence")
             .agg(F.array_sort(F.collect_set("node")).alias("nodes")))
    return twice.join(nodes, ["source", "sequence"]).select("source", "sequence", "copies",
                                                            "nodes")


def audit_missing(records: DataFrame) -> DataFrame:
    """Gaps in each source's sequence numbers, as ranges [first_missing, last_missing],
    found by sorting each source's distinct numbers."""
    seen = _sequenced(records).select("source", "sequence").distinct()
    previous = F.lag("sequence").over(Window.partitionBy("source").orderBy("sequence"))
    return (seen.withColumn("previous", previous)
            .where(F.col("sequence") - F.col("previous") > 1)
            .select("source", (F.col("previous") + 1).alias("first_missing"),
                    (F.col("sequence") - 1).alias("last_missing"),
                    (F.col("sequence") - F.col("previous") - 1).alias("missing")))


def audit_out_of_order(records: DataFrame, once: Iterable[str] = ()) -> DataFrame:
    """First arrivals at a node of a sequence number lower than one that node already had.

    Each number's first arrival at a node is found by aggregation (a hash, not
    a sort); the highest number before it is a running maximum over those
    first arrivals alone, which is the same as over every earlier arrival (a
    later copy of a number came after its own first arrival).  Sources in
    ``once`` delivered no number twice: every record of theirs is a first
    arrival, and the aggregation is skipped for them.
    """
    sequenced = _sequenced(records)
    single = list(once)
    again = (sequenced.where(~F.col("source").isin(single)) if single else sequenced)
    firsts = (again.groupBy("source", "node", "sequence")
              .agg(F.min("received").alias("received"), F.min("received_at").alias("received_at")))
    if single:
        firsts = (sequenced.where(F.col("source").isin(single))
                  .select("source", "node", "sequence", "received", "received_at")
                  .unionByName(firsts))
    before = (Window.partitionBy("source", "node").orderBy("received", "sequence")
              .rowsBetween(Window.unboundedPreceding, -1))
    return (firsts.withColumn("highest_before", F.max("sequence").over(before))
            .where(F.col("sequence") < F.col("highest_before"))
            .select("source", "node", "sequence", "highest_before", "received_at"))


def _bucket(sequence: int) -> int:
    """Spark's ``bitmap_bucket_number`` of a positive number."""
    return (sequence - 1) // BITMAP_BITS + 1


def _gaps(spans: Mapping[str, SourceSpan], bitmaps: Mapping[tuple[str, int], bytes],
          most: int) -> tuple[list[tuple[str, int, int, int]], dict[str, int]] | None:
    """The runs of zeros between each source's first and last number, and its count of
    distinct numbers; None past ``most`` gaps.  Bit ``i`` of bucket ``b`` (Spark's
    layout: little-endian bytes, low bit first) is number ``(b - 1) * 32768 + i + 1``."""
    gaps: list[tuple[str, int, int, int]] = []
    distinct: dict[str, int] = {}
    for source, span in spans.items():
        seen = 0
        for bucket in range(_bucket(span.first), _bucket(span.last) + 1):
            base = (bucket - 1) * BITMAP_BITS + 1
            bits = int.from_bytes(bitmaps.get((source, bucket), b""), "little")
            seen += bits.bit_count()
            low = max(span.first, base) - base
            high = min(span.last, base + BITMAP_BITS - 1) - base  # inclusive
            holes = ~bits & (((1 << (high + 1)) - 1) ^ ((1 << low) - 1))
            while holes:
                start = (holes & -holes).bit_length() - 1
                after = bits >> start  # bit `start` is a hole: the next set bit ends it
                length = (after & -after).bit_length() - 1 if after else high + 1 - start
                first, last = base + start, base + start + length - 1
                if gaps and gaps[-1][0] == source and gaps[-1][2] == first - 1:
                    first = gaps.pop()[1]  # a gap running on from the bucket before
                gaps.append((source, first, last, last - first + 1))
                if len(gaps) > most:
                    return None
                holes &= ~(((1 << length) - 1) << start)
        distinct[source] = seen
    return gaps, distinct


def audit(records: DataFrame, spans: Mapping[str, SourceSpan], *,
          most_bitmaps: int = MOST_BITMAPS, most_gaps: int = MOST_GAPS) -> Audit:
    """Audit the valid ``records``; ``spans`` per source (from ``fine_counts``)."""
    spark = records.sparkSession
    sequenced = _sequenced(records)
    spans = {source: span for source, span in spans.items() if span.records > 0}
    buckets = sum(_bucket(span.last) - _bucket(span.first) + 1 for span in spans.values())
    found = None
    if all(span.first >= 1 for span in spans.values()) and buckets <= most_bitmaps:
        rows = (sequenced.groupBy("source", F.bitmap_bucket_number("sequence").alias("bucket"))
                .agg(F.bitmap_construct_agg(F.bitmap_bit_position("sequence")).alias("bits"))
                .collect())
        found = _gaps(spans, {(row["source"], row["bucket"]): bytes(row["bits"])
                              for row in rows}, most_gaps)
    if found is not None:
        gap_rows, distinct = found
        missing = spark.createDataFrame(gap_rows, MISSING_SCHEMA)
        missing_counts: dict[str, int] = {}
        for source, _first, _last, count in gap_rows:
            missing_counts[source] = missing_counts.get(source, 0) + count
    else:
        log.info("pipeline: audit gaps by sorting (%d bitmaps wanted, at most %d)", buckets,
                 most_bitmaps)
        missing = audit_missing(records)
        distinct = _by_source(sequenced.groupBy("source").agg(
            F.countDistinct("sequence").alias("n")).collect())
        missing_counts = _by_source(missing.groupBy("source").agg(
            F.sum("missing").alias("n")).collect())
    twice = [source for source, span in spans.items() if span.records > distinct.get(source, 0)]
    duplicates = (audit_duplicates(records.where(F.col("source").isin(twice))) if twice
                  else spark.createDataFrame([], DUPLICATES_SCHEMA))
    # kept: its rows are counted here and written by the caller, and it costs a sort
    out_of_order = audit_out_of_order(
        records, [source for source in spans if source not in twice]).persist(
        StorageLevel.MEMORY_AND_DISK)
    return Audit(_summary(spans, distinct, missing_counts, _late_counts(out_of_order)),
                 missing, duplicates, out_of_order, twice,
                 gap_rows if found is not None else None)


def clean_pairs(ranges: Iterable[tuple[str, str, int, int, float, float]]
                ) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Which (source, node) pairs' out-of-order arrivals are the union of each unit's.

    ``ranges`` holds, per unit (an hour, say) and pair, the lowest and highest number
    and the earliest and latest receive time of its numbered deliveries.  Taken in
    receive order, a pair's units must not overlap in time, and each must start above
    the highest number of the units before it: then no delivery is late because of an
    earlier unit, and each unit's own late arrivals are the pair's.  Returns the pairs
    that pass and those that do not (their arrivals are sorted afresh; rare: a number
    delivered an hour late, or a clock that stepped back across an hour).
    """
    by_pair: dict[tuple[str, str], list[tuple[float, float, int, int]]] = {}
    for source, node, low, high, earliest, latest in ranges:
        by_pair.setdefault((source, node), []).append((earliest, latest, low, high))
    clean: set[tuple[str, str]] = set()
    dirty: set[tuple[str, str]] = set()
    for pair, units in by_pair.items():
        units.sort()
        ok = True
        for (_, latest, _, _), (earliest, _, _, _) in itertools.pairwise(units):
            ok = ok and latest < earliest
        highest = units[0][3]
        for _, _, low, high in units[1:]:
            ok = ok and low > highest
            highest = max(highest, high)
        (clean if ok else dirty).add(pair)
    return clean, dirty


def _pair_key() -> Any:
    """One string per (source, node), told apart whatever they hold: the source's length
    first (a separator alone would join ``("m\\0n", "x")`` and ``("m", "n\\0x")``)."""
    return F.concat(F.length("source").cast("string"), F.lit(":"), F.col("source"),
                    F.lit(":"), F.col("node"))


def _pair_text(source: str, node: str) -> str:
    """:func:`_pair_key` on the driver (Spark's ``length`` counts code points, as ``len``)."""
    return f"{len(source)}:{source}:{node}"


@dataclass(frozen=True, slots=True)
class Folded:
    """The ``sequences`` partials folded: per (source, bucket) the OR of their bitmaps, and
    per (unit, source, node) the lowest and highest number and receive time."""

    bitmaps: dict[tuple[str, int], bytes]
    ranges: list[tuple[str, str, str, int, int, float, float]]
    """(unit, source, node, low, high, earliest, latest)."""


def fold_sequences(rows: Iterable[Mapping[str, Any]]) -> Folded:
    """:class:`Folded` from ``sequences`` rows already on the driver (with ``unit``)."""
    bits: dict[tuple[str, int], int] = {}
    size: dict[tuple[str, int], int] = {}
    ranges: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        key = (row["source"], row["bucket"])
        bits[key] = bits.get(key, 0) | int.from_bytes(row["bits"], "little")
        size[key] = max(size.get(key, 0), len(row["bits"]))
        at = (row["unit"], row["source"], row["node"])
        found = ranges.get(at)
        if found is None:
            ranges[at] = [row["sequence_min"], row["sequence_max"], row["received_min"],
                          row["received_max"]]
        else:
            found[0] = min(found[0], row["sequence_min"])
            found[1] = max(found[1], row["sequence_max"])
            found[2] = min(found[2], row["received_min"])
            found[3] = max(found[3], row["received_max"])
    return Folded({key: value.to_bytes(size[key], "little") for key, value in bits.items()},
                  [(*at, int(low), int(high), float(earliest), float(latest))
                   for at, (low, high, earliest, latest) in ranges.items()])


def _fold(sequences: DataFrame) -> Folded:
    """:class:`Folded` by Spark: the two jobs at once."""
    spark = sequences.sparkSession
    with ThreadPoolExecutor(max_workers=1) as pool:
        ranged = pool.submit(inheriting(spark)(_ranges(sequences).collect))
        rows = (sequences.groupBy("source", "bucket")
                .agg(F.bitmap_or_agg("bits").alias("bits")).collect())
        ranges = ranged.result()
    return Folded({(row["source"], row["bucket"]): bytes(row["bits"]) for row in rows},
                  [(row["unit"], row["source"], row["node"], int(row["low"]), int(row["high"]),
                    float(row["earliest"]), float(row["latest"])) for row in ranges])


def audit_partials(records: DataFrame, spans: Mapping[str, SourceSpan],
                   sequences: DataFrame, late: DataFrame, *, most_bitmaps: int = MOST_BITMAPS,
                   most_gaps: int = MOST_GAPS, folded: Folded | None = None) -> Audit:
    """:func:`audit` from partial aggregates (``_partials``), the same tables.

    ``sequences`` is the union of the units' ``sequences`` partials with a ``unit``
    column; ``late`` the union of their ``late`` partials.  The gaps come from the
    bitmaps OR-ed across units (``folded``, when the caller has them; else two jobs);
    the records are read only for what the partials cannot tell: the duplicates (at
    sources that have any), the out-of-order arrivals of those sources and of pairs
    :func:`clean_pairs` rejects, and gaps past the bounds.
    """
    spark = records.sparkSession
    spans = {source: span for source, span in spans.items() if span.records > 0}
    buckets = sum(_bucket(span.last) - _bucket(span.first) + 1 for span in spans.values())
    found = None
    if all(span.first >= 1 for span in spans.values()) and buckets <= most_bitmaps:
        folded = folded or _fold(sequences)
        found = _gaps(spans, folded.bitmaps, most_gaps)
    if found is None or folded is None:
        return audit(records, spans, most_bitmaps=most_bitmaps, most_gaps=most_gaps)
    gap_rows, distinct = found
    missing = spark.createDataFrame(gap_rows, MISSING_SCHEMA)
    missing_counts: dict[str, int] = {}
    for source, _first, _last, count in gap_rows:
        missing_counts[source] = missing_counts.get(source, 0) + count
    twice = [source for source, span in spans.items() if span.records > distinct.get(source, 0)]
    duplicates = (audit_duplicates(records.where(F.col("source").isin(twice))) if twice
                  else spark.createDataFrame([], DUPLICATES_SCHEMA))
    clean, dirty = clean_pairs(row[1:] for row in folded.ranges if row[1] not in twice)
    kept = [_pair_text(source, node) for source, node in sorted(clean)]
    redo = [_pair_text(source, node) for source, node in sorted(dirty)]
    out_of_order = late.where(_pair_key().isin(kept)) if kept else late.limit(0)
    if twice or redo:
        log.info("pipeline: out-of-order arrivals sorted afresh for %d source(s) with "
                 "duplicates and %d (source, node) pair(s) across units", len(twice), len(redo))
        again = records.where(F.col("source").isin(twice) | _pair_key().isin(redo))
        out_of_order = out_of_order.unionByName(audit_out_of_order(
            again, [source for source, _node in dirty]))
    out_of_order = out_of_order.persist(StorageLevel.MEMORY_AND_DISK)
    return Audit(_summary(spans, distinct, missing_counts, _late_counts(out_of_order)),
                 missing, duplicates, out_of_order, twice, gap_rows)


def audit_rows(spans: Mapping[str, SourceSpan], folded: Folded,
               late: Iterable[Mapping[str, Any]], *, most_bitmaps: int = MOST_BITMAPS,
               most_gaps: int = MOST_GAPS) -> Audit | None:
    """:func:`audit_partials` on the driver alone, from rows already here: the folded
    ``sequences`` and the units' ``late`` rows (``received_at`` in µs).  It gives the
    same tables in the usual case, none of which needs a record: every source's numbers
    from 1 within :data:`MOST_BITMAPS` bitmaps, at most :data:`MOST_GAPS` gaps, no number
    delivered twice, and every (source, node)'s units in order (:func:`clean_pairs`).
    Otherwise None: :func:`audit_partials` reads the records it needs."""
    spans = {source: span for source, span in spans.items() if span.records > 0}
    buckets = sum(_bucket(span.last) - _bucket(span.first) + 1 for span in spans.values())
    if not all(span.first >= 1 for span in spans.values()) or buckets > most_bitmaps:
        return None
    found = _gaps(spans, folded.bitmaps, most_gaps)
    if found is None:
        return None
    gap_rows, distinct = found
    if any(span.records > distinct.get(source, 0) for source, span in spans.items()):
        return None  # duplicates: which, and where, only the records tell
    clean, dirty = clean_pairs(row[1:] for row in folded.ranges)
    if dirty:
        return None
    out_of_order = [(row["source"], row["node"], row["sequence"], row["highest_before"],
                     row["received_at"]) for row in late if (row["source"], row["node"]) in clean]
    missing_counts: dict[str, int] = {}
    for source, _first, _last, count in gap_rows:
        missing_counts[source] = missing_counts.get(source, 0) + count
    late_counts: dict[str, int] = {}
    for row in out_of_order:
        late_counts[row[0]] = late_counts.get(row[0], 0) + 1
    return Audit(_summary(spans, distinct, missing_counts, late_counts), None, None, None, [],
                 gap_rows, {"missing": gap_rows, "duplicates": [], "out_of_order": out_of_order})


def _ranges(sequences: DataFrame) -> DataFrame:
    """Per unit, source and node: the lowest and highest number and receive time."""
    return (sequences.groupBy("unit", "source", "node")
            .agg(F.min("sequence_min").alias("low"), F.max("sequence_max").alias("high"),
                 F.min("received_min").alias("earliest"),
                 F.max("received_max").alias("latest")))


def _late_counts(out_of_order: DataFrame) -> dict[str, int]:
    return _by_source(out_of_order.groupBy("source").agg(F.count("*").alias("n")).collect())


def _summary(spans: Mapping[str, SourceSpan], distinct: Mapping[str, int],
             missing_counts: Mapping[str, int], late: Mapping[str, int]) -> list[dict[str, Any]]:
    """The audit_summary rows: one per source with sequence numbers."""
    summary = []
    for source, span in sorted(spans.items()):
        copies = span.records - distinct.get(source, 0)
        gaps = missing_counts.get(source, 0)
        summary.append({"source": source, "records": span.records,
                        "distinct": distinct.get(source, 0), "first": span.first,
                        "last": span.last, "missing": gaps, "duplicates": copies,
                        "out_of_order": late.get(source, 0),
                        "complete": gaps == 0 and copies == 0})
    return summary


def _by_source(rows: Iterable[Any]) -> dict[str, int]:
    return {row["source"]: int(row["n"]) for row in rows}
