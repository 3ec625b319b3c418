"""The pipeline job: journals in, Parquet tables and a report out; once or following."""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from raetlike.pipeline import _rows as rows
from raetlike.pipeline import _tables as tables
from raetlike.pipeline._audit import (
    DUPLICATES_SCHEMA,
    MISSING_SCHEMA,
    MOST_BITMAPS,
    SUMMARY_SCHEMA,
    Audit,
    SourceSpan,
    audit_partials,
    audit_rows,
    fold_sequences,
)
from raetlike.pipeline._frames import (
    JOURNAL_SCHEMA,
    hour_directories,
    normalise,
    refuse_pattern,
    stream_json_journal,
)
from raetlike.pipeline._partials import PARTIAL_SCHEMAS, Partials, compute_partials
from raetlike.pipeline._progress import Progress
from raetlike.pipeline._report import REPORT_ROWS, ReportData, write_report
from raetlike.pipeline._session import inheriting, spark_session
from raetlike.pipeline._store import (
    CONVERTERS_NAMES,
    StoredUnit,
    out_locked,
    refresh_store,
    stored_partials,
    stored_records,
)

__all__ = ["DEFAULT_INTERVAL", "PipelineOptions", "PipelineResult",
           "follow_journals", "run_pipeline"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 10.0
DRIVER_ROWS = 20_000
"""Default :attr:`PipelineOptions.driver_rows`."""
DRIVER_BITMAPS = 4 * MOST_BITMAPS
"""The most ``sequences`` rows (a 4 KiB bitmap each: 64 MiB) the driver collects."""
WRITERS = 4  # tables written at once
_SHOWN = ("latency_histogram", "estates", "kinds", "pairs", "rate")  # the report lists whole


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    """What to analyse and where to put the results."""

    journals: tuple[Path, ...]
    """Journal directories (one per node, usually)."""
    out: Path
    """Output directory: ``tables/``, ``report.html``, plots, ``summary.json``."""
    master: str | None = None
    """Spark master URL; None: the configured one (spark-submit) or ``local[*]``."""
    since: float | None = None
    """Only records received at or after this wall time (epoch seconds)."""
    until: float | None = None
    """Only records received before this wall time (epoch seconds)."""
    window_seconds: float | None = None
    """Width of the time windows of the traffic and rate tables; None fits it to the run
    (:func:`~raetlike.pipeline._bounds.choose_window`)."""
    quiet: bool = False
    """Silence Spark's own banner and warnings (errors only), and show no progress."""
    driver_rows: int = DRIVER_ROWS
    """The most rows of each merged partial (``fine``, ``latency``; ``sequences`` at most
    :data:`DRIVER_BITMAPS`) the driver collects to compute the tables itself (``_rows``): a
    few table jobs instead of dozens.  Past it, or at 0, Spark computes every table.  A
    million records over two hours make about 1,200 ``fine`` rows; a row costs the driver
    about 2 KiB while the run lasts, and a ``fine`` row with a ``latency`` row about 80 µs of
    its CPU (the bound, 20,000 of each: 1.6 s, less than Spark takes for the tables)."""
    converter: str = "arrow"
    """What converts new segments' JSON into the store (``_store.CONVERTERS_NAMES``):
    ``arrow``, pyarrow in Spark tasks, with the units it declines left to Spark's JSON
    reader; or ``spark``, Spark's reader for all."""

    def __post_init__(self) -> None:
        if isinstance(self.driver_rows, bool) or not isinstance(self.driver_rows, int) \
                or self.driver_rows < 0:
            raise ValueError(f"driver_rows must be a whole number >= 0, not {self.driver_rows!r}")
        if self.converter not in CONVERTERS_NAMES:
            raise ValueError(f"converter must be one of {', '.join(CONVERTERS_NAMES)}, "
                             f"not {self.converter!r}")
        refuse_pattern(self.out, "out")
        for journal in self.journals:
            refuse_pattern(journal, "journal")


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """Where the results went, and a few figures."""

    report: Path
    """The HTML report."""
    records: int
    """Valid records analysed (inside [since, until))."""
    skipped_lines: int
    """Journal lines that were not whole records."""
    tables: dict[str, Path] = field(default_factory=dict)
    """Each Parquet table's directory, by name."""
    seconds: float = 0.0
    """Wall time of the run (without Spark's start)."""


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.collect()]


@dataclass(frozen=True, slots=True)
class _Input:
    """What a run analyses: stored units (segment files read together) by their partials,
    other records as they are."""

    whole: list[StoredUnit]
    """Stored units all of whose valid records are inside [since, until): their partials
    stand for their records (when their ``fine`` width divides the run's window)."""
    live: DataFrame | None
    """Valid records inside [since, until) analysed as they are: those of units that
    ``--since`` or ``--until`` cut, or all of them (``follow``)."""
    records: Callable[[list[StoredUnit]], DataFrame]
    """The valid records inside [since, until) of stored units (one read over all)."""
    everything: Callable[[], DataFrame]
    """Every valid record inside [since, until) (read only for what partials cannot tell;
    planned only then, too: a cold driver takes a third of a second to plan the read)."""


def _in_range(options: PipelineOptions) -> Column:
    valid = F.col("valid")
    if options.since is not None:
        valid = valid & (F.col("received") >= options.since)
    if options.until is not None:
        valid = valid & (F.col("received") < options.until)
    return valid


def _store_input(spark: SparkSession, units: list[StoredUnit],
                 options: PipelineOptions) -> _Input:
    """The store's units as input: whole units by their partials, units that ``--since`` or
    ``--until`` cut by their records (none for units wholly outside or without records)."""
    whole: list[StoredUnit] = []
    cut: list[StoredUnit] = []
    for unit in units:
        if unit.first is None or unit.last is None:
            continue  # no valid records
        outside = ((options.since is not None and unit.last < options.since)
                   or (options.until is not None and unit.first >= options.until))
        if outside:
            continue
        after = options.since is None or unit.first >= options.since
        before = options.until is None or unit.last < options.until
        (whole if after and before else cut).append(unit)

    def records(chosen: list[StoredUnit]) -> DataFrame:
        return stored_records(spark, chosen).where(_in_range(options))

    return _Input(whole, records(cut) if cut else None, records,
                  functools.cache(lambda: records(whole + cut)))


_Frame = Callable[[], DataFrame]
_Made = tuple[list[tuple[Any, ...]], StructType]  # rows (timestamps in µs) and their schema
"""A table's frame, made where it is used: in a writer thread, so the driver plans some
while others run."""


def _micros(schema: StructType) -> StructType:
    """``schema`` with its timestamps as bigint microseconds since the epoch."""
    return StructType([StructField(field.name, LongType(), field.nullable)
                       if isinstance(field.dataType, TimestampType) else field
                       for field in schema.fields])


def _collect_micros(frame: DataFrame) -> list[dict[str, Any]]:
    """``frame``'s rows, its timestamps as microseconds: a ``collect`` makes them naive
    datetimes in the local zone, which shift the report outside UTC and cannot hold
    the years past 9999 that Spark's timestamps reach (a table's window end)."""
    return _rows(frame.select(*[
        F.unix_micros(field.name).alias(field.name)
        if isinstance(field.dataType, TimestampType) else F.col(field.name)
        for field in frame.schema.fields]))


def _from_rows(spark: SparkSession, made: list[tuple[Any, ...]],
               schema: StructType) -> DataFrame:
    """A frame of rows made on the driver with ``schema``, their timestamps given as
    microseconds (:func:`_collect_micros`) and made timestamps by Spark."""
    return spark.createDataFrame(made, _micros(schema)).select(*[
        F.timestamp_micros(field.name).alias(field.name)
        if isinstance(field.dataType, TimestampType) else F.col(field.name)
        for field in schema.fields])


def _write_tables(spark: SparkSession, frames: dict[str, _Frame], paths: dict[str, Path],  # noqa: PLR0917
                  reads: dict[str, _Frame], known: set[str],
                  made: dict[str, _Made]) -> dict[str, list[dict[str, Any]]]:
    """Write every table and collect ``reads`` (small frames the report shows), all at
    once; the rows of the tables the report lists whole (:data:`_SHOWN`, except those
    ``known`` already) and of ``reads``, by name.  The tables ``made`` on the driver are
    written by pyarrow when it is installed (no Spark job), else by Spark like the rest."""
    shown: dict[str, list[dict[str, Any]]] = {}
    write_rows = _arrow_writer()

    def write(name: str) -> None:
        if name in made:
            rows, schema = made[name]
            if write_rows is not None:
                write_rows(paths[name], rows, [(field.name, field.dataType.simpleString())
                                               for field in schema.fields])
                return
            frame = _from_rows(spark, rows, schema)
        else:
            frame = frames[name]()
        if name in _SHOWN and name not in known:  # computed once: collected, then written
            shown[name] = _collect_micros(frame)
            frame = _from_rows(spark, [tuple(row.values()) for row in shown[name]],
                               frame.schema)
        frame.write.mode("overwrite").parquet(str(paths[name]))

    def read(name: str) -> None:
        shown[name] = _rows(reads[name]())

    # Spark runs jobs from several threads at once: small jobs overlap their overheads
    # (the reads first: the report waits for them, and they are not written)
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        wrap = inheriting(spark)
        done = [pool.submit(wrap(read), name) for name in reads]
        done += [pool.submit(wrap(write), name) for name in frames if name not in made]
        done += [pool.submit(write, name) for name in made]
        for future in done:
            future.result()
    return shown


def _arrow_writer() -> Callable[[Path, list[tuple[Any, ...]], list[tuple[str, str]]], None] | None:
    try:
        from raetlike.pipeline._arrow import write_rows  # noqa: PLC0415 - pyarrow is optional
    except ImportError:
        return None
    return write_rows


def _span(given: _Input) -> tuple[int, float | None, float | None]:
    """The input's record count and first and last receive times: stored units' from the
    manifest, the others' from one job over their records."""
    total, first, last = 0, None, None
    for unit in given.whole:
        total += unit.records
        first = _least(first, unit.first)
        last = _most(last, unit.last)
    if given.live is not None:
        row = given.live.agg(F.count("*").alias("records"), F.min("received").alias("first"),
                             F.max("received").alias("last")).collect()[0]
        total += int(row["records"])
        first, last = _least(first, row["first"]), _most(last, row["last"])
    return total, first, last


def _partials(spark: SparkSession, given: _Input, window: float) -> list[Partials]:
    """The input's partials: the whole units' whose ``fine`` width divides ``window`` read
    from the store (each kind once over all of them), the rest computed from the records
    as one unit; their ``sequences`` with a ``unit`` column."""
    width = round(window * 1000)
    stored = [unit for unit in given.whole if width % round(unit.step * 1000) == 0]
    redo = [unit for unit in given.whole if width % round(unit.step * 1000) != 0]
    live = [frame for frame in (given.live, given.records(redo) if redo else None)
            if frame is not None]
    every = [stored_partials(spark, stored)] if stored else []
    if live or not every:
        made = compute_partials(_union(live) if live else empty_records(spark), window)
        every.append(dataclasses.replace(
            made, sequences=made.sequences.withColumn("unit", F.lit("records"))))
    return every


@dataclass(frozen=True, slots=True)
class _Collected:
    """The merged partials' rows, on the driver (``fine``'s ``window_start`` in µs)."""

    fine: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    sequences: list[dict[str, Any]]
    late: list[dict[str, Any]] | None = None
    """The units' ``late`` rows (``received_at`` in µs), when read with the rest
    (:func:`_collect_stored`): then the audit needs no Spark job either."""


def _collect(spark: SparkSession, every: list[Partials], most: int) -> _Collected | None:
    """The partials' rows, the three kinds collected at once; None when one has more than
    ``most`` rows (then Spark computes the tables: :func:`_spark_tables`)."""
    if most <= 0:
        return None
    fine = _union([p.fine for p in every]).withColumn(
        "window_start", F.unix_micros("window_start"))
    frames = [(fine, most), (_union([p.latency for p in every]), most),
              (_union([p.sequences for p in every]), min(most, DRIVER_BITMAPS))]
    with ThreadPoolExecutor(max_workers=len(frames)) as pool:
        got = list(pool.map(inheriting(spark)(
            lambda given: _rows(given[0].limit(given[1] + 1))), frames))
    if any(len(found) > bound for found, (_, bound) in zip(got, frames, strict=True)):
        log.info("pipeline: partials past %d rows: Spark computes the tables", most)
        return None
    return _Collected(*got)


def _collect_stored(given: _Input, window: float, most: int) -> _Collected | None:
    """The stored units' partials read on the driver by pyarrow (no Spark job:
    :func:`raetlike.pipeline._arrow.read_stored`), when the run is whole stored units
    only, each of whose ``fine`` width divides ``window``; None otherwise, past ``most``
    rows, or without pyarrow (then :func:`_collect` asks Spark)."""
    width = round(window * 1000)
    if most <= 0 or given.live is not None or not given.whole \
            or any(width % round(unit.step * 1000) for unit in given.whole):
        return None
    try:
        from raetlike.pipeline._arrow import read_stored  # noqa: PLC0415 - pyarrow is optional
    except ImportError:
        return None
    found = read_stored([unit.path for unit in given.whole], most, DRIVER_BITMAPS)
    if found is None:
        log.info("pipeline: partials past %d rows: Spark computes the tables", most)
        return None
    return _Collected(found["fine"], found["latency"], found["sequences"], found["late"])


@dataclass(slots=True)
class _Tables:
    """A run's tables before they are written: how to make each, and what the report needs."""

    frames: dict[str, _Frame]
    """Each table's frame, by name (:data:`~raetlike.pipeline._tables.TABLES`)."""
    reads: dict[str, _Frame]
    """Small frames the report reads and nothing writes (collected beside the writes)."""
    shown: dict[str, list[dict[str, Any]]]
    """Rows the report shows that are already on the driver, by name."""
    sums: list[Any]
    """Per source (:func:`~raetlike.pipeline._rows.source_sums`'s columns)."""
    checked: Audit
    """The audit."""
    made: dict[str, _Made] = field(default_factory=dict)
    """Tables made on the driver: their rows (timestamps in µs) and schema, by name."""


def _spark_tables(given: _Input, every: list[Partials], window: float,
                  keep: Callable[[DataFrame], DataFrame]) -> _Tables:
    """Every table computed by Spark from the partials (their rows past ``driver_rows``)."""
    counts = keep(tables.roll_up(_union([p.fine for p in every]), window))
    latencies = keep(tables.merge_latency(_union([p.latency for p in every])))
    sequences = keep(_union([p.sequences for p in every]))
    # per source: the audit's spans and the report's totals (summed here), one job
    sums = counts.groupBy("source").agg(
        F.sum("sequenced").alias("records"), F.min("sequence_min").alias("first"),
        F.max("sequence_max").alias("last"), F.sum("timed").alias("messages"),
        F.max("max_ms").alias("max_ms"), F.sum("resends").alias("resends"),
        F.sum("messages_with_resends").alias("with_resends")).collect()
    checked = audit_partials(given.everything(), _spans(sums), sequences,
                             _union([p.late for p in every]))
    frames: dict[str, _Frame] = {
        "traffic": functools.partial(tables.traffic, counts, window),
        "rate": functools.partial(tables.rate_over_time, counts, window),
        "latency": functools.partial(tables.latency, counts, latencies),
        "latency_histogram": functools.partial(tables.latency_histogram, latencies),
        "remotes": functools.partial(tables.remotes, counts),
        "estates": functools.partial(tables.estates, counts, latencies),
        "kinds": functools.partial(tables.kinds, counts, latencies),
        "pairs": functools.partial(tables.pairs, counts, latencies),
    }
    return _Tables(frames, {"quantiles": functools.partial(tables.quantiles, latencies)}, {},
                   sums, checked)


def _driver_tables(spark: SparkSession, given: _Input, every: Callable[[], list[Partials]],
                   window: float, collected: _Collected) -> _Tables:
    """Every table computed here from the collected partials (:mod:`_rows`); Spark writes
    them, and reads records only for the duplicates and out-of-order arrivals the partials
    cannot tell (:func:`~raetlike.pipeline._audit.audit_partials`).  With the ``late`` rows
    collected too, the audit is made here as well when it can be
    (:func:`~raetlike.pipeline._audit.audit_rows`)."""
    counts = rows.roll_up(collected.fine, window)
    latencies = rows.merge_latency(collected.latency)
    sums = rows.source_sums(counts)
    folded = fold_sequences(collected.sequences)
    checked = None if collected.late is None else audit_rows(_spans(sums), folded,
                                                             collected.late)
    if checked is None:
        checked = audit_partials(given.everything(), _spans(sums),
                                 _union([p.sequences for p in every()]),
                                 _union([p.late for p in every()]), folded=folded)
    made = {
        "traffic": rows.traffic(counts, window),
        "rate": rows.rate_over_time(counts, window),
        "latency": rows.latency(counts, latencies),
        "latency_histogram": rows.latency_histogram(latencies),
        "remotes": rows.remotes(counts),
        "estates": rows.estates(counts, latencies),
        "kinds": rows.breakdown(counts, latencies, "kind"),
        "pairs": rows.breakdown(counts, latencies, "source_estate", "destination_estate"),
    }
    written = {name: ([tuple(row.values()) for row in made[name]], tables.TABLE_SCHEMAS[name])
               for name in made}
    frames: dict[str, _Frame] = {
        name: functools.partial(_from_rows, spark, *written[name]) for name in written}
    shown = {name: made[name] for name in _SHOWN}
    shown["quantiles"] = list(rows.quantiles(latencies).values())
    return _Tables(frames, {}, shown, sums, checked, written)


def _spans(sums: list[Any]) -> dict[str, SourceSpan]:
    return {row["source"]: SourceSpan(int(row["records"]), int(row["first"]), int(row["last"]))
            for row in sums if row["records"]}


def _analyse(spark: SparkSession, given: _Input, skipped: int,  # noqa: PLR0917
             options: PipelineOptions, started: float,
             progress: Progress | None = None) -> PipelineResult:
    """Compute, write and report from stored hours and records (:class:`_Input`).

    The partials (``_partials``) are merged: stored ones read from the store, the
    others computed from the records.  When they are small (``driver_rows``) they are
    collected and every table is computed on the driver (:mod:`_rows`); otherwise Spark
    rolls every table up from the merged ``fine_counts`` and ``latency_counts``, kept in
    memory while the tables are written.  The audit's gaps come from the merged bitmaps.
    """
    cached: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        cached.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
        return cached[-1]

    try:
        total, first, last = _span(given)
        span = 0.0 if first is None or last is None else float(last) - float(first)
        window = options.window_seconds or tables.choose_window(span)
        if progress is not None:
            progress.records = total
        every = functools.cache(lambda: _partials(spark, given, window))
        collected = (_collect_stored(given, window, options.driver_rows)
                     or _collect(spark, every(), options.driver_rows))
        made = (_spark_tables(given, every(), window, keep) if collected is None
                else _driver_tables(spark, given, every, window, collected))
        checked, sums = made.checked, made.sums
        out_of_order = checked.out_of_order
        if out_of_order is not None:
            cached.append(out_of_order)
        highest = [row["max_ms"] for row in sums if row["max_ms"] is not None]
        overall: dict[str, Any] = {
            "messages": sum(int(row["messages"] or 0) for row in sums), "p50_ms": None,
            "p90_ms": None, "p99_ms": None, "max_ms": max(highest) if highest else None}
        resent = {"resends": sum(int(row["resends"] or 0) for row in sums),
                  "messages_with_resends": sum(int(row["with_resends"] or 0) for row in sums)}
        frames = made.frames | {
            "audit_missing": lambda: _present(checked.missing),
            "audit_duplicates": lambda: _present(checked.duplicates),
            "audit_out_of_order": lambda: _present(out_of_order),
            "audit_summary": lambda: spark.createDataFrame(
                [tuple(row.values()) for row in checked.summary], SUMMARY_SCHEMA),
        }
        paths = {name: options.out / "tables" / name for name in frames}
        reads, known = dict(made.reads), dict(made.shown)
        if checked.missing_rows is None:  # Spark sorted the gaps: the first ones read
            reads["missing"] = lambda: _present(checked.missing).orderBy(
                "source", "first_missing").limit(REPORT_ROWS)
        else:
            known["missing"] = [
                dict(zip(("source", "first_missing", "last_missing", "missing"), gap,
                         strict=True)) for gap in sorted(checked.missing_rows)[:REPORT_ROWS]]
        if checked.twice:
            reads["duplicates"] = lambda: _present(checked.duplicates).orderBy(
                "source", "sequence").limit(REPORT_ROWS)
        summary = [tuple(row.values()) for row in checked.summary]
        audited = {f"audit_{name}": (found, _AUDIT_SCHEMAS[name])
                   for name, found in checked.rows.items()}
        shown = known | _write_tables(
            spark, frames, paths, reads, set(known),
            made.made | audited
            | {"audit_summary": (summary, tables.declared_schema(SUMMARY_SCHEMA))})
        for row in shown["quantiles"]:
            overall.update(row)
        data = ReportData(
            journals=[str(j) for j in options.journals], records=total, skipped_lines=skipped,
            latency=overall,
            histogram=sorted(shown["latency_histogram"], key=lambda r: r["bucket"]),
            rate=sorted(({**r, "window_start": r["window_start"] / 1e6} for r in shown["rate"]),
                        key=lambda r: r["window_start"]),
            estates=sorted(shown["estates"], key=lambda r: r["estate"]),
            audit=checked.summary,
            missing=shown["missing"],
            duplicates=shown.get("duplicates", []),
            window_seconds=window,
            kinds=sorted(shown["kinds"], key=lambda r: (-int(r["messages"]), str(r["kind"]))),
            pairs=sorted(shown["pairs"],
                         key=lambda r: (str(r["source_estate"]), str(r["destination_estate"]))),
            first_received=None if first is None else float(first),
            last_received=None if last is None else float(last),
            resends=resent)
    finally:
        for frame in cached:
            frame.unpersist()
    report = write_report(data, options.out)
    seconds = time.monotonic() - started
    log.info("pipeline: %d records (%d skipped lines) in %.1f s; report %s",
             total, skipped, seconds, report)
    return PipelineResult(report, total, skipped, paths, seconds)


def _present(frame: DataFrame | None) -> DataFrame:
    """An audit table Spark made (the ones made on the driver are never asked for)."""
    assert frame is not None  # noqa: S101 - audit_rows leaves none of its tables to Spark
    return frame


_AUDIT_SCHEMAS = {"missing": tables.declared_schema(MISSING_SCHEMA),
                  "duplicates": tables.declared_schema(DUPLICATES_SCHEMA),
                  "out_of_order": PARTIAL_SCHEMAS["late"]}
"""The audit tables' schemas, for those :func:`~raetlike.pipeline._audit.audit_rows` made."""


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(float(a), float(b))


def _most(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(float(a), float(b))


def empty_records(spark: SparkSession) -> DataFrame:
    """No records, normalised."""
    return normalise(spark.createDataFrame([], JOURNAL_SCHEMA)).where("valid")


def run_pipeline(options: PipelineOptions, spark: SparkSession | None = None, *,
                 progress: TextIO | None = None) -> PipelineResult:
    """Read every journal once (sealed and open segments) and write tables and report.

    ``progress`` (stderr by default) gets a one-line progress display when it
    is a terminal and ``options.quiet`` is not set.
    """
    session = spark or spark_session(options.master, quiet=options.quiet)
    started = time.monotonic()
    directories = hour_directories(options.journals, options.since, options.until)
    stream = sys.stderr if progress is None else progress
    shown = None
    if not options.quiet and stream.isatty():
        size = sum(f.stat().st_size for d in directories for f in Path(d).iterdir()
                   if f.is_file())
        shown = Progress(session.sparkContext, stream, input_bytes=size)
    try:
        with out_locked(options.out):
            stored = refresh_store(session, directories, options.out,
                                   converter=options.converter)
            return _analyse(session, _store_input(session, stored.units, options),
                            sum(unit.skipped for unit in stored.units), options, started, shown)
    finally:
        if shown is not None:
            shown.close()


def _ingest(session: SparkSession, options: PipelineOptions) -> None:
    """One availableNow run of the stream: new sealed segments -> ``records/`` Parquet."""
    records = options.out / "records"

    def store(batch: DataFrame, batch_id: int) -> None:
        # one directory per batch, overwritten if a batch is replayed: exactly once
        batch.write.mode("overwrite").parquet(str(records / f"batch_id={batch_id}"))

    streams = [normalise(stream_json_journal(session, journal)) for journal in options.journals]
    union = functools.reduce(DataFrame.unionByName, streams)
    query = (union.writeStream.foreachBatch(store)
             .option("checkpointLocation", str(options.out / "_checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()


def _same(frame: DataFrame) -> DataFrame:
    return frame


def _no_units(_units: list[StoredUnit]) -> DataFrame:
    raise AssertionError("follow_journals analyses no stored units")  # pragma: no cover


def follow_journals(options: PipelineOptions, spark: SparkSession | None = None, *,
                    rounds: int | None = None, interval: float = DEFAULT_INTERVAL,
                    on_round: Callable[[PipelineResult], None] | None = None) -> PipelineResult:
    """Structured Streaming: each round ingests new sealed segments, then rewrites the tables.

    The checkpoint under ``OUT/_checkpoint`` remembers which segment files were
    read, so a later run (or round) reads only new ones.  ``rounds`` None
    means until interrupted.
    """
    session = spark or spark_session(options.master, quiet=options.quiet)
    with out_locked(options.out):
        return _follow(session, options, rounds, interval, on_round)


def _follow(session: SparkSession, options: PipelineOptions, rounds: int | None,
            interval: float, on_round: Callable[[PipelineResult], None] | None) -> PipelineResult:
    done = 0
    result: PipelineResult | None = None
    while rounds is None or done < rounds:
        started = time.monotonic()
        _ingest(session, options)
        records_dir = options.out / "records"
        if records_dir.is_dir() and any(records_dir.glob("batch_id=*")):
            normalised = session.read.parquet(str(records_dir)).drop("batch_id")
        else:
            normalised = normalise(session.createDataFrame([], JOURNAL_SCHEMA))
        skipped = normalised.where(~F.col("valid")).count()
        live = normalised.where(_in_range(options))
        result = _analyse(session, _Input([], live, _no_units, functools.partial(_same, live)),
                          skipped, options, started)
        if on_round is not None:
            on_round(result)
        done += 1
        if rounds is None or done < rounds:
            time.sleep(interval)
    assert result is not None  # noqa: S101 - rounds >= 1
    return result
