"""A unit of journal segments converted without the JVM: pyarrow reads the JSON, numpy and
Arrow's kernels make the partials.

:func:`convert_unit` writes what ``_store._convert`` writes, row for row: the lines'
fields as Parquet under ``records/``, the four partials beside them (``_partials``), and
``_DONE``; and returns the same counts.  It does in about a second of one core what takes
Spark's JVM ten to twenty of CPU in a cold run: most of that is the JVM compiling itself
(docs/pipeline.md, "The first run's floor").  It runs inside a Spark task (``_store``
sends each unit to an executor), so it reads the files by the same paths Spark's own
reader would, and a cluster runs it as it runs the JSON reader.

Spark's JSON reader and pyarrow's are different parsers.  Every line the writer makes
reads the same in both, but hostile or damaged files may not: so a unit is *declined*
(:func:`convert_unit` returns None, and the caller has Spark convert it) unless every
file is lines that pyarrow parses one row each, strictly:

- pyarrow raises on anything it does not take as JSON of the schema's types: a torn or cut
  line, a duplicate key, a string where a number belongs or the reverse, a number past a
  long or a double, an unpaired surrogate escape, an unescaped control character, an
  object spread over lines (Spark's reader takes some of these its own way: a number as a
  string, the last duplicate);
- the bytes are UTF-8 (Spark reads others with replacement characters; pyarrow's JSON
  reader does not check);
- every line starts with ``{`` and ends with ``}`` and no byte is ``\\r`` (a blank line, a
  byte order mark, Spark's other line ends, or an object across lines, which pyarrow
  reads as one, would count lines differently), and the rows number the lines (two
  objects on one line are one corrupt line to Spark);
- no non-numeric number (``NaN``, ``Inf``...) where a value starts, in any member, and no
  ``sent`` or ``received`` that is -0.0 (the readers take different spellings and signs);
- no line long enough to hold what Jackson's limits refuse and pyarrow takes: lines past
  1,000 bytes are checked for a number past 1,000 characters or more than 1,000 brackets,
  and lines past 50,000 bytes declined (a name past 50,000 characters).

A declined unit costs a read of its bytes.  ``tests/test_pipeline_arrow.py`` compares both
converters' output on journals the writer made and on hostile lines.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from raetlike.errors import RaetError
from raetlike.pipeline._bounds import (
    CORRUPT_COLUMN,
    DOUBLE_FIELDS,
    KINDS,
    LONG_FIELDS,
    MOST_COUNT,
    MOST_MS,
    MOST_SEQUENCE,
    MOST_TEXT,
    RECEIVED_RANGE,
    STRING_FIELDS,
    fine_step,
)

__all__ = ["MOST_BITMAPS", "MOST_BYTES", "PART_FILE", "convert_unit",
           "read_stored", "try_unit", "write_rows"]

MOST_BYTES = 256 << 20
"""The most bytes of JSON a unit converted here has: it is read whole into memory; a
larger unit is left to Spark's reader, which streams it.  ``_store`` makes units of at
most 128 MiB (``UNIT_BYTES``) for this converter, so only a segment file past this alone
is left to Spark.  With :data:`MOST_LINES`, what a task holds stays under about 1 GiB
(docs/pipeline.md, "Converting a unit")."""
MOST_LINES = 2_000_000
"""The most lines a unit converted here has: memory grows with lines as well as bytes (a
file of ``{}`` lines costs about 50 times its size), so a unit of more is left to Spark's
reader.  The writer's lines are about 350 bytes: a 128 MiB unit holds about 380,000."""
MOST_BITMAPS = 16_384
"""The most ``sequences`` rows (4 KiB bitmaps: 64 MiB) a unit converted here has."""
BITMAP_BITS = 32_768  # numbers a bitmap of Spark's bitmap_construct_agg holds
PART_FILE = "part-00000-arrow.snappy.parquet"
"""The one Parquet file of each directory written here (Spark's have a UUID in theirs): an
operator, and the cluster test, can tell which converter made a unit."""
RECORDS = "records"  # _store.RECORDS
DONE = "_DONE"  # _store.DONE

_LINE = pa.schema([*[(name, pa.string()) for name in STRING_FIELDS],
                   *[(name, pa.int64()) for name in LONG_FIELDS],
                   *[(name, pa.float64()) for name in DOUBLE_FIELDS]])

_TIME = pa.timestamp("us", tz="UTC")
_ENDS = ("source_estate", "source_yard", "source_share", "destination_yard",
         "destination_share")
_FINE_KEYS = ("window_start", "node", "kind", "topic", *_ENDS, "destination_estate")
_LATENCY_KEYS = ("kind", "topic", *_ENDS, "destination_estate")
_SOURCE = ("source_estate", "source_yard", "source_share")
_NEWLINE, _BRACE, _CLOSE = ord("\n"), ord("{"), ord("}")
_ONE = pa.scalar(1, pa.int8())
_NO_ONE = pa.scalar(None, pa.int8())


class Declined(RaetError):  # noqa: N818 - not an error: the unit goes to Spark
    """A file holds something pyarrow might not read as Spark does, or more than a
    unit's bounds (:data:`MOST_BYTES`, :data:`MOST_LINES`); never leaves this module."""


def _read(path: str, most_bytes: int, most_lines: int) -> tuple[pa.Table, int]:
    """One segment file's lines and its size, or :class:`Declined`: past ``most_bytes`` or
    ``most_lines``, or lines pyarrow might read otherwise (:func:`_lines`).  The file is
    read as Spark's reader would, by its length when opened: a file whose content is not
    that long (a link to ``/proc``), or that is no regular file, is declined."""
    try:  # without blocking: a FIFO put in the file's place since it was listed
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:  # sealed or removed meanwhile: Spark's path notices and retries
        raise Declined(path) from None
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > most_bytes:
            raise Declined(path)
        data = file.read(info.st_size + 1)
    if len(data) != info.st_size:
        raise Declined(path)
    if not data:
        return _LINE.empty_table(), 0
    lines = _lines(data)
    if lines is None or lines > most_lines:
        raise Declined(path)
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(
            block_size=max(1 << 20, min(len(data), 16 << 20))),
            parse_options=pj.ParseOptions(explicit_schema=_LINE,
                                          unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError,
            UnicodeDecodeError):
        raise Declined(path) from None
    if table.num_rows != lines:
        raise Declined(path)
    table = table.select(_LINE.names).cast(_LINE)
    for name in DOUBLE_FIELDS:
        values = np.asarray(pc.fill_null(table[name], 1.0).to_numpy(), np.float64)
        if not np.isfinite(values).all() or (np.signbit(values) & (values == 0)).any():
            raise Declined(path)  # NaN, infinite, or -0.0 (which Spark may read as 0.0)
    return table, len(data)


_LONG_LINE = 1_000
"""Lines longer than this (bytes) are looked at more closely (:func:`_lines`)."""
_LONGEST_LINE = 50_000
"""Lines longer than this are declined: Jackson (Spark's parser) refuses a name past
50,000 characters, which pyarrow takes; the journal writer's lines are far shorter."""
_LONG_NUMBER = re.compile(rb"(?<![-+0-9.eE])[-+0-9.eE]{1000}")
"""A number Jackson may refuse (past 1,000 characters), which pyarrow takes; looked for
only at the start of a run (else a long run costs a thousand steps a byte)."""
_SPACE = b" \t\n"
_AFTER_VALUE = (b",", b"}", b"]", b" ", b"\t", b"\n", b"")
"""What may follow a value in JSON: a token followed by anything else is no value, and
pyarrow refuses the line (so ``"log:Info"`` or ``"[Infra]"`` in a text is not looked at)."""
_MOST_SPELLED = 10_000
"""Past this many ``NaN`` or ``Inf`` in a file, it is declined without a look at each: the
cost of a hostile file's byte stays what a normal byte costs."""


def _non_number(data: bytes) -> bool:
    """Whether ``data`` may hold a non-numeric number (``NaN``, ``Inf``, with a sign or
    not) where a value starts, in any member: the two readers take different spellings.
    Only the few places that spell one are looked at (a ``memchr`` finds none in the
    writer's lowercase keys and kinds)."""
    for token, initial in ((b"NaN", b"N"), (b"Inf", b"I")):
        if initial not in data:
            continue
        at = data.find(token)
        if data.count(token) > _MOST_SPELLED:
            return True  # text full of them: not worth a look at each (Spark reads it)
        while at >= 0:
            after = at + len(token) + (5 if data.startswith(b"inity", at + 3) else 0)
            if data[after:after + 1] in _AFTER_VALUE and _value_starts(data, at):
                return True
            at = data.find(token, at + 1)
    return False


_VALUE_END = frozenset(b'"}]0123456789elNyf')
"""The last byte of a JSON value (a string, object, array, number, ``true``, ``false``,
``null``, ``NaN``, ``Infinity``, ``Inf``)."""


def _back(data: bytes, at: int) -> int:
    """The index of the last byte before ``at`` that is not space (-1: none; -2: a run of
    more than 64, which the caller takes as a value's start)."""
    index = at - 1
    while index >= 0 and data[index] in _SPACE:
        index -= 1
        if at - index > 64:
            return -2
    return index


def _value_starts(data: bytes, at: int, depth: int = 0) -> bool:
    """Whether a JSON value may start at ``at`` (after an optional sign): after a key's
    ``:``, after a value's ``,``, after a ``[`` where a value may start, or at the start.
    A byte of text (``"x:Inf"``, ``"[NaN]"`` in a topic) is not one; what this cannot tell
    (deep nesting, long runs of space) it takes as one."""
    index = _back(data, at)
    while index >= 0 and data[index] in b"+-":
        index = _back(data, index)
    if index < 0 or depth > 64:
        return True
    mark = data[index]
    if mark == ord(":"):
        key = _back(data, index)
        return key < 0 or data[key] == ord('"')
    if mark == ord(","):
        value = _back(data, index)
        return value < 0 or data[value] in _VALUE_END
    if mark == ord("["):
        return _value_starts(data, index, depth + 1)
    return False


def _lines(data: bytes) -> int | None:
    """How many lines ``data`` (not empty) holds, or None when pyarrow might read any
    differently from Spark: not UTF-8 (Spark reads it with replacement characters,
    pyarrow does not look), a line that does not start with ``{`` or a ``\r`` (Spark's
    line ends and blank lines differ from pyarrow's), a non-numeric number anywhere
    (even in a member neither reads), or a line long enough to hold what Jackson's
    limits refuse and pyarrow takes (a number past 1,000 characters, nesting past 1,000
    levels, a name past 50,000 characters).  Each check is a C-speed pass over the
    bytes; only the rare lines past :data:`_LONG_LINE` bytes are looked at in Python."""
    if b"\r" in data or not data.startswith(b"{"):
        return None
    try:  # Arrow's validator: overlong forms, surrogates, past U+10FFFF, cut short
        pa.Array.from_buffers(pa.large_string(), 1, [
            None, pa.py_buffer(np.array([0, len(data)], np.int64)),
            pa.py_buffer(data)]).validate(full=True)
    except pa.ArrowInvalid:
        return None
    if _non_number(data):
        return None
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == _NEWLINE)
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], ends[:-1] + 1))
    # every line one object: it starts with { and ends with } (pyarrow reads a newline
    # inside an object as a space, so an object across lines would count as one row of
    # lines Spark reads as torn ones; JSON text cannot hold a raw newline)
    if not bool((raw[starts[1:]] == _BRACE).all()) or not bool((raw[ends - 1] == _CLOSE).all()):
        return None
    for at in np.flatnonzero(ends - starts > _LONG_LINE):
        line = data[starts[at]:ends[at]]
        if len(line) > _LONGEST_LINE or _LONG_NUMBER.search(line) \
                or line.count(b"{") + line.count(b"[") > 1_000:
            return None
    return len(starts)


def _between(column: pa.ChunkedArray, low: float, high: float) -> pa.ChunkedArray:
    inside = pc.and_kleene(pc.greater_equal(column, low), pc.less_equal(column, high))
    return pc.or_kleene(pc.is_null(column), inside)


def _valid(table: pa.Table) -> pa.ChunkedArray:
    """``_frames.valid_line`` for lines pyarrow read (none corrupt, every double finite)."""
    received = table["received"]
    low, high = RECEIVED_RANGE
    checks = [pc.equal(table["version"], 1), pc.is_valid(table["node"]),
              pc.is_valid(table["source_estate"]), pc.greater_equal(received, low),
              pc.less(received, high)]
    checks += [_between(table[name], 0, MOST_COUNT)
               for name in ("body_bytes", "segments", "resends")]
    checks.append(_between(table["sequence"], -MOST_SEQUENCE, MOST_SEQUENCE))
    checks += [pc.or_kleene(pc.is_null(table[name]),
                            pc.less_equal(pc.utf8_length(table[name]), MOST_TEXT))
               for name in STRING_FIELDS]
    checks.append(pc.or_kleene(pc.is_null(table["kind"]), pc.is_in(table["kind"], pa.array(KINDS))))
    valid = checks[0]
    for check in checks[1:]:
        valid = pc.and_kleene(valid, check)
    return pc.fill_null(valid, False)


def _micros(seconds: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Spark's ``timestamp_seconds`` of finite, non-negative seconds: times 10^6, truncated."""
    return (np.asarray(seconds.to_numpy(), np.float64) * 1_000_000.0).astype(np.int64)


def _timestamps(micros: np.ndarray) -> pa.Array:
    return pa.array(micros, pa.int64()).cast(_TIME)


def _write(table: pa.Table, directory: Path) -> None:
    directory.mkdir(parents=True)
    pq.write_table(table, directory / PART_FILE, compression="snappy")
    (directory / "_SUCCESS").touch()


def _latency(records: pa.Table) -> pa.Array:
    """``latency_ms`` as ``_frames.normalise`` makes it: null unless finite."""
    received = np.asarray(records["received"].to_numpy(), np.float64)
    sent = records["sent"]
    known = np.asarray(pc.is_valid(sent).to_numpy(zero_copy_only=False), bool)
    with np.errstate(over="ignore", invalid="ignore"):
        values = (received - np.asarray(pc.fill_null(sent, 0.0).to_numpy(), np.float64)) * 1000.0
    return pa.array(values, pa.float64(), mask=~(known & np.isfinite(values)))


def _fine(records: pa.Table, micros: np.ndarray, latency: pa.Array, numbered: pa.ChunkedArray,
          step: float) -> pa.Table:
    """``_tables.fine_sums`` at ``step`` seconds (windows aligned to the epoch)."""
    width = round(step * 1000) * 1000
    frame = pa.table({
        "window_start": _timestamps(micros - micros % width),
        **{name: records[name] for name in ("node", "kind", "topic", *_ENDS)},
        "destination_estate": pc.coalesce(records["destination_estate"], records["node"]),
        "one": pa.array(np.ones(records.num_rows, np.int8)),
        "body_bytes": records["body_bytes"], "segments": records["segments"],
        "multi": pc.if_else(pc.greater(records["segments"], 1), _ONE, _NO_ONE),
        "resends": records["resends"],
        "resent": pc.if_else(pc.greater(records["resends"], 0), _ONE, _NO_ONE),
        "latency_ms": latency, "numbered": numbered,
    })
    sums = frame.group_by(list(_FINE_KEYS), use_threads=False).aggregate([
        ("one", "count"), ("body_bytes", "sum"), ("segments", "sum"), ("segments", "max"),
        ("multi", "count"), ("resends", "sum"), ("resends", "max"), ("resent", "count"),
        ("latency_ms", "count"), ("latency_ms", "max"), ("numbered", "count"),
        ("numbered", "min"), ("numbered", "max")])
    return pa.table({
        **{name: sums[name] for name in _FINE_KEYS},
        "messages": sums["one_count"], "bytes": sums["body_bytes_sum"],
        "segments": sums["segments_sum"], "segments_max": sums["segments_max"],
        "multi_segment_messages": sums["multi_count"], "resends": sums["resends_sum"],
        "resends_max": sums["resends_max"], "messages_with_resends": sums["resent_count"],
        "timed": sums["latency_ms_count"], "max_ms": sums["latency_ms_max"],
        "sequenced": sums["numbered_count"], "sequence_min": sums["numbered_min"],
        "sequence_max": sums["numbered_max"]})


def _latency_sums(records: pa.Table, latency: pa.Array) -> pa.Table:
    """``_tables.latency_sums``: timed messages per stream and latency microsecond."""
    timed = records.filter(pc.is_valid(latency))
    values = np.clip(np.asarray(pc.drop_null(latency).to_numpy(), np.float64), -MOST_MS, MOST_MS)
    frame = pa.table({
        **{name: timed[name] for name in ("kind", "topic", *_ENDS)},
        "destination_estate": pc.coalesce(timed["destination_estate"], timed["node"]),
        "us": pa.array(np.floor(values * 1000).astype(np.int64)),
        "one": pa.array(np.ones(timed.num_rows, np.int8)),
    })
    keys = [*_LATENCY_KEYS, "us"]
    sums = frame.group_by(keys, use_threads=False).aggregate([("one", "count")])
    return pa.table({**{name: sums[name] for name in keys}, "n": sums["one_count"]})


def _source(table: pa.Table) -> pa.ChunkedArray:
    """Spark's ``concat_ws("/", estate, yard, share)``: the parts that are not null."""
    return pc.binary_join_element_wise(*[table[name] for name in _SOURCE], "/",
                                       null_handling="skip")


def _sequences(numbered: pa.Table) -> pa.Table:
    """``_partials.sequence_sums`` over the numbered deliveries at their destination, or
    :class:`Declined` past :data:`MOST_BITMAPS` rows."""
    sequence = np.asarray(numbered["sequence"].to_numpy(), np.int64)
    # Spark: bucket 1 + (n - 1) / 32768 and bit (n - 1) % 32768 for n > 0, else n / 32768
    # and -n % 32768, in Java's division (toward zero); every operand here is >= 0
    positive = sequence > 0
    above = np.where(positive, sequence - 1, -sequence)
    bucket = np.where(positive, 1 + above // BITMAP_BITS, -(above // BITMAP_BITS))
    frame = pa.table({**{name: numbered[name] for name in (*_SOURCE, "node")},
                      "bucket": pa.array(bucket, pa.int64()),
                      "row": pa.array(np.arange(len(sequence), dtype=np.int64)),
                      "sequence": numbered["sequence"], "received": numbered["received"]})
    keys = [*_SOURCE, "node", "bucket"]
    if frame.group_by(keys, use_threads=False).aggregate([]).num_rows > MOST_BITMAPS:
        raise Declined("sequences")
    sums = frame.group_by(keys, use_threads=False).aggregate([
        ("row", "list"), ("row", "count"), ("sequence", "min"), ("sequence", "max"),
        ("received", "min"), ("received", "max")])
    groups = sums.num_rows
    counts = np.asarray(sums["row_count"].to_numpy(), np.int64)
    rows = np.asarray(pc.list_flatten(sums["row_list"]).to_numpy(), np.int64)
    position = (above % BITMAP_BITS)[rows]
    bitmaps = np.zeros((groups, BITMAP_BITS // 8), np.uint8)
    np.bitwise_or.at(bitmaps, (np.repeat(np.arange(groups), counts), position // 8),
                     np.left_shift(1, position % 8).astype(np.uint8))
    offsets = np.arange(groups + 1, dtype=np.int32) * (BITMAP_BITS // 8)
    bits = pa.Array.from_buffers(pa.binary(), groups, [None, pa.py_buffer(offsets),
                                                       pa.py_buffer(bitmaps)])
    return pa.table({"source": _source(sums), "node": sums["node"], "bucket": sums["bucket"],
                     "bits": bits, "n": sums["row_count"],
                     "sequence_min": sums["sequence_min"], "sequence_max": sums["sequence_max"],
                     "received_min": sums["received_min"], "received_max": sums["received_max"]})


def _late(numbered: pa.Table) -> pa.Table:
    """``_partials.late_arrivals``: per (joined source, node), by receive time then number,
    the deliveries numbered lower than one before them, with the highest before."""
    frame = pa.table({"source": _source(numbered), "node": numbered["node"],
                      "received": numbered["received"], "sequence": numbered["sequence"]})
    frame = frame.take(pc.sort_indices(frame, sort_keys=[
        ("source", "ascending"), ("node", "ascending"), ("received", "ascending"),
        ("sequence", "ascending")]))
    count = frame.num_rows
    starts = np.ones(count, bool)
    if count > 1:  # a new (source, node): both are never null here
        changed = pc.or_kleene(pc.not_equal(frame["source"][1:], frame["source"][:-1]),
                         pc.not_equal(frame["node"][1:], frame["node"][:-1]))
        starts[1:] = np.asarray(changed.to_numpy(zero_copy_only=False), bool)
    group = np.cumsum(starts) - 1
    values, rank = np.unique(np.asarray(frame["sequence"].to_numpy(), np.int64),
                             return_inverse=True)
    ranked = group * len(values) + rank  # every rank of a later group above an earlier's
    before = np.full(count, -1, np.int64)
    if count > 1:
        before[1:] = np.maximum.accumulate(ranked)[:-1]
    late = ~starts & (ranked < before)  # so ``before`` is of the same group
    rows = frame.filter(pa.array(late))
    highest_before = values[before[late] - group[late] * len(values)]
    return pa.table({"source": rows["source"], "node": rows["node"],
                     "sequence": rows["sequence"],
                     "highest_before": pa.array(highest_before, pa.int64()),
                     "received_at": _timestamps(_micros(rows["received"]))})


def convert_unit(hour: str, names: list[str], part: str) -> dict[str, Any] | None:
    """The segment files ``names`` of ``hour`` -> ``part/records`` and the partials, as
    ``_store._convert`` makes them; what the manifest notes of the unit, or None (nothing
    written) when the unit is larger than :data:`MOST_BYTES` or :data:`MOST_LINES`, or a
    file holds what this reader declines (module docstring)."""
    tables: list[pa.Table] = []
    size = count = 0
    try:
        for name in names:
            table, read = _read(os.path.join(hour, name), MOST_BYTES - size, MOST_LINES - count)
            tables.append(table)
            size += read
            count += table.num_rows
    except (Declined, OSError):
        return None
    lines = pa.concat_tables(tables) if tables else _LINE.empty_table()
    valid = _valid(lines)
    records = lines if pc.all(valid).as_py() is not False else lines.filter(valid)
    count = records.num_rows
    first = pc.min(records["received"]).as_py() if count else None
    last = pc.max(records["received"]).as_py() if count else None
    step = fine_step(0.0 if first is None or last is None else last - first)
    node, destination = records["node"], records["destination_estate"]
    at_destination = pc.fill_null(pc.or_kleene(pc.is_null(destination),
                                               pc.equal(node, destination)), False)
    numbered = pc.if_else(at_destination, records["sequence"], pa.scalar(None, pa.int64()))
    delivered = pc.is_valid(numbered)
    deliveries = records if pc.all(delivered).as_py() is not False else records.filter(delivered)
    latency = _latency(records)
    try:
        sequences = _sequences(deliveries)
    except Declined:
        return None
    directory = Path(part)
    shutil.rmtree(directory, ignore_errors=True)
    _write(lines.append_column(CORRUPT_COLUMN, pa.nulls(lines.num_rows, pa.string())),
           directory / RECORDS)
    _write(_fine(records, _micros(records["received"]), latency, numbered, step),
           directory / "fine")
    _write(_latency_sums(records, latency), directory / "latency")
    _write(sequences, directory / "sequences")
    _write(_late(deliveries), directory / "late")
    (directory / DONE).write_text(directory.name)
    return {"records": count, "skipped": lines.num_rows - count,
            "first": None if first is None else float(first),
            "last": None if last is None else float(last), "step": step}


_TYPES = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(),
          "double": pa.float64(), "boolean": pa.bool_(), "binary": pa.binary(),
          "timestamp": _TIME, "array<string>": pa.list_(pa.string())}


def write_rows(directory: Path, rows: list[tuple[Any, ...]],
               columns: list[tuple[str, str]]) -> None:
    """A table the driver made (``rows``; timestamps as microseconds since the epoch) as
    Parquet under ``directory``, replacing what is there, as Spark writes one: a part file
    and ``_SUCCESS``.  ``columns``: each column's name and Spark type (``simpleString``).
    No Spark job: a few hundred rows cost Spark's writer 0.2-0.3 s a table warm, and
    seconds for the first in a process."""
    schema = pa.schema([(name, _TYPES[kind]) for name, kind in columns])
    arrays = [pa.array([row[index] for row in rows],
                       pa.int64() if field.type == _TIME else field.type).cast(field.type)
              for index, field in enumerate(schema)]
    shutil.rmtree(directory, ignore_errors=True)
    _write(pa.Table.from_arrays(arrays, schema=schema), directory)


def try_unit(hour: str, names: list[str], part: str) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`convert_unit` as a Spark task runs it: its result, or (None, what failed)
    when it raised, with nothing left under ``part``.  A failure (a bug here, memory or
    disk it lacked) leaves the unit to Spark's reader rather than failing the job: Spark
    would retry the task, then end every unit's conversion with it."""
    try:
        return convert_unit(hour, names, part), None
    except Exception as error:  # noqa: BLE001 - reported, and the unit goes to Spark
        shutil.rmtree(part, ignore_errors=True)
        return None, f"{type(error).__name__}: {error}"[:500]


def _rows_in(directory: Path) -> int:
    """The rows of the Parquet files in ``directory`` (from their footers)."""
    return sum(pq.read_metadata(path).num_rows for path in _parts(directory))


def _parts(directory: Path) -> list[Path]:
    """The Parquet files Spark would read in ``directory`` (not ``_`` or ``.`` files)."""
    return sorted(path for path in directory.iterdir()
                  if path.is_file() and not path.name.startswith(("_", ".")))


def _read_table(path: Path) -> pa.Table:
    """A Parquet file, Spark's INT96 timestamps read as microseconds (as nanoseconds they
    overflow past the year 2262; Spark's reach the year 294247)."""
    return pq.read_table(path, coerce_int96_timestamp_unit="us")


def _read_part(directories: list[Path], name: str, unit: bool = False) -> pa.Table:
    """Every file of the partial ``name`` of ``directories``, their timestamps as µs since
    the epoch (:func:`_as_micros`), and with ``unit`` each row's directory's name."""
    tables = []
    for directory in directories:
        for path in _parts(directory / name):
            table = _as_micros(_read_table(path))
            if unit:
                table = table.append_column("unit", pa.array([directory.name] * table.num_rows,
                                                             pa.string()))
            tables.append(table)
    return pa.concat_tables(tables, promote_options="permissive")


def _as_micros(table: pa.Table) -> pa.Table:
    """Every timestamp column of ``table`` as µs since the epoch: what a ``collect`` of
    ``unix_micros`` gives, whichever converter wrote it (Spark's INT96 has no zone, ours
    is UTC: the same instants)."""
    for index, column in enumerate(table.schema):
        if pa.types.is_timestamp(column.type):
            micros = table[column.name].cast(pa.timestamp("us", tz=column.type.tz))
            table = table.set_column(index, column.name, micros.cast(pa.int64()))
    return table


def read_stored(directories: list[Path], most: int, most_bitmaps: int
                ) -> dict[str, list[dict[str, Any]]] | None:
    """The ``fine``, ``latency``, ``sequences`` and ``late`` partials of the stored units in
    ``directories`` as rows, read here (no Spark job): what the pipeline's ``_collect``
    collects through Spark, ``fine``'s ``window_start`` and ``late``'s ``received_at`` in
    µs and each ``sequences`` row with its ``unit`` (the directory's name).  None when a
    kind has more than ``most`` rows (``sequences``: ``most_bitmaps``); counted from the
    files' footers first, so nothing past the bounds is read."""
    bounds = {"fine": most, "latency": most, "sequences": min(most, most_bitmaps),
              "late": most}
    if any(sum(_rows_in(directory / name) for directory in directories) > bound
           for name, bound in bounds.items()):
        return None
    return {"fine": _read_part(directories, "fine").to_pylist(),
            "latency": _read_part(directories, "latency").to_pylist(),
            "sequences": _read_part(directories, "sequences", unit=True).to_pylist(),
            "late": _read_part(directories, "late").to_pylist()}
