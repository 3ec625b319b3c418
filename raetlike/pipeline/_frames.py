"""Journal JSON lines as a Spark DataFrame: the explicit schema, file selection, normalising."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from raetlike.errors import RaetError
from raetlike.names import safe_name
from raetlike.pipeline._bounds import (
    CORRUPT_COLUMN,
    DOUBLE_FIELDS,
    KINDS,
    LONG_FIELDS,
    MOST_COUNT,
    MOST_SEQUENCE,
    MOST_TEXT,
    RECEIVED_RANGE,
    STRING_FIELDS,
)

__all__ = ["ALL_GLOB", "CORRUPT_COLUMN", "JOURNAL_SCHEMA", "KINDS", "MOST_COUNT", "MOST_SEQUENCE",
           "MOST_TEXT", "RECEIVED_RANGE", "SEALED_GLOB", "NoJournalError", "find_journals",
           "hour_directories", "normalise", "read_json_journal", "refuse_pattern",
           "stream_json_journal", "valid_line"]

log = logging.getLogger(__name__)

SEALED_GLOB = "*.jsonl"
ALL_GLOB = "*.jsonl{,.open}"

JOURNAL_SCHEMA = StructType(
    [StructField(name, StringType()) for name in STRING_FIELDS]
    + [StructField(name, LongType()) for name in LONG_FIELDS]
    + [StructField(name, DoubleType()) for name in DOUBLE_FIELDS]
    + [StructField(CORRUPT_COLUMN, StringType())]
)
"""What Spark reads from journal segments (docs/journal.md); torn lines land in the last."""

_HOUR_DIRECTORY = re.compile(r"^date=(\d{4}-\d{2}-\d{2})/hour=(\d{2})$")


class NoJournalError(RaetError, ValueError):
    """A path given as a journal holds no journal segments, itself or one level down."""


_PATTERN = re.compile(r"[\[\]{}*?\\]")


def refuse_pattern(path: Path | str, what: str) -> None:
    """Raise :class:`NoJournalError` (a ``ValueError``) when ``path``, made absolute, holds a
    character Spark's readers take as a glob pattern: such a path would be read as another,
    or as none."""
    text = os.path.abspath(path)
    if _PATTERN.search(text):
        raise NoJournalError(f"{what} {path}: a path with [ ] {{ }} * ? or \\ is read by Spark "
                             "as a pattern; rename it or use another path")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoJournalError(f"{what} {safe_name(text)}: a path that is not UTF-8 cannot be "
                             "given to Spark; rename it") from None


def _has_segments(directory: Path) -> bool:
    return any(directory.glob("date=*/hour=*/*.jsonl")) or any(
        directory.glob("date=*/hour=*/*.jsonl.open"))


def find_journals(paths: Iterable[Path]) -> list[Path]:
    """The journal directories meant by ``paths``, in order.

    A directory holding ``date=YYYY-MM-DD/hour=HH/*.jsonl`` segments is a
    journal.  A directory that is not, but whose immediate subdirectories
    are (the demo's ``OUT/journal`` with one journal per estate), stands for
    those subdirectories, sorted.  Anything else raises
    :class:`NoJournalError` naming the path.  A journal meant twice (given twice, or
    given and inside a directory given) is listed once, where it first appears.
    """
    found: list[Path] = []
    seen: set[Path] = set()

    def add(journal: Path) -> None:
        resolved = journal.resolve()
        if resolved not in seen:
            seen.add(resolved)
            found.append(journal)

    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise NoJournalError(f"no such journal directory: {path}")
        if _has_segments(path):
            add(path)
            continue
        inner = [child for child in sorted(path.iterdir())
                 if child.is_dir() and _has_segments(child)]
        if not inner:
            raise NoJournalError(
                f"{path}: no journal segments (no date=YYYY-MM-DD/hour=HH/*.jsonl in it "
                "or in its subdirectories)")
        for journal in inner:
            add(journal)
    for journal in found:
        refuse_pattern(journal, "journal")
        refuse_pattern(journal.resolve(), "journal")  # a symlink's target too
    return found


def hour_directories(journals: Iterable[Path], since: float | None = None,
                     until: float | None = None) -> list[str]:
    """The ``date=/hour=`` directories under ``journals`` that may hold [since, until).

    Each directory once (by its resolved path) however often its journal is given:
    a journal given twice is not counted twice."""
    chosen = []
    seen: set[Path] = set()
    for journal in journals:
        for directory in sorted(Path(journal).glob("date=*/hour=*")):
            match = _HOUR_DIRECTORY.match(f"{directory.parent.name}/{directory.name}")
            if match is None or not directory.is_dir():
                continue
            try:
                start = datetime.strptime(f"{match[1]} {match[2]}", "%Y-%m-%d %H").replace(
                    tzinfo=UTC).timestamp()
            except ValueError:  # date=2026-13-45/hour=99: not an hour, not a journal's
                log.warning("pipeline: %s is not a journal hour directory; skipped", directory)
                continue
            if (since is None or start + 3600 > since) and (until is None or start < until):
                resolved = directory.resolve()
                if resolved not in seen:
                    seen.add(resolved)
                    chosen.append(str(directory))
    return chosen


def read_json_journal(spark: SparkSession, directories: list[str], *,
                      include_open: bool = True, ignore_missing: bool = False) -> DataFrame:
    """Every line of the segments in ``directories`` (parsed in parallel, one task per file).

    ``ignore_missing``: a file listed but gone when its task opens it (an open segment
    sealed meanwhile) is skipped, not an error; the caller checks what it read."""
    if not directories:
        return spark.createDataFrame([], JOURNAL_SCHEMA)
    return (spark.read.schema(JOURNAL_SCHEMA)
            .option("ignoreMissingFiles", str(ignore_missing).lower())
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", ALL_GLOB if include_open else SEALED_GLOB)
            .json(directories))


def stream_json_journal(spark: SparkSession, journal: Path) -> DataFrame:
    """A streaming DataFrame of the sealed segments appearing under one journal directory."""
    return (spark.readStream.schema(JOURNAL_SCHEMA)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", SEALED_GLOB)
            .json(str(journal)))


def _endpoint(prefix: str) -> Column:
    return F.concat_ws("/", F.col(f"{prefix}_estate"), F.col(f"{prefix}_yard"),
                       F.col(f"{prefix}_share"))


def _finite(value: Column) -> Column:
    """Neither NaN nor infinite (null for null): Spark's JSON reader takes ``NaN`` and
    ``Infinity`` for doubles."""
    return ~F.isnan(value) & (F.abs(value) != F.lit(float("inf")))


def valid_line() -> Column:
    """True for a raw journal line that parsed and carries the fields every record has,
    with a receive time in :data:`RECEIVED_RANGE` (Spark's JSON reader takes ``NaN`` and
    ``Infinity``), counts in ``[0, MOST_COUNT]`` and a sequence within
    :data:`MOST_SEQUENCE` where given, text of at most :data:`MOST_TEXT` characters and
    a kind of :data:`KINDS`."""
    received = F.col("received")
    low, high = RECEIVED_RANGE
    bounded = [F.col(name).isNull() | F.col(name).between(0, MOST_COUNT)
               for name in ("body_bytes", "segments", "resends")]
    bounded.append(F.col("sequence").isNull()
                   | F.col("sequence").between(-MOST_SEQUENCE, MOST_SEQUENCE))
    bounded += [F.col(name).isNull() | (F.length(name) <= MOST_TEXT) for name in STRING_FIELDS]
    bounded.append(F.col("kind").isNull() | F.col("kind").isin(*KINDS))
    valid = (F.col(CORRUPT_COLUMN).isNull() & (F.col("version") == 1) & F.col("node").isNotNull()
             & received.isNotNull() & _finite(received) & (received >= low) & (received < high)
             & F.col("source_estate").isNotNull())
    for condition in bounded:
        valid = valid & condition
    return F.coalesce(valid, F.lit(False))


def normalise(raw: DataFrame) -> DataFrame:
    """Raw journal lines -> records with ``valid``, ``source``, ``destination``, times, latency.

    A line is valid when it parsed and carries the fields every record has; the
    rest (a torn last record) is kept with ``valid`` false so it can be counted.  A send
    time that gives no finite latency (``NaN``, ``Infinity``, or one so far from the
    receive time that the difference overflows) is unknown: the record has no latency.
    """
    latency = (F.col("received") - F.col("sent")) * 1000.0
    return raw.select(
        valid_line().alias("valid"),
        *[F.col(name) for name in (*STRING_FIELDS, *LONG_FIELDS, *DOUBLE_FIELDS)],
        _endpoint("source").alias("source"),
        _endpoint("destination").alias("destination"),
        F.timestamp_seconds(F.col("received")).alias("received_at"),
        F.when(_finite(latency), latency).alias("latency_ms"),
    )

