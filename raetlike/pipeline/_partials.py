"""Partial aggregates: what every table needs from a set of records, small and mergeable.

A journal hour's records are read from JSON once (``_store``); at that time
the hour's partials are computed from them and kept beside its Parquet:

- ``fine``: :func:`~raetlike.pipeline._tables.fine_sums` at a window width
  (``step``) that every window a run holding the hour can choose is a multiple
  of (:func:`~raetlike.pipeline._bounds.fine_step`);
- ``latency``: :func:`~raetlike.pipeline._tables.latency_sums`, timed messages
  per stream and latency microsecond;
- ``sequences``: per (source, node, bitmap bucket) the numbered deliveries at
  their destination: a bitmap of the numbers seen (Spark's
  ``bitmap_construct_agg``), their count, lowest and highest number, and
  earliest and latest receive time;
- ``late``: the out-of-order arrivals among these records alone, every numbered
  delivery taken as a first arrival (exact for a source that delivered no
  number twice; the audit recomputes the others from the records).

Every column is a count, a sum, a minimum, a maximum or a bitmap, so the
partials of any number of hours merge (``_job``, ``_audit``) into the same
tables a pass over all their records would give.  Nothing here runs a Python
UDF.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import StructType

from raetlike.pipeline import _tables as tables
from raetlike.pipeline._session import inheriting

__all__ = ["PARTIAL_SCHEMAS", "PARTS", "Partials", "compute_partials", "late_arrivals",
           "read_partials", "sequence_sums", "write_partials"]

PARTS = ("fine", "latency", "sequences", "late")
"""The partials' Parquet directories, beside an hour's ``records`` in its store directory."""


@dataclass(frozen=True, slots=True)
class Partials:
    """One set of records' partial aggregates (Spark frames, lazy or read from Parquet)."""

    step: float
    """Window width (seconds) of ``fine``."""
    fine: DataFrame
    """:func:`~raetlike.pipeline._tables.fine_sums` at ``step``."""
    latency: DataFrame
    """:func:`~raetlike.pipeline._tables.latency_sums`."""
    sequences: DataFrame
    """:func:`sequence_sums`."""
    late: DataFrame
    """:func:`late_arrivals`."""


_SOURCE = ("source_estate", "source_yard", "source_share")


def _sequenced(records: DataFrame) -> DataFrame:
    return records.where(F.col("sequence").isNotNull() & tables.at_destination())


def _source() -> Column:
    """``source`` made from its parts after a group-by on them (cheaper than per record)."""
    return F.concat_ws("/", *_SOURCE).alias("source")


def sequence_sums(records: DataFrame) -> DataFrame:
    """Per (source, node, bitmap bucket of 32,768 numbers): ``bits``, the numbers seen at
    their destination; ``n`` deliveries; ``sequence_min``/``_max``; ``received_min``/``_max``."""
    sums = (_sequenced(records)
            .groupBy(*_SOURCE, "node", F.bitmap_bucket_number("sequence").alias("bucket"))
            .agg(F.bitmap_construct_agg(F.bitmap_bit_position("sequence")).alias("bits"),
                 F.count("*").alias("n"),
                 F.min("sequence").alias("sequence_min"), F.max("sequence").alias("sequence_max"),
                 F.min("received").alias("received_min"),
                 F.max("received").alias("received_max")))
    return sums.select(_source(), "node", "bucket", "bits", "n", "sequence_min", "sequence_max",
                       "received_min", "received_max")


def late_arrivals(records: DataFrame) -> DataFrame:
    """Numbered deliveries at their destination lower than one the same node had before
    (by receive time, then number), every delivery taken as a first arrival: the audit's
    out-of-order table for sources that delivered no number twice.  Partitioned by the
    joined ``source``, as the audit is: endpoints whose parts differ only in where a part
    is missing (``a``/none/``b`` and ``a``/``b``/none) are one source ``a/b`` there."""
    before = (Window.partitionBy("source", "node").orderBy("received", "sequence")
              .rowsBetween(Window.unboundedPreceding, -1))
    return (_sequenced(records)
            .select(_source(), "node", "sequence", "received")
            .withColumn("highest_before", F.max("sequence").over(before))
            .where(F.col("sequence") < F.col("highest_before"))
            .select("source", "node", "sequence", "highest_before",
                    F.timestamp_seconds("received").alias("received_at")))


def compute_partials(records: DataFrame, step: float) -> Partials:
    """The partials of valid ``records`` (normalised), ``fine`` at ``step`` seconds."""
    return Partials(step, tables.fine_sums(records, step), tables.latency_sums(records),
                    sequence_sums(records), late_arrivals(records))


def write_partials(partials: Partials, directory: Path) -> None:
    """Each partial as Parquet under ``directory/NAME``, the four jobs at once (each is one
    task over an hour's records: together they keep every core busy even for one hour)."""
    spark = partials.fine.sparkSession
    with ThreadPoolExecutor(max_workers=len(PARTS)) as pool:
        list(pool.map(inheriting(spark)(
            lambda name: getattr(partials, name).write.mode("overwrite").parquet(
                str(directory / name))), PARTS))


PARTIAL_SCHEMAS: dict[str, StructType] = {
    "fine": tables.declared_schema(
        "window_start timestamp, node string, kind string, topic string, "
        "source_estate string, source_yard string, source_share string, "
        "destination_yard string, destination_share string, destination_estate string, "
        "messages bigint!, bytes bigint, segments bigint, segments_max bigint, "
        "multi_segment_messages bigint!, resends bigint, resends_max bigint, "
        "messages_with_resends bigint!, timed bigint!, max_ms double, sequenced bigint!, "
        "sequence_min bigint, sequence_max bigint"),
    "latency": tables.declared_schema(
        "kind string, topic string, source_estate string, source_yard string, "
        "source_share string, destination_yard string, destination_share string, "
        "destination_estate string, us bigint, n bigint!"),
    "sequences": tables.declared_schema(
        "source string!, node string, bucket bigint, bits binary!, n bigint!, "
        "sequence_min bigint, sequence_max bigint, received_min double, received_max double"),
    "late": tables.declared_schema(
        "source string!, node string, sequence bigint, highest_before bigint, "
        "received_at timestamp"),
}
"""Each partial's schema as :func:`compute_partials` makes it (a test checks each against
Spark's plan), so the stored partials are read without inferring one, and no process plans
the partials over no records first (1.3 s of a cold driver)."""


def read_partials(spark: SparkSession, directories: list[Path], step: float) -> Partials:
    """The partials written by :func:`write_partials` into ``directories`` (stored hours),
    each kind read once over all of them with its fixed schema (no schema inference: no job
    per hour).  ``sequences`` gets a ``unit`` column, the name of the directory its rows
    came from (one hour each, for :func:`~raetlike.pipeline._audit.audit_partials`);
    ``step`` is the widest of their ``fine`` widths."""
    schemas = PARTIAL_SCHEMAS
    frames = {name: spark.read.schema(schemas[name]).parquet(
        *[str(directory / name) for directory in directories]) for name in PARTS}
    unit = F.regexp_extract(F.col("_metadata.file_path"), r"([^/]+)/sequences/[^/]+$", 1)
    frames["sequences"] = frames["sequences"].withColumn("unit", unit)
    return Partials(step, **frames)
