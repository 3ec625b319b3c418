"""The pipeline's store: each journal segment read from JSON once, kept as Parquet.

``OUT/store/`` holds Parquet directories, one per *unit*: a set of segment
files of one journal hour directory (``date=YYYY-MM-DD/hour=HH`` of one
journal) read from JSON together, named by a hash of the hour's path and the
files' names.  ``OUT/manifest.json`` says what each unit was made from: every
segment file's name, size and modification time.  A run compares the segment
files on disk with the manifest:

- a unit whose files are all as recorded is not read again;
- the segment files no valid unit holds (new ones, and those of a unit one of
  whose files grew, changed or was deleted) are read, an hour's sealed ones
  as one new unit and its open ones (``*.jsonl.open``, still being written)
  as another, so a sealed segment is not read again because the open one
  beside it grew;
- the units of an hour that is gone from disk are dropped; those of an hour
  outside ``--since``/``--until`` are kept, unused, for a later run.

When a unit is read from JSON (by pyarrow in a Spark task, ``_arrow``, or by
Spark's JSON reader for the units pyarrow declines or ``converter="spark"``), its
partial aggregates (``_partials``) are computed and kept beside its Parquet
(``store/KEY/records`` and ``store/KEY/fine``, ``latency``, ``sequences``,
``late``), and the manifest
notes the unit's record count, skipped lines, first and last receive time
and the width of its fine windows.  So a second run over the same journals
reads only the segments that are new or changed since the first, and the
analysis merges the small partials of the units it did not read.  The manifest is written
(to a temporary name, then renamed) only after the Parquet it describes is
complete: a run that dies half way leaves the previous manifest, and the next
run redoes what it lacks.  The manifest is input like any file: an entry that
is not exactly what this version writes (its key the hash of its hour and
files, its counts whole numbers, its width one the pipeline makes) is
ignored, and its segments are read again.  Paths are the driver's; on a
cluster the store, like the journals, must be where every executor sees the
same path.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.errors import RaetError
from raetlike.journal import OPEN_SUFFIX, SEALED_SUFFIX
from raetlike.names import safe_name
from raetlike.pipeline._frames import (
    JOURNAL_SCHEMA,
    RECEIVED_RANGE,
    normalise,
    read_json_journal,
    refuse_pattern,
    valid_line,
)
from raetlike.pipeline._partials import (
    PARTS,
    Partials,
    compute_partials,
    read_partials,
    write_partials,
)
from raetlike.pipeline._session import inheriting
from raetlike.pipeline._tables import WINDOW_STEPS, fine_step

__all__ = ["CONVERTERS_NAMES", "LOCK", "MANIFEST", "MANIFEST_VERSION", "RECORDS", "STORE",
           "OutBusyError", "StoreRun", "StoredUnit", "out_locked", "refresh_store",
           "stored_partials", "stored_records"]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STORE = "store"
MANIFEST_VERSION = 6  # 2: the lines' fields, not normalised records; 3: and partials;
# 4: a send time that is not finite gives no latency (partials made before had NaN maxima);
# 5: units of segment files, not whole hours; 6: a file's ctime and inode too
RECORDS = "records"  # a unit's lines, beside its partials
CONVERTERS = 4  # units converted at once

Files = dict[str, list[int]]  # segment file name -> [size, mtime_ns, ctime_ns, inode]
# (ctime and inode: a file rewritten and given back its mtime, as cp -p or rsync -a do, or
# replaced by another of the same size and times, is noticed; no call sets a ctime)

_KEY = re.compile(r"[0-9a-f]{20}")


@dataclass(frozen=True, slots=True)
class StoredUnit:
    """Segment files of one hour directory read together, in the store: where, what their
    records hold, and their partials."""

    hour: str
    """The journal hour directory."""
    segments: tuple[str, ...]
    """The segment files' names (in ``hour``), sorted."""
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
    """What :func:`refresh_store` did: segments read from JSON and reused, hours dropped."""

    read: list[str]
    """Segment files (paths) read from JSON this run: new, or their unit's files changed."""
    reused: list[str]
    """Segment files whose stored Parquet and partials stood."""
    removed: list[str]
    """Hour directories in the manifest that are gone from disk (their units dropped)."""
    units: list[StoredUnit]
    """The units of the hours asked for, as stored now, in the order of the hours asked."""


LOCK = ".lock"


class OutBusyError(RaetError, RuntimeError):
    """Another pipeline run is writing the same ``--out``."""


@contextlib.contextmanager
def out_locked(out: Path) -> Iterator[None]:
    """Hold ``OUT/.lock`` (an exclusive ``flock``) while a run writes ``out``: two runs at
    once would overwrite each other's store and manifest.  Raises :class:`OutBusyError`
    at once, not waiting, when another run holds it."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutBusyError(f"{out}: another raetlike pipeline is writing it; wait for it "
                               "or give another --out") from None
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor


def stored_records(spark: SparkSession, units: list[StoredUnit]) -> DataFrame:
    """The lines of ``units``, normalised (valid and not): one read over all of them."""
    if not units:
        return normalise(spark.createDataFrame([], JOURNAL_SCHEMA))
    return normalise(spark.read.schema(JOURNAL_SCHEMA).parquet(
        *[str(unit.path / RECORDS) for unit in units]))


def stored_partials(spark: SparkSession, units: list[StoredUnit]) -> Partials:
    """The partials of ``units``, each kind read once over all of them
    (:func:`~raetlike.pipeline._partials.read_partials`)."""
    return read_partials(spark, [unit.path for unit in units],
                         max((unit.step for unit in units), default=0.0))


def _files(hour: Path) -> Files:
    """The segment files directly in ``hour`` (none when it is gone)."""
    found: Files = {}
    try:
        entries = list(os.scandir(hour))
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.name.endswith((SEALED_SUFFIX, OPEN_SUFFIX)) and entry.is_file():
            if entry.name.startswith(_UNREAD) or ":" in entry.name or not _utf8(entry.name):
                log.warning("pipeline: %s is not read: Spark skips a file whose name starts "
                            "with '_' or '.', and Hadoop cannot read one with ':' or one "
                            "that is not UTF-8", safe_name(entry.path))
                continue
            info = entry.stat()
            found[entry.name] = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
    return found


_UNREAD = ("_", ".")


def _utf8(name: str) -> bool:
    """Whether ``name`` is text (a name of bytes that are not UTF-8 comes as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _key(hour: str, names: Iterable[str]) -> str:
    text = "\0".join([hour, *sorted(names)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _time(value: Any) -> bool:
    """None, or a receive time a valid record can have (:data:`RECEIVED_RANGE`)."""
    return value is None or (isinstance(value, float | int) and not isinstance(value, bool)
                             and RECEIVED_RANGE[0] <= value < RECEIVED_RANGE[1])


_MOST_LINES = 1 << 53
"""The most lines a unit's entry may count (a float's whole numbers)."""


def _valid_entry(key: str, entry: Any) -> bool:
    """An entry exactly as :func:`refresh_store` writes it: its key the hash of its hour and
    files (so it names a directory in the store and nothing else), counts whole numbers,
    times finite, and a fine width the pipeline makes."""
    if not isinstance(entry, dict) or not _KEY.fullmatch(key):
        return False
    hour, files, step = entry.get("hour"), entry.get("files"), entry.get("step")
    return (isinstance(hour, str) and isinstance(files, dict) and bool(files)
            and all(isinstance(name, str) and isinstance(stat, list) and len(stat) == 4
                    and all(_whole(n) for n in stat) for name, stat in files.items())
            and key == _key(hour, files)
            and _whole(entry.get("records")) and _whole(entry.get("skipped"))
            and entry["records"] + entry["skipped"] <= _MOST_LINES
            and _time(entry.get("first")) and _time(entry.get("last"))
            and (entry.get("first") is None) == (entry.get("last") is None)
            and (entry.get("first") is None) == (entry["records"] == 0)
            and (entry.get("first") is None or entry["first"] <= entry["last"])
            and isinstance(step, float | int) and not isinstance(step, bool)
            and math.isfinite(step) and 0.001 <= step <= WINDOW_STEPS[-1]
            and round(step * 1000) >= 1)


def _load(path: Path) -> dict[str, Any]:
    """The manifest's valid units by key: none when it is missing, unreadable or of another
    version; an entry that is not valid (:func:`_valid_entry`) is left out."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION \
            or not isinstance(manifest.get("units"), dict):
        log.warning("pipeline: %s is not a manifest this version reads; starting afresh", path)
        return {}
    units = {key: entry for key, entry in manifest["units"].items() if _valid_entry(key, entry)}
    if len(units) < len(manifest["units"]):
        log.warning("pipeline: %d entries of %s are not valid: their segments are read again",
                    len(manifest["units"]) - len(units), path)
    return units


def _save(path: Path, units: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"version": MANIFEST_VERSION, "units": units}, indent=1,
                                    sort_keys=True) + "\n")
    os.replace(temporary, path)


def _stored(store: Path, key: str, entry: dict[str, Any]) -> StoredUnit:
    return StoredUnit(entry["hour"], tuple(sorted(entry["files"])), store / key,
                      int(entry["records"]), int(entry["skipped"]),
                      None if entry["first"] is None else float(entry["first"]),
                      None if entry["last"] is None else float(entry["last"]),
                      float(entry["step"]))


DONE = "_DONE"
"""Written last into a unit's directory (its key): a unit without it, or without a part's
``_SUCCESS``, was not made whole (a run that died, a directory emptied) and is read again."""


def _whole_unit(directory: Path, key: str) -> bool:
    try:
        if (directory / DONE).read_text() != key:
            return False
    except (OSError, UnicodeDecodeError):
        return False
    return all((directory / part / "_SUCCESS").is_file() for part in (RECORDS, *PARTS))


CONVERTERS_NAMES = ("arrow", "spark")
"""How a unit's JSON is converted: ``arrow`` (the default) by pyarrow in a Spark task
(``_arrow``), each unit it declines and every unit when it cannot run by Spark's JSON
reader; ``spark`` always by Spark's reader."""


def refresh_store(spark: SparkSession, hours: list[str], out: Path, *,
                  converter: str = "arrow") -> StoreRun:
    """Bring ``OUT/store`` up to date for the segment files of ``hours``; what it did and
    the hours' units as stored (their records: :func:`stored_records`).

    ``hours`` are ``date=/hour=`` directories (:func:`hour_directories`); each stands for
    its resolved path, so two spellings of one journal share its units.  A unit one of
    whose files was renamed or removed while Spark read it (the writer sealed its open
    segment) is not kept: its hour is planned and read once more.  ``converter``: one of
    :data:`CONVERTERS_NAMES`.
    """
    if converter not in CONVERTERS_NAMES:
        raise ValueError(f"converter must be one of {', '.join(CONVERTERS_NAMES)}, "
                         f"not {converter!r}")
    store = out / STORE
    manifest_path = out / MANIFEST
    units = _load(manifest_path)
    out.mkdir(parents=True, exist_ok=True)
    real = list(dict.fromkeys(os.path.realpath(hour) for hour in hours))
    for hour in real:  # a symlink may lead to a path Spark would read as a pattern
        refuse_pattern(hour, "hour directory")
    read: list[str] = []
    reused: list[str] = []
    removed: list[str] = []
    again = real
    for last in (False, True):
        again = _refresh(spark, again, store, manifest_path, units, read, reused, removed,
                         sealed_only=last, arrow=converter == "arrow")
        if not again:
            break
    now: dict[str, list[str]] = {}
    for key, entry in units.items():
        now.setdefault(entry["hour"], []).append(key)
    asked = [key for hour in real
             for key in sorted(now.get(hour, []), key=lambda k: min(units[k]["files"]))]
    log.info("pipeline: %d segment(s) read from JSON, %d reused from %s; %d hour(s) removed",
             len(read), len(reused), store, len(removed))
    return StoreRun(sorted(read), sorted(reused), sorted(set(removed)),
                    [_stored(store, key, units[key]) for key in asked])


def _refresh(spark: SparkSession, hours: list[str], store: Path,  # noqa: PLR0917
             manifest_path: Path, units: dict[str, Any], read: list[str], reused: list[str],
             removed: list[str], *, sealed_only: bool = False, arrow: bool = False) -> list[str]:
    """One pass of :func:`refresh_store` over ``hours`` (resolved): ``units`` brought up to
    date and saved, what was read and reused added to ``read`` and ``reused``; the hours a
    file of which vanished while it was read.  ``sealed_only`` (the last pass) leaves open
    segments out, with a warning: sealed files do not vanish, so nothing read is lost.
    ``arrow``: units are converted by :func:`_arrow_units` first, the rest by Spark."""
    by_hour: dict[str, list[str]] = {}
    for key, entry in units.items():
        by_hour.setdefault(entry["hour"], []).append(key)
    dropped: list[str] = []
    todo: list[tuple[str, Files]] = []
    for hour in hours:
        on_disk = _files(Path(hour))
        held: set[str] = set()
        for key in sorted(by_hour.get(hour, [])):
            files = units[key]["files"]
            if all(on_disk.get(name) == stat for name, stat in files.items()) \
                    and held.isdisjoint(files) and _whole_unit(store / key, key):
                held.update(files)
            else:
                dropped.append(key)
        reused += [os.path.join(hour, name) for name in sorted(held)]
        rest = {name: stat for name, stat in on_disk.items() if name not in held}
        for wanted in (False, True):  # sealed segments, then open ones, each as one unit
            group = {name: stat for name, stat in rest.items()
                     if name.endswith(OPEN_SUFFIX) is wanted}
            if group and wanted and sealed_only:
                log.warning("pipeline: %s: the open segment was sealed twice while this run "
                            "read it; its newest records wait for the next run",
                            safe_name(hour))
            elif group:
                todo += [(hour, part) for part in (_parted(group) if arrow else [group])]
    gone = sorted({entry["hour"] for entry in units.values() if not Path(entry["hour"]).is_dir()})
    removed += gone
    dropped += [key for key, entry in units.items() if entry["hour"] in gone]
    for key in set(dropped):
        del units[key]
        shutil.rmtree(store / key, ignore_errors=True)  # a key is 20 hex digits (_load)
    if dropped or not manifest_path.exists():
        _save(manifest_path, units)
    vanished: list[str] = []
    converted = _arrow_units(spark, [(hour, sorted(files), str(store / _key(hour, files)))
                                     for hour, files in todo]) if arrow and todo else {}
    # a few units at once: each job's start overlaps another's work
    with ThreadPoolExecutor(max_workers=CONVERTERS) as pool:
        convert = inheriting(spark)(_convert)
        futures = {pool.submit(convert, spark, hour, sorted(files),
                               store / _key(hour, files)): (hour, files)
                   for hour, files in todo if _key(hour, files) not in converted}
        done = [(converted[_key(hour, files)], (hour, files)) for hour, files in todo
                if _key(hour, files) in converted]
        # (those pyarrow made first, then Spark's as each completes: each unit is in the
        # manifest as soon as its Parquet is whole)
        for made, (hour, files) in itertools.chain(
                done, ((future.result(), futures[future]) for future in as_completed(futures))):
            key = _key(hour, files)
            if any(not os.path.isfile(os.path.join(hour, name)) for name in files):
                log.info("pipeline: a segment of %s was sealed or removed while it was read; "
                         "reading the hour again", safe_name(hour))
                shutil.rmtree(store / key, ignore_errors=True)
                vanished.append(hour)
                continue
            units[key] = {"hour": hour, "files": files, **made}
            _save(manifest_path, units)  # each unit as soon as its Parquet is whole
            read += [os.path.join(hour, name) for name in sorted(files)]
    return sorted(set(vanished))


UNIT_BYTES = 128 << 20
"""With the pyarrow converter, an hour's new segment files are read as units of at most
this many bytes of JSON (a file larger alone), each in a task that holds it in memory:
units are any sets of an hour's files (the analysis merges them, ``_audit.clean_pairs``),
so a busy hour is many tasks at once, not one that Spark's reader must take."""


def _parted(files: Files) -> list[Files]:
    """``files`` in parts of at most :data:`UNIT_BYTES` (a larger file alone), in name
    order: a node's segments in the order it wrote them, so a part's records follow the
    part before in time."""
    parts: list[Files] = []
    size = 0
    for name in sorted(files):
        if not parts or size + files[name][0] > UNIT_BYTES:
            parts.append({})
            size = 0
        parts[-1][name] = files[name]
        size += files[name][0]
    return parts


def _arrow_units(spark: SparkSession, units: list[tuple[str, list[str], str]]
                 ) -> dict[str, dict[str, Any]]:
    """``units`` (hour, segment names, store directory) converted by pyarrow
    (:func:`raetlike.pipeline._arrow.convert_unit`), one Spark task each, all in one job:
    what the manifest notes of each converted unit, by key.  A unit it declines is left
    out, and so is every unit when pyarrow is missing or the tasks fail (an executor
    without pyarrow or raetlike), with a warning: Spark's reader converts those."""
    try:
        from raetlike.pipeline._arrow import try_unit  # noqa: PLC0415 - pyarrow is optional
    except ImportError as error:
        log.warning("pipeline: pyarrow is missing (%s); Spark's JSON reader converts the "
                    "segments (slower; pip install pyarrow)", error)
        return {}
    tasks = spark.sparkContext.parallelize(units, len(units))
    try:
        made = tasks.map(lambda unit: try_unit(*unit)).collect()
    except Exception as error:  # noqa: BLE001 - any failure of the tasks: Spark converts
        log.warning("pipeline: converting with pyarrow failed on the executors (%s); "
                    "Spark's JSON reader converts the segments",
                    safe_name(str(error).strip().splitlines()[0]) if str(error).strip()
                    else type(error).__name__)
        return {}
    declined = [hour for (hour, _, _), (result, _) in zip(units, made, strict=True)
                if result is None]
    failed = [(hour, failure) for (hour, _, _), (_, failure) in zip(units, made, strict=True)
              if failure is not None]
    if failed:  # a bug in the converter, or a resource it lacked: never the run's end
        log.warning("pipeline: pyarrow failed on %d unit(s), which Spark's JSON reader "
                    "converts instead: %s", len(failed),
                    "; ".join(f"{safe_name(hour)}: {safe_name(failure)}"
                              for hour, failure in failed[:3]))
    if len(declined) > len(failed):
        log.info("pipeline: %d unit(s) left to Spark's JSON reader (a torn line, or text "
                 "pyarrow might read otherwise): %s", len(declined) - len(failed),
                 ", ".join(safe_name(hour) for hour in declined[:5]))
    return {Path(part).name: result for (_, _, part), (result, _) in zip(units, made, strict=True)
            if result is not None}


_SCHEME = r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?"
"""A URI's scheme and authority (``file:``, ``hdfs://host:8020``), before its path."""


def _in_files(spark: SparkSession, hour: str, names: list[str]) -> Column:
    """True for rows of the segment files ``names`` directly in ``hour``: Spark lists the
    directory and skips the other files (a filter on ``_metadata`` prunes files before
    they are opened).  Each file is matched by its path as Spark writes it, percent-encoded
    by Hadoop (``my node`` is ``my%20node``), made by Hadoop itself: the hour's path once,
    and each name of other characters than :data:`_PLAIN` (which Hadoop leaves as they
    are).  A unit of 20,000 segments costs the driver 0.3 s, not 9 s."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # noqa: S101 - the session's JVM is up
    path = jvm.org.apache.hadoop.fs.Path

    def raw(local: str) -> str:
        return str(path(local).toUri().getRawPath())

    directory = os.path.abspath(hour)
    base = raw(directory).rstrip("/")
    paths = [f"{base}/{name}" if _PLAIN.fullmatch(name) else raw(os.path.join(directory, name))
             for name in names]
    # the list crosses to the JVM as one string (``isin`` makes a JVM call per literal: 6 s
    # for 20,000 files); no path holds a NUL
    listed = jvm.java.util.regex.Pattern.compile("\0").splitAsStream("\0".join(paths)).toList()
    column = F.regexp_replace(F.col("_metadata.file_path"), _SCHEME, "")
    return Column(column._jc.isInCollection(listed))  # type: ignore[operator] # pyspark: a JVM column


_PLAIN = re.compile(r"[A-Za-z0-9._-]+")
"""A file name Hadoop puts in a URI's path as it is: unreserved URI characters, no ``:``."""


def _convert(spark: SparkSession, hour: str, names: list[str], part: Path) -> dict[str, Any]:
    """One unit's segments (the files ``names`` of ``hour``) -> Parquet at ``part/records``,
    the lines' fields as they are (normalised when read: the derived columns cost less
    computed than written and read), then its partials beside it; what the manifest notes
    of it.

    The JSON is parsed once; the counts and time range are observed while it is written,
    and the partials are made from the fresh Parquet in one partition (a unit's records
    need no shuffle: another unit converts on the other core)."""
    valid = valid_line()
    received = F.when(valid, F.col("received"))
    seen = Observation(f"unit-{part.name}")
    (read_json_journal(spark, [os.path.abspath(hour)], ignore_missing=True)
     .where(_in_files(spark, hour, names))
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
    (part / DONE).write_text(part.name)
    return {"records": int(stats["records"]), "skipped": int(stats["skipped"]),
            "first": None if first is None else float(first),
            "last": None if last is None else float(last), "step": step}
