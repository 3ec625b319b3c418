"""The pipeline's store: each journal hour read from JSON once, kept as Parquet.

``OUT/store/`` holds one Parquet directory per journal hour directory
(``date=YYYY-MM-DD/hour=HH`` of one journal), named by a hash of its path, and
``OUT/manifest.json`` what each was made from: every segment file's name, size
and modification time.  A run compares the hour directories on disk with the
manifest:

- an hour whose files are all as recorded is not read again;
- an hour with a new, grown, changed or deleted segment (the journal's
  current hour, while an estate writes it) is read again, whole, and its
  Parquet replaced;
- an hour that is gone from disk, or outside ``--since``/``--until``, is
  dropped from what the run analyses (its Parquet stays for a later run
  that wants it back, unless the hour is gone from disk).

When an hour is read from JSON, its partial aggregates (``_partials``) are
computed from its fresh Parquet and kept beside it (``store/KEY/records`` and
``store/KEY/fine``, ``latency``, ``sequences``, ``late``), and the manifest
notes the hour's record count, skipped lines, first and last receive time
and the width of its fine windows.  So a second run over the same journals
reads only what changed since the first, and the analysis merges the small
partials of the hours it did not read.  The manifest is written (to a temporary name, then
renamed) only after the Parquet it describes is complete: a run that dies
half way leaves the previous manifest, and the next run redoes what it lacks.
Paths are the driver's; on a cluster the store, like the journals, must be
where every executor sees the same path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.pipeline._frames import JOURNAL_SCHEMA, normalise, read_json_journal, valid_line
from raetlike.pipeline._partials import Partials, compute_partials, read_partials, write_partials
from raetlike.pipeline._session import inheriting
from raetlike.pipeline._tables import fine_step

__all__ = ["MANIFEST", "MANIFEST_VERSION", "RECORDS", "STORE", "StoreRun", "StoredHour",
           "refresh_store", "stored_partials", "stored_records"]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STORE = "store"
MANIFEST_VERSION = 4  # 2: the lines' fields, not normalised records; 3: and partials;
# 4: a send time that is not finite gives no latency (partials made before had NaN maxima)
RECORDS = "records"  # an hour's lines, beside its partials
CONVERTERS = 4  # hours converted at once

Files = dict[str, list[int]]  # segment file name -> [size, mtime_ns]


@dataclass(frozen=True, slots=True)
class StoredHour:
    """One hour directory in the store: where, what its records hold, and its partials."""

    hour: str
    """The journal hour directory."""
    path: Path
    """``OUT/store/KEY``: ``records`` and the partials."""
    records: int
    """Valid records."""
    skipped: int
    """Lines that were not whole records."""
    first: float | None
    """Earliest receive time of a valid record (None: no records)."""
    last: float | None
    """Latest receive time of a valid record."""
    step: float
    """Window width (seconds) of its ``fine`` partial."""


@dataclass(frozen=True, slots=True)
class StoreRun:
    """What :func:`refresh_store` did: hours read from JSON, reused, and dropped."""

    read: list[str]
    """Hour directories read from JSON this run (new or changed)."""
    reused: list[str]
    """Hour directories whose Parquet was up to date."""
    removed: list[str]
    """Hour directories in the manifest that are gone from disk."""
    hours: list[StoredHour]
    """The hours asked for, as stored now, in the order asked."""


def stored_records(spark: SparkSession, hours: list[StoredHour]) -> DataFrame:
    """The lines of ``hours``, normalised (valid and not): one read over all of them."""
    if not hours:
        return normalise(spark.createDataFrame([], JOURNAL_SCHEMA))
    return normalise(spark.read.schema(JOURNAL_SCHEMA).parquet(
        *[str(hour.path / RECORDS) for hour in hours]))


def stored_partials(spark: SparkSession, hours: list[StoredHour]) -> Partials:
    """The partials of ``hours``, each kind read once over all of them
    (:func:`~raetlike.pipeline._partials.read_partials`)."""
    return read_partials(spark, [hour.path for hour in hours],
                         max((hour.step for hour in hours), default=0.0))


def _files(hour: Path) -> Files:
    found: Files = {}
    for entry in os.scandir(hour):
        if entry.is_file() and (entry.name.endswith(".jsonl") or entry.name.endswith(
                ".jsonl.open")):
            info = entry.stat()
            found[entry.name] = [info.st_size, info.st_mtime_ns]
    return found


def _key(hour: str) -> str:
    return hashlib.sha256(hour.encode()).hexdigest()[:20]


def _load(path: Path) -> dict[str, Any]:
    """The manifest, or an empty one when it is missing, unreadable or of another version."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"version": MANIFEST_VERSION, "hours": {}}
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION \
            or not isinstance(manifest.get("hours"), dict):
        log.warning("pipeline: %s is not a manifest this version reads; starting afresh", path)
        return {"version": MANIFEST_VERSION, "hours": {}}
    return manifest


def _save(path: Path, manifest: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, path)


def refresh_store(spark: SparkSession, hours: list[str], out: Path) -> StoreRun:
    """Bring ``OUT/store`` up to date for ``hours``; what it did and the hours as stored
    (their records: :func:`stored_records`).

    ``hours`` are ``date=/hour=`` directories (:func:`hour_directories`).
    """
    store = out / STORE
    manifest_path = out / MANIFEST
    manifest = _load(manifest_path)
    known: dict[str, Any] = manifest["hours"]
    reused: list[str] = []
    changed: list[tuple[str, Files]] = []
    for hour in hours:
        files = _files(Path(hour))
        entry = known.get(hour)
        if entry is not None and entry.get("files") == files and (store / _key(hour)).is_dir():
            reused.append(hour)
        else:
            changed.append((hour, files))
    # a few hours at once: each job's start overlaps another's work
    with ThreadPoolExecutor(max_workers=CONVERTERS) as pool:
        convert = inheriting(spark)(_convert)
        futures = {pool.submit(convert, spark, hour, store / _key(hour)): (hour, files)
                   for hour, files in changed}
        for future in as_completed(futures):
            hour, files = futures[future]
            known[hour] = {"key": _key(hour), "files": files, **future.result()}
            _save(manifest_path, manifest)  # each hour as soon as its Parquet is whole
    read = [hour for hour, _ in changed]
    removed = [hour for hour in list(known) if not Path(hour).is_dir()]
    for hour in removed:
        shutil.rmtree(store / known.pop(hour)["key"], ignore_errors=True)
    if removed:
        _save(manifest_path, manifest)
    log.info("pipeline: %d hour(s) read from JSON, %d reused from %s, %d removed",
             len(read), len(reused), store, len(removed))
    stored = [StoredHour(hour, store / known[hour]["key"], int(known[hour]["records"]),
                         int(known[hour]["skipped"]), known[hour]["first"],
                         known[hour]["last"], float(known[hour]["step"])) for hour in hours]
    return StoreRun(read, reused, removed, stored)


def _convert(spark: SparkSession, hour: str, part: Path) -> dict[str, Any]:
    """One hour directory's segments (sealed and open) -> Parquet at ``part/records``, the
    lines' fields as they are (normalised when read: the derived columns cost less computed
    than written and read), then its partials beside it; what the manifest notes of it.

    The JSON is parsed once; the counts and time range are observed while it is written,
    and the partials are made from the fresh Parquet in one partition (an hour's records
    need no shuffle: another hour converts on the other core)."""
    valid = valid_line()
    received = F.when(valid, F.col("received"))
    seen = Observation(f"hour-{_key(hour)}")
    (read_json_journal(spark, [hour])
     .observe(seen, F.count(F.when(valid, 1)).alias("records"),
              F.count(F.when(~valid, 1)).alias("skipped"),
              F.min(received).alias("first"), F.max(received).alias("last"))
     .write.mode("overwrite").parquet(str(part / RECORDS)))
    stats = seen.get
    first, last = stats["first"], stats["last"]
    step = fine_step(0.0 if first is None or last is None else float(last) - float(first))
    records = (normalise(spark.read.schema(JOURNAL_SCHEMA).parquet(str(part / RECORDS)))
               .where("valid").coalesce(1))
    write_partials(compute_partials(records, step), part)
    return {"records": int(stats["records"]), "skipped": int(stats["skipped"]),
            "first": None if first is None else float(first),
            "last": None if last is None else float(last), "step": step}
