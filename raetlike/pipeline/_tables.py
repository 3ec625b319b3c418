"""The pipeline's tables, each a small DataFrame meant to be written as Parquet.

The records (the *valid* ones, see :func:`normalise`) are aggregated twice:
:func:`fine_counts` (per time window and stream) and :func:`latency_counts`
(per stream and latency microsecond).  Both shrink a million records to a few
thousand rows in one pass each, and every table here is a roll-up of them: a
table costs a job over those rows, not over the records.  The delivery audit,
which needs each sequence number, is in ``_audit``.  Nothing runs a Python UDF.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from raetlike.pipeline._bounds import MOST_MS, WINDOW_STEPS, choose_window, fine_step

__all__ = ["LATENCY_EDGES_MS", "TABLES", "TABLE_SCHEMAS", "WINDOW_STEPS", "at_destination",
           "choose_window", "declared_schema", "estates", "fine_counts", "fine_step",
           "fine_sums", "kinds", "latency", "latency_counts", "latency_histogram",
           "latency_sums", "merge_latency", "pairs", "quantiles", "rate_over_time",
           "remotes", "roll_up", "traffic"]

LATENCY_EDGES_MS = (0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
                    1_000.0, 2_000.0, 5_000.0, 10_000.0)
"""Lower edges of the latency histogram's buckets (ms); bucket -1 holds negative latencies."""

_STREAM = ("source", "destination", "kind", "topic")


def _interval(window_seconds: float) -> str:
    """A Spark interval string for ``window_seconds`` (milliseconds keep fractions exact)."""
    return f"{round(window_seconds * 1000)} milliseconds"


# -- the two aggregations every other table is made from -----------------------------------


def _destination_estate() -> Column:
    return F.coalesce(F.col("destination_estate"), F.col("node")).alias("destination_estate")


_ENDS = ("source_estate", "source_yard", "source_share", "destination_yard",
         "destination_share")


def _ends(frame: DataFrame) -> DataFrame:
    """``source`` and ``destination`` made from their parts after a group-by on the parts
    (a few thousand rows, not a million), in place of the yards and shares."""
    return frame.withColumns({
        "source": F.concat_ws("/", "source_estate", "source_yard", "source_share"),
        "destination": F.concat_ws("/", "destination_estate", "destination_yard",
                                   "destination_share"),
    }).drop("source_yard", "source_share", "destination_yard", "destination_share")


_SUMS = ("messages", "bytes", "segments", "multi_segment_messages", "resends",
         "messages_with_resends", "timed", "sequenced")
_MAXIMA = ("segments_max", "resends_max", "max_ms", "sequence_max")
_MINIMA = ("sequence_min",)
_PARTS = ("node", "kind", "topic", *_ENDS, "destination_estate")


def fine_sums(records: DataFrame, window_seconds: float) -> DataFrame:
    """:func:`fine_counts` before the ends are joined: one row per window and the stream's
    parts (node, kind, topic, source and destination estate, yard and share).  Every column
    is a sum, a maximum or a minimum, so rows of windows that divide a wider one roll up to
    it (:func:`roll_up`): the store keeps these per hour (``_partials``)."""
    sequenced = at_destination() & F.col("sequence").isNotNull()
    return (records.groupBy(F.window("received_at", _interval(window_seconds))
                            .start.alias("window_start"), "node", "kind", "topic", *_ENDS,
                            _destination_estate())
            .agg(F.count("*").alias("messages"), F.sum("body_bytes").alias("bytes"),
                 F.sum("segments").alias("segments"), F.max("segments").alias("segments_max"),
                 F.count(F.when(F.col("segments") > 1, 1)).alias("multi_segment_messages"),
                 F.sum("resends").alias("resends"), F.max("resends").alias("resends_max"),
                 F.count(F.when(F.col("resends") > 0, 1)).alias("messages_with_resends"),
                 F.count("latency_ms").alias("timed"), F.max("latency_ms").alias("max_ms"),
                 F.count(F.when(sequenced, 1)).alias("sequenced"),
                 F.min(F.when(sequenced, F.col("sequence"))).alias("sequence_min"),
                 F.max(F.when(sequenced, F.col("sequence"))).alias("sequence_max")))


def roll_up(sums: DataFrame, window_seconds: float) -> DataFrame:
    """Rows of :func:`fine_sums` (at any window width that divides ``window_seconds``, from
    any number of hours) -> :func:`fine_counts` at ``window_seconds``: the same rows as
    computed from the records.  Windows are aligned to the epoch, so a narrow window lies
    in exactly one wide one."""
    wide = F.window("window_start", _interval(window_seconds)).start.alias("window_start")
    merged = sums.groupBy(wide, *_PARTS).agg(
        *[F.sum(name).alias(name) for name in _SUMS],
        *[F.max(name).alias(name) for name in _MAXIMA],
        *[F.min(name).alias(name) for name in _MINIMA])
    return _ends(merged.select("window_start", *_PARTS, "messages", "bytes", "segments",
                               "segments_max", "multi_segment_messages", "resends",
                               "resends_max", "messages_with_resends", "timed", "max_ms",
                               "sequenced", "sequence_min", "sequence_max"))


def fine_counts(records: DataFrame, window_seconds: float) -> DataFrame:
    """Per time window and stream (node, source, destination, their estates, kind, topic):
    messages, bytes, segments, resends, timed
    messages, the highest latency, and the numbered deliveries at their destination
    (count, lowest and highest number) that the audit starts from.

    One pass over the records, with partial aggregation before the shuffle: its
    rows number streams times windows, and every count table is a roll-up of them.
    """
    return _ends(fine_sums(records, window_seconds))


def latency_sums(records: DataFrame) -> DataFrame:
    """:func:`latency_counts` before the ends are joined (what the store keeps per hour)."""
    latency = F.greatest(F.least(F.col("latency_ms"), F.lit(MOST_MS)), F.lit(-MOST_MS))
    return (records.where(F.col("latency_ms").isNotNull())
            .groupBy("kind", "topic", *_ENDS, _destination_estate(),
                     F.floor(latency * 1000).alias("us"))
            .agg(F.count("*").alias("n")))


def merge_latency(sums: DataFrame) -> DataFrame:
    """Rows of :func:`latency_sums` from any number of hours -> :func:`latency_counts`."""
    keys = ("kind", "topic", *_ENDS, "destination_estate", "us")
    return _ends(sums.groupBy(*keys).agg(F.sum("n").alias("n")))


def latency_counts(records: DataFrame) -> DataFrame:
    """Timed messages per (source, destination, their estates, kind, topic) and latency
    microsecond (``us``, the
    latency in ms times 1000, rounded down): the quantiles are read from it."""
    return _ends(latency_sums(records))


def quantiles(latencies: DataFrame, *keys: str) -> DataFrame:
    """Latency p50/p90/p99 (ms) per ``keys`` from :func:`latency_counts`'s rows.

    Each is the nearest rank: the smallest latency with at least that fraction of
    the group's at or below it, to the microsecond below (so never above the
    group's highest).  Exact, and cheap: the microseconds are few.
    """
    # Without keys (the run's overall quantiles) there is one group, and Spark, finding
    # the constant ``_all`` its only partition key, warns that the window moves all data
    # to a single partition: it must (a running sum over every microsecond), and the
    # data is one row per distinct microsecond, not per record.
    names = list(keys) or ["_all"]
    group = [F.col(key) for key in keys] or [F.lit(0).alias("_all")]
    counts = latencies.groupBy(*group, "us").agg(F.sum("n").alias("n"))
    upto = (Window.partitionBy(*names).orderBy("us")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    ranked = (counts.withColumn("below", F.sum("n").over(upto))
              .withColumn("total", F.sum("n").over(Window.partitionBy(*names))))

    def rank(fraction: float) -> Column:
        return F.min(F.when(F.col("below") >= F.ceil(F.col("total") * fraction),
                            F.col("us"))) / 1000.0

    frame = ranked.groupBy(*names).agg(rank(0.5).alias("p50_ms"), rank(0.9).alias("p90_ms"),
                                       rank(0.99).alias("p99_ms"))
    return frame if keys else frame.drop("_all")


# -- the tables ----------------------------------------------------------------------------

def traffic(counts: DataFrame, window_seconds: float) -> DataFrame:
    """Per time window and (source, destination, kind, topic): messages, bytes and their rates."""
    span = F.expr(f"INTERVAL {round(window_seconds * 1000)} MILLISECONDS")
    return (counts.groupBy("window_start", *_STREAM)
            .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
            .select("window_start", (F.col("window_start") + span).alias("window_end"),
                    *_STREAM, "messages", "bytes",
                    (F.col("messages") / window_seconds).alias("messages_per_second"),
                    (F.col("bytes") / window_seconds).alias("bytes_per_second")))


def rate_over_time(counts: DataFrame, window_seconds: float) -> DataFrame:
    """All traffic per time window: messages and messages per second (for the rate plot)."""
    return (counts.groupBy("window_start")
            .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
            .select("window_start", "messages", "bytes",
                    (F.col("messages") / window_seconds).alias("messages_per_second")))


def _with_quantiles(frame: DataFrame, latencies: DataFrame, *keys: str) -> DataFrame:
    """``frame`` with the p50/p90/p99 of its ``keys`` (null when it has no timed messages).
    Keys match when both are null: a stream without a topic has quantiles of its own."""
    found = quantiles(latencies, *keys).select(
        *[F.col(key).alias(f"_q_{key}") for key in keys], "p50_ms", "p90_ms", "p99_ms")
    match = [F.col(key).eqNullSafe(F.col(f"_q_{key}")) for key in keys]
    return frame.join(found, match, "left").drop(*[f"_q_{key}" for key in keys])


def latency(counts: DataFrame, latencies: DataFrame) -> DataFrame:
    """Per (source, destination, kind, topic): latency p50/p90/p99/max where ``sent`` is known."""
    timed = (counts.groupBy(*_STREAM).agg(F.sum("timed").alias("messages"),
                                          F.max("max_ms").alias("max_ms"))
             .where(F.col("messages") > 0))
    return (_with_quantiles(timed, latencies, *_STREAM)
            .select(*_STREAM, "messages", "p50_ms", "p90_ms", "p99_ms", "max_ms"))


def _breakdown(counts: DataFrame, latencies: DataFrame, *keys: str) -> DataFrame:
    sums = counts.groupBy(*keys).agg(
        F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"),
        F.sum("timed").alias("timed"), F.max("max_ms").alias("max_ms"),
        F.sum("segments").alias("segments"), F.sum("resends").alias("resends"),
        F.sum("messages_with_resends").alias("messages_with_resends"))
    return (_with_quantiles(sums, latencies, *keys)
            .select(*keys, "messages", "bytes", "timed", "p50_ms", "p90_ms", "p99_ms",
                    "max_ms", "segments", "resends", "messages_with_resends"))


def kinds(counts: DataFrame, latencies: DataFrame) -> DataFrame:
    """Per kind (message, request, event, survey, ...): counts, latency p50/p90/p99, resends."""
    return _breakdown(counts, latencies, "kind")


def pairs(counts: DataFrame, latencies: DataFrame) -> DataFrame:
    """Per (source estate, destination estate): counts, latency p50/p90/p99, resends."""
    return _breakdown(counts, latencies, "source_estate", "destination_estate")


def latency_histogram(latencies: DataFrame) -> DataFrame:
    """Messages per latency bucket (``bucket``, ``low_ms``); see :data:`LATENCY_EDGES_MS`."""
    value = F.col("us")
    bucket: Column = F.when(value < 0, F.lit(-1))
    for index in range(len(LATENCY_EDGES_MS) - 1, -1, -1):
        bucket = bucket.when(value >= round(LATENCY_EDGES_MS[index] * 1000), F.lit(index))
    return latencies.groupBy(bucket.alias("bucket")).agg(F.sum("n").alias("messages"))


def remotes(counts: DataFrame) -> DataFrame:
    """Per journaling node and remote (source estate): segment and resend statistics."""
    return counts.groupBy("node", F.col("source_estate").alias("remote")).agg(
        F.sum("messages").alias("messages"),
        F.sum("bytes").alias("bytes"),
        F.sum("segments").alias("segments"),
        (F.sum("segments") / F.sum("messages")).alias("segments_mean"),
        F.max("segments_max").alias("segments_max"),
        F.sum("multi_segment_messages").alias("multi_segment_messages"),
        F.sum("resends").alias("resends"),
        F.max("resends_max").alias("resends_max"),
        F.sum("messages_with_resends").alias("messages_with_resends"),
    )


def estates(counts: DataFrame, latencies: DataFrame) -> DataFrame:
    """Per estate: messages and bytes sent and received, and latency of what it received."""
    sent = counts.groupBy(F.col("source_estate").alias("estate")).agg(
        F.sum("messages").alias("messages_sent"), F.sum("bytes").alias("bytes_sent"))
    received = (counts.groupBy(F.col("destination_estate").alias("estate")).agg(
        F.sum("messages").alias("messages_received"), F.sum("bytes").alias("bytes_received"))
        .join(quantiles(latencies, "destination_estate")
              .select(F.col("destination_estate").alias("estate"),
                      F.col("p50_ms").alias("received_p50_ms"),
                      F.col("p99_ms").alias("received_p99_ms")), "estate", "left"))
    return (sent.join(received, "estate", "full_outer")
            .fillna(0, ["messages_sent", "bytes_sent", "messages_received", "bytes_received"]))


def at_destination() -> Column:
    """A delivery journaled where it was addressed: a manor that relays a message journals
    it too (``node`` is then not the destination estate), and that copy is no duplicate."""
    return F.col("destination_estate").isNull() | (F.col("node") == F.col("destination_estate"))


TABLES = ("traffic", "rate", "latency", "latency_histogram", "remotes", "estates", "kinds",
          "pairs", "audit_summary", "audit_missing", "audit_duplicates", "audit_out_of_order")
"""The Parquet tables the pipeline writes, each under ``OUT/tables/NAME/`` (unordered)."""


_TYPES: dict[str, DataType] = {"timestamp": TimestampType(), "string": StringType(),
                               "bigint": LongType(), "double": DoubleType(),
                               "int": IntegerType(), "binary": BinaryType(),
                               "long": LongType(), "boolean": BooleanType(),
                               "array<string>": ArrayType(StringType())}


def declared_schema(columns: str) -> StructType:
    """``"name type, ..."`` as a schema; a type ending in ``!`` is never null."""
    fields = []
    for column in columns.split(","):
        name, kind = column.split()
        fields.append(StructField(name, _TYPES[kind.rstrip("!")], not kind.endswith("!")))
    return StructType(fields)


_QUANTILES = "p50_ms double, p90_ms double, p99_ms double"
_BREAKDOWN = (f"messages bigint, bytes bigint, timed bigint, {_QUANTILES}, max_ms double, "
              "segments bigint, resends bigint, messages_with_resends bigint")
TABLE_SCHEMAS: dict[str, StructType] = {
    "traffic": declared_schema(
        "window_start timestamp, window_end timestamp, source string!, destination string!, "
        "kind string, topic string, messages bigint, bytes bigint, "
        "messages_per_second double, bytes_per_second double"),
    "rate": declared_schema(
        "window_start timestamp, messages bigint, bytes bigint, messages_per_second double"),
    "latency": declared_schema(
        f"source string!, destination string!, kind string, topic string, messages bigint, "
        f"{_QUANTILES}, max_ms double"),
    "latency_histogram": declared_schema("bucket int, messages bigint"),
    "remotes": declared_schema(
        "node string, remote string, messages bigint, bytes bigint, segments bigint, "
        "segments_mean double, segments_max bigint, multi_segment_messages bigint, "
        "resends bigint, resends_max bigint, messages_with_resends bigint"),
    "estates": declared_schema(
        "estate string, messages_sent bigint, bytes_sent bigint, messages_received bigint, "
        "bytes_received bigint, received_p50_ms double, received_p99_ms double"),
    "kinds": declared_schema(f"kind string, {_BREAKDOWN}"),
    "pairs": declared_schema(f"source_estate string, destination_estate string, {_BREAKDOWN}"),
}
"""The schema of each table this module computes from the partials (a test checks each
against Spark's plan): the tables computed on the driver (``_rows``) are written with it."""
