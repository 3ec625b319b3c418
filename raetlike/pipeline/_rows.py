"""The tables of :mod:`~raetlike.pipeline._tables`, computed on the driver from partial rows.

A run's partials are small (a million records make about 1,200 ``fine`` rows and
140 ``latency`` rows), and every table is a roll-up of them: done by Spark, each
table costs a job or two of fixed overhead (0.2-0.7 s here) for a few hundred
rows.  When the partials of a run hold at most ``PipelineOptions.driver_rows``
rows each, the pipeline collects them once and computes the tables here; Spark
then only writes them.  Each function gives the rows its namesake in ``_tables``
gives over the same partials, in the same column order, with Spark's semantics:
sums and extremes skip nulls and are null when every value is; a double's NaN is
above every number; groups keep null keys; windows are aligned to the epoch; and
the quantiles' joins match null keys (a null ``topic`` is a stream's own).
``tests/test_pipeline_rows.py`` checks every table against Spark's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from raetlike.pipeline._tables import LATENCY_EDGES_MS

__all__ = ["Row", "breakdown", "estates", "latency", "latency_histogram", "merge_latency",
           "quantiles", "rate_over_time", "remotes", "roll_up", "source_sums", "traffic"]

Row = dict[str, Any]

_ENDS = ("source_estate", "source_yard", "source_share", "destination_yard",
         "destination_share")
_PARTS = ("node", "kind", "topic", *_ENDS, "destination_estate")
_SUMS = ("messages", "bytes", "segments", "multi_segment_messages", "resends",
         "messages_with_resends", "timed", "sequenced")
_MAXIMA = ("segments_max", "resends_max", "max_ms", "sequence_max")
_MINIMA = ("sequence_min",)
_COUNTS = ("window_start", "node", "kind", "topic", "source_estate", "destination_estate",
           "messages", "bytes", "segments", "segments_max", "multi_segment_messages",
           "resends", "resends_max", "messages_with_resends", "timed", "max_ms", "sequenced",
           "sequence_min", "sequence_max", "source", "destination")
_STREAM = ("source", "destination", "kind", "topic")


# -- Spark's aggregates --------------------------------------------------------------------

def _sum(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, float) and math.isnan(a):
        return a
    if isinstance(b, float) and math.isnan(b):
        return b
    return max(a, b)


def _min(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, float) and math.isnan(a):
        return b
    if isinstance(b, float) and math.isnan(b):
        return a
    return min(a, b)


_Fold = Callable[[Any, Any], Any]


def _group(rows: Iterable[Row], key: Callable[[Row], tuple[Any, ...]],
           folds: dict[str, tuple[str, _Fold]]) -> dict[tuple[Any, ...], Row]:
    """Rows grouped by ``key``; each output column ``name: (input, fold)`` folded over
    the group's values of ``input``, as Spark's ``groupBy(...).agg(...)`` would."""
    groups: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        k = key(row)
        found = groups.get(k)
        if found is None:
            groups[k] = {name: row[column] for name, (column, _) in folds.items()}
        else:
            for name, (column, fold) in folds.items():
                found[name] = fold(found[name], row[column])
    return groups


def _joined(parts: Sequence[Any]) -> str:
    """Spark's ``concat_ws("/", ...)``: the parts that are not null, joined."""
    return "/".join(part for part in parts if part is not None)


# -- the two merged partials ---------------------------------------------------------------

def roll_up(fine: Iterable[Row], window_seconds: float) -> list[Row]:
    """``_tables.roll_up``: ``fine_sums`` rows (``window_start`` in microseconds) of any
    number of hours -> ``fine_counts`` rows at ``window_seconds``."""
    width = round(window_seconds * 1000) * 1000

    def key(row: Row) -> tuple[Any, ...]:
        start = row["window_start"]
        return (start - start % width, *(row[name] for name in _PARTS))

    folds: dict[str, tuple[str, _Fold]] = {name: (name, _sum) for name in _SUMS}
    folds |= {name: (name, _max) for name in _MAXIMA}
    folds |= {name: (name, _min) for name in _MINIMA}
    counts = []
    for k, sums in _group(fine, key, folds).items():
        parts = dict(zip(_PARTS, k[1:], strict=True))
        row = {"window_start": k[0], **parts, **sums,
               "source": _joined([parts["source_estate"], parts["source_yard"],
                                  parts["source_share"]]),
               "destination": _joined([parts["destination_estate"],
                                       parts["destination_yard"],
                                       parts["destination_share"]])}
        counts.append({name: row[name] for name in _COUNTS})
    return counts


def merge_latency(sums: Iterable[Row]) -> list[Row]:
    """``_tables.merge_latency``: ``latency_sums`` rows of any number of hours ->
    ``latency_counts`` rows (kind, topic, source and destination estate, ``us``, ``n``,
    ``source``, ``destination``)."""
    keys = ("kind", "topic", *_ENDS, "destination_estate", "us")
    merged = _group(sums, lambda row: tuple(row[name] for name in keys), {"n": ("n", _sum)})
    out = []
    for k, value in merged.items():
        parts = dict(zip(keys, k, strict=True))
        out.append({"kind": parts["kind"], "topic": parts["topic"],
                    "source_estate": parts["source_estate"],
                    "destination_estate": parts["destination_estate"], "us": parts["us"],
                    "n": value["n"],
                    "source": _joined([parts["source_estate"], parts["source_yard"],
                                       parts["source_share"]]),
                    "destination": _joined([parts["destination_estate"],
                                            parts["destination_yard"],
                                            parts["destination_share"]])})
    return out


# -- the tables ----------------------------------------------------------------------------

def quantiles(latencies: Iterable[Row], *keys: str) -> dict[tuple[Any, ...], Row]:
    """``_tables.quantiles``: p50/p90/p99 (ms) per ``keys``, by the keys' values (the
    empty tuple without keys): the smallest microsecond with at least that fraction of
    its group at or below it, divided by 1000."""
    per: dict[tuple[Any, ...], dict[int, int]] = {}
    for row in latencies:
        counts = per.setdefault(tuple(row[key] for key in keys), {})
        counts[row["us"]] = counts.get(row["us"], 0) + row["n"]
    out = {}
    for k, counts in per.items():
        ordered = sorted(counts.items())
        total = sum(n for _, n in ordered)
        found: Row = {}
        for name, fraction in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
            need, below, value = math.ceil(total * fraction), 0, None
            for us, n in ordered:
                below += n
                if below >= need:
                    value = us / 1000.0
                    break
            found[name] = value
        out[k] = found
    return out


def traffic(counts: Iterable[Row], window_seconds: float) -> list[Row]:
    """``_tables.traffic`` (``window_start`` and ``window_end`` in microseconds)."""
    span = round(window_seconds * 1000) * 1000
    groups = _group(counts, lambda row: (row["window_start"], *(row[k] for k in _STREAM)),
                    {"messages": ("messages", _sum), "bytes": ("bytes", _sum)})
    return [{"window_start": k[0], "window_end": k[0] + span,
             **dict(zip(_STREAM, k[1:], strict=True)), **sums,
             "messages_per_second": _per(sums["messages"], window_seconds),
             "bytes_per_second": _per(sums["bytes"], window_seconds)}
            for k, sums in groups.items()]


def _per(value: int | None, seconds: float) -> float | None:
    return None if value is None else value / seconds


def rate_over_time(counts: Iterable[Row], window_seconds: float) -> list[Row]:
    """``_tables.rate_over_time`` (``window_start`` in microseconds)."""
    groups = _group(counts, lambda row: (row["window_start"],),
                    {"messages": ("messages", _sum), "bytes": ("bytes", _sum)})
    return [{"window_start": k[0], **sums,
             "messages_per_second": _per(sums["messages"], window_seconds)}
            for k, sums in groups.items()]


_NO_QUANTILES: Row = {"p50_ms": None, "p90_ms": None, "p99_ms": None}


def latency(counts: Iterable[Row], latencies: Iterable[Row]) -> list[Row]:
    """``_tables.latency``: per stream with timed messages, their quantiles and maximum."""
    timed = _group(counts, lambda row: tuple(row[k] for k in _STREAM),
                   {"messages": ("timed", _sum), "max_ms": ("max_ms", _max)})
    found = quantiles(latencies, *_STREAM)
    return [{**dict(zip(_STREAM, k, strict=True)), "messages": sums["messages"],
             **found.get(k, _NO_QUANTILES), "max_ms": sums["max_ms"]}
            for k, sums in timed.items() if sums["messages"] is not None and sums["messages"] > 0]


def breakdown(counts: Iterable[Row], latencies: Iterable[Row], *keys: str) -> list[Row]:
    """``_tables._breakdown`` (``kinds``, ``pairs``): per ``keys``, counts and quantiles."""
    groups = _group(counts, lambda row: tuple(row[k] for k in keys), {
        "messages": ("messages", _sum), "bytes": ("bytes", _sum), "timed": ("timed", _sum),
        "max_ms": ("max_ms", _max), "segments": ("segments", _sum),
        "resends": ("resends", _sum), "messages_with_resends": ("messages_with_resends", _sum)})
    found = quantiles(latencies, *keys)
    return [{**dict(zip(keys, k, strict=True)), "messages": sums["messages"],
             "bytes": sums["bytes"], "timed": sums["timed"], **found.get(k, _NO_QUANTILES),
             "max_ms": sums["max_ms"], "segments": sums["segments"], "resends": sums["resends"],
             "messages_with_resends": sums["messages_with_resends"]}
            for k, sums in groups.items()]


def latency_histogram(latencies: Iterable[Row]) -> list[Row]:
    """``_tables.latency_histogram``: messages per bucket of :data:`LATENCY_EDGES_MS`."""
    edges = [round(edge * 1000) for edge in LATENCY_EDGES_MS]
    buckets: dict[int | None, int | None] = {}
    for row in latencies:
        us = row["us"]
        bucket = None if us is None else -1 if us < 0 else max(
            index for index, edge in enumerate(edges) if us >= edge)
        buckets[bucket] = _sum(buckets.get(bucket), row["n"])
    return [{"bucket": bucket, "messages": messages} for bucket, messages in buckets.items()]


def remotes(counts: Iterable[Row]) -> list[Row]:
    """``_tables.remotes``: per node and remote (source estate), segments and resends."""
    groups = _group(counts, lambda row: (row["node"], row["source_estate"]), {
        "messages": ("messages", _sum), "bytes": ("bytes", _sum),
        "segments": ("segments", _sum), "segments_max": ("segments_max", _max),
        "multi_segment_messages": ("multi_segment_messages", _sum),
        "resends": ("resends", _sum), "resends_max": ("resends_max", _max),
        "messages_with_resends": ("messages_with_resends", _sum)})
    return [{"node": k[0], "remote": k[1], "messages": sums["messages"],
             "bytes": sums["bytes"], "segments": sums["segments"],
             "segments_mean": (None if sums["segments"] is None or sums["messages"] is None
                               else float(sums["segments"]) / float(sums["messages"])),
             "segments_max": sums["segments_max"],
             "multi_segment_messages": sums["multi_segment_messages"],
             "resends": sums["resends"], "resends_max": sums["resends_max"],
             "messages_with_resends": sums["messages_with_resends"]}
            for k, sums in groups.items()]


def estates(counts: Sequence[Row], latencies: Iterable[Row]) -> list[Row]:
    """``_tables.estates``: per estate, sent and received, and the received latency."""
    sent = _group(counts, lambda row: (row["source_estate"],),
                  {"messages_sent": ("messages", _sum), "bytes_sent": ("bytes", _sum)})
    received = _group(counts, lambda row: (row["destination_estate"],),
                      {"messages_received": ("messages", _sum),
                       "bytes_received": ("bytes", _sum)})
    found = quantiles(latencies, "destination_estate")
    # a full outer join on ``estate`` (never null: valid records have a source estate and a
    # node, which stands for a missing destination estate)
    return [{"estate": k[0],
             "messages_sent": _zero(sent.get(k, {}).get("messages_sent")),
             "bytes_sent": _zero(sent.get(k, {}).get("bytes_sent")),
             "messages_received": _zero(received.get(k, {}).get("messages_received")),
             "bytes_received": _zero(received.get(k, {}).get("bytes_received")),
             "received_p50_ms": found.get(k, _NO_QUANTILES)["p50_ms"] if k in received else None,
             "received_p99_ms": found.get(k, _NO_QUANTILES)["p99_ms"] if k in received else None}
            for k in dict.fromkeys([*sent, *received])]


def _zero(value: int | None) -> int:
    return 0 if value is None else value


def source_sums(counts: Iterable[Row]) -> list[Row]:
    """Per source: numbered deliveries (``records``), their lowest (``first``) and highest
    (``last``) number, timed ``messages``, ``max_ms``, ``resends`` and ``with_resends``:
    the audit's spans and the report's totals (``_job``'s one job in Spark)."""
    groups = _group(counts, lambda row: (row["source"],), {
        "records": ("sequenced", _sum), "first": ("sequence_min", _min),
        "last": ("sequence_max", _max), "messages": ("timed", _sum),
        "max_ms": ("max_ms", _max), "resends": ("resends", _sum),
        "with_resends": ("messages_with_resends", _sum)})
    return [{"source": k[0], **sums} for k, sums in groups.items()]
