"""The pipeline's tables, each a DataFrame computed from normalised journal records.

Every function takes the *valid* records (see :func:`normalise`) and returns a
small DataFrame meant to be written as Parquet.  Nothing here runs a Python UDF.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

__all__ = ["LATENCY_EDGES_MS", "TABLES", "WINDOW_STEPS", "audit_duplicates", "audit_missing",
           "audit_out_of_order", "audit_summary", "choose_window", "estates", "kinds", "latency",
           "latency_histogram", "pairs", "rate_over_time", "remotes", "traffic"]

PERCENTILE_ACCURACY = 100_000

LATENCY_EDGES_MS = (0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
                    1_000.0, 2_000.0, 5_000.0, 10_000.0)
"""Lower edges of the latency histogram's buckets (ms); bucket -1 holds negative latencies."""

_STREAM = ("source", "destination", "kind", "topic")

WINDOW_STEPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0,
                300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0)
"""Round window widths (seconds) the rate plot picks from."""

MOST_WINDOWS = 60
"""The rate plot's most windows; the fitted width gives at least 24 for a run of 1 s or more
(each round width is at most 2.5 times the one before it)."""


def choose_window(span_seconds: float, most: int = MOST_WINDOWS) -> float:
    """The smallest round width that cuts ``span_seconds`` into at most ``most`` windows.

    Windows are aligned to the epoch, so a span of ``k`` widths can touch
    ``k + 1`` of them: the width is chosen so that even then there are no
    more than ``most``.  A 12 s run gets 0.5 s windows (25 of them), a
    minute 2 s ones, an hour 2 min ones, a week 3 h ones.
    """
    for width in WINDOW_STEPS:
        if span_seconds / width + 1 <= most:
            return width
    days = WINDOW_STEPS[-1]
    return days * (span_seconds // (days * (most - 1)) + 1)


def _interval(window_seconds: float) -> str:
    """A Spark interval string for ``window_seconds`` (milliseconds keep fractions exact)."""
    return f"{round(window_seconds * 1000)} milliseconds"


def _percentiles(column: str) -> list[Column]:
    quantiles = F.percentile_approx(F.col(column), [0.5, 0.9, 0.99], PERCENTILE_ACCURACY)
    return [quantiles[0].alias("p50_ms"), quantiles[1].alias("p90_ms"),
            quantiles[2].alias("p99_ms"), F.max(column).alias("max_ms")]


def traffic(records: DataFrame, window_seconds: float) -> DataFrame:
    """Per time window and (source, destination, kind, topic): messages, bytes and their rates."""
    span = _interval(window_seconds)
    return (records.groupBy(F.window("received_at", span).alias("window"), *_STREAM)
            .agg(F.count("*").alias("messages"), F.sum("body_bytes").alias("bytes"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), *_STREAM, "messages", "bytes",
                    (F.col("messages") / window_seconds).alias("messages_per_second"),
                    (F.col("bytes") / window_seconds).alias("bytes_per_second")))


def rate_over_time(records: DataFrame, window_seconds: float) -> DataFrame:
    """All traffic per time window: messages and messages per second (for the rate plot)."""
    span = _interval(window_seconds)
    return (records.groupBy(F.window("received_at", span).alias("window"))
            .agg(F.count("*").alias("messages"), F.sum("body_bytes").alias("bytes"))
            .select(F.col("window.start").alias("window_start"), "messages", "bytes",
                    (F.col("messages") / window_seconds).alias("messages_per_second")))


def latency(records: DataFrame) -> DataFrame:
    """Per (source, destination, kind, topic): latency p50/p90/p99/max where ``sent`` is known."""
    timed = records.where(F.col("latency_ms").isNotNull())
    return timed.groupBy(*_STREAM).agg(F.count("*").alias("messages"),
                                       *_percentiles("latency_ms"))


def _breakdown(records: DataFrame, *keys: Column) -> DataFrame:
    quantiles = F.percentile_approx(F.col("latency_ms"), [0.5, 0.9, 0.99], PERCENTILE_ACCURACY)
    return records.groupBy(*keys).agg(
        F.count("*").alias("messages"), F.sum("body_bytes").alias("bytes"),
        F.count("latency_ms").alias("timed"),
        quantiles[0].alias("p50_ms"), quantiles[1].alias("p90_ms"),
        quantiles[2].alias("p99_ms"), F.max("latency_ms").alias("max_ms"),
        F.sum("segments").alias("segments"), F.sum("resends").alias("resends"),
        F.sum(F.when(F.col("resends") > 0, 1).otherwise(0)).alias("messages_with_resends"))


def kinds(records: DataFrame) -> DataFrame:
    """Per kind (message, request, event, survey, ...): counts, latency p50/p90/p99, resends."""
    return _breakdown(records, F.col("kind"))


def pairs(records: DataFrame) -> DataFrame:
    """Per (source estate, destination estate): counts, latency p50/p90/p99, resends."""
    return _breakdown(records, F.col("source_estate"),
                      F.coalesce(F.col("destination_estate"), F.col("node"))
                      .alias("destination_estate"))


def latency_histogram(records: DataFrame) -> DataFrame:
    """Messages per latency bucket (``bucket``, ``low_ms``); see :data:`LATENCY_EDGES_MS`."""
    value = F.col("latency_ms")
    bucket: Column = F.when(value < 0, F.lit(-1))
    for index in range(len(LATENCY_EDGES_MS) - 1, -1, -1):
        bucket = bucket.when(value >= LATENCY_EDGES_MS[index], F.lit(index))
    return (records.where(value.isNotNull()).groupBy(bucket.alias("bucket"))
            .agg(F.count("*").alias("messages")))


def remotes(records: DataFrame) -> DataFrame:
    """Per journaling node and remote (source estate): segment and resend statistics."""
    return records.groupBy("node", F.col("source_estate").alias("remote")).agg(
        F.count("*").alias("messages"),
        F.sum("body_bytes").alias("bytes"),
        F.sum("segments").alias("segments"),
        F.avg("segments").alias("segments_mean"),
        F.max("segments").alias("segments_max"),
        F.sum(F.when(F.col("segments") > 1, 1).otherwise(0)).alias("multi_segment_messages"),
        F.sum("resends").alias("resends"),
        F.max("resends").alias("resends_max"),
        F.sum(F.when(F.col("resends") > 0, 1).otherwise(0)).alias("messages_with_resends"),
    )


def estates(records: DataFrame) -> DataFrame:
    """Per estate: messages and bytes sent and received, and latency of what it received."""
    sent = records.groupBy(F.col("source_estate").alias("estate")).agg(
        F.count("*").alias("messages_sent"), F.sum("body_bytes").alias("bytes_sent"))
    quantiles = F.percentile_approx(F.col("latency_ms"), [0.5, 0.99], PERCENTILE_ACCURACY)
    received = records.groupBy(F.col("destination_estate").alias("estate")).agg(
        F.count("*").alias("messages_received"), F.sum("body_bytes").alias("bytes_received"),
        quantiles[0].alias("received_p50_ms"), quantiles[1].alias("received_p99_ms"))
    return (sent.join(received, "estate", "full_outer")
            .fillna(0, ["messages_sent", "bytes_sent", "messages_received", "bytes_received"]))


def _sequenced(records: DataFrame) -> DataFrame:
    """Numbered deliveries at their destination estate.

    A manor that relays a message journals it too (``node`` is then not the
    destination estate); counting that copy would report a duplicate.
    """
    at_destination = (F.col("destination_estate").isNull()
                      | (F.col("node") == F.col("destination_estate")))
    return records.where(F.col("sequence").isNotNull() & at_destination)


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
    return twice.join(nodes, ["source", "sequence"])


def audit_missing(records: DataFrame) -> DataFrame:
    """Gaps in each source's sequence numbers, as ranges [first_missing, last_missing]."""
    seen = _sequenced(records).select("source", "sequence").distinct()
    previous = F.lag("sequence").over(Window.partitionBy("source").orderBy("sequence"))
    return (seen.withColumn("previous", previous)
            .where(F.col("sequence") - F.col("previous") > 1)
            .select("source", (F.col("previous") + 1).alias("first_missing"),
                    (F.col("sequence") - 1).alias("last_missing"),
                    (F.col("sequence") - F.col("previous") - 1).alias("missing")))


def audit_out_of_order(records: DataFrame) -> DataFrame:
    """First arrivals at a node of a sequence number lower than one that node already had.

    Each number's first arrival at a node is found by aggregation (a hash, not
    a sort); the highest number before it is a running maximum over those
    first arrivals alone, which is the same as over every earlier arrival (a
    later copy of a number came after its own first arrival).
    """
    firsts = (_sequenced(records).groupBy("source", "node", "sequence")
              .agg(F.min("received").alias("received"), F.min("received_at").alias("received_at")))
    before = (Window.partitionBy("source", "node").orderBy("received", "sequence")
              .rowsBetween(Window.unboundedPreceding, -1))
    return (firsts.withColumn("highest_before", F.max("sequence").over(before))
            .where(F.col("sequence") < F.col("highest_before"))
            .select("source", "node", "sequence", "highest_before", "received_at"))


def audit_summary(records: DataFrame, missing: DataFrame, duplicates: DataFrame,
                  out_of_order: DataFrame) -> DataFrame:
    """Per source: records, sequence range, missing, duplicates, out of order, complete."""
    base = _sequenced(records).groupBy("source").agg(
        F.count("*").alias("records"), F.countDistinct("sequence").alias("distinct"),
        F.min("sequence").alias("first"), F.max("sequence").alias("last"))
    gaps = missing.groupBy("source").agg(F.sum("missing").alias("missing"))
    copies = duplicates.groupBy("source").agg(
        F.sum(F.col("copies") - 1).alias("duplicates"))
    late = out_of_order.groupBy("source").agg(F.count("*").alias("out_of_order"))
    joined = (base.join(gaps, "source", "left").join(copies, "source", "left")
              .join(late, "source", "left")
              .fillna(0, ["missing", "duplicates", "out_of_order"]))
    return joined.withColumn("complete", (F.col("missing") == 0) & (F.col("duplicates") == 0))


TABLES = ("traffic", "rate", "latency", "latency_histogram", "remotes", "estates", "kinds",
          "pairs", "audit_summary", "audit_missing", "audit_duplicates", "audit_out_of_order")
"""The Parquet tables the pipeline writes, each under ``OUT/tables/NAME/`` (unordered)."""
