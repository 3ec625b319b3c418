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

So a second run over the same journals reads only what changed since the
first, and every table and plot of a run is computed from the store, read
once and cached.  The manifest is written (to a temporary name, then
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

from pyspark.sql import DataFrame, SparkSession

from raetlike.pipeline._frames import JOURNAL_SCHEMA, normalise, read_json_journal

__all__ = ["MANIFEST", "STORE", "MANIFEST_VERSION", "StoreRun", "refresh_store"]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STORE = "store"
MANIFEST_VERSION = 2  # 2: the store holds the lines' fields, not normalised records
CONVERTERS = 4  # hours converted at once

Files = dict[str, list[int]]  # segment file name -> [size, mtime_ns]


@dataclass(frozen=True, slots=True)
class StoreRun:
    """What :func:`refresh_store` did: hours read from JSON, reused, and dropped."""

    read: list[str]
    """Hour directories read from JSON this run (new or changed)."""
    reused: list[str]
    """Hour directories whose Parquet was up to date."""
    removed: list[str]
    """Hour directories in the manifest that are gone from disk."""


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


def refresh_store(spark: SparkSession, hours: list[str], out: Path) -> tuple[DataFrame, StoreRun]:
    """Bring ``OUT/store`` up to date for ``hours``; the normalised records of those hours.

    ``hours`` are ``date=/hour=`` directories (:func:`hour_directories`).
    """
    store = out / STORE
    manifest_path = out / MANIFEST
    manifest = _load(manifest_path)
    known: dict[str, Any] = manifest["hours"]
    reused: list[str] = []
    parts: list[str] = []
    changed: list[tuple[str, Files]] = []
    for hour in hours:
        files = _files(Path(hour))
        entry = known.get(hour)
        if entry is not None and entry.get("files") == files and (store / _key(hour)).is_dir():
            reused.append(hour)
        else:
            changed.append((hour, files))
        parts.append(str(store / _key(hour)))
    # a few hours at once: each job's start overlaps another's work
    with ThreadPoolExecutor(max_workers=CONVERTERS) as pool:
        futures = {pool.submit(_convert, spark, hour, store / _key(hour)): (hour, files)
                   for hour, files in changed}
        for future in as_completed(futures):
            future.result()
            hour, files = futures[future]
            known[hour] = {"key": _key(hour), "files": files}
            _save(manifest_path, manifest)  # each hour as soon as its Parquet is whole
    read = [hour for hour, _ in changed]
    removed = [hour for hour in list(known) if not Path(hour).is_dir()]
    for hour in removed:
        shutil.rmtree(store / known.pop(hour)["key"], ignore_errors=True)
    if removed:
        _save(manifest_path, manifest)
    log.info("pipeline: %d hour(s) read from JSON, %d reused from %s, %d removed",
             len(read), len(reused), store, len(removed))
    if not parts:
        return normalise(spark.createDataFrame([], JOURNAL_SCHEMA)), StoreRun(read, reused, removed)
    return (normalise(spark.read.schema(JOURNAL_SCHEMA).parquet(*parts)),
            StoreRun(read, reused, removed))


def _convert(spark: SparkSession, hour: str, part: Path) -> None:
    """One hour directory's segments (sealed and open) -> Parquet at ``part``, the lines'
    fields as they are (normalised when read: the derived columns cost less computed
    than written and read)."""
    read_json_journal(spark, [hour]).write.mode("overwrite").parquet(str(part))
