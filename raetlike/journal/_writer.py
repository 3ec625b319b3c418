"""Append journal records to segment files: rotated by size, age and hour; never rewritten.

Layout under the journal directory (one directory per node is the usual use)::

    date=YYYY-MM-DD/hour=HH/NODE.YYYYMMDDTHHMMSSffffff.PID.N.jsonl        sealed
    date=YYYY-MM-DD/hour=HH/NODE.YYYYMMDDTHHMMSSffffff.PID.N.jsonl.open   being written

A segment is written under its ``.open`` name and renamed (atomically, same
directory) when sealed, so a reader that wants only finished segments
(Spark streaming) matches ``*.jsonl``.  Appended records are gathered and
handed to the OS in one ``write`` per batch: at every :meth:`JournalWriter.tick`
(an estate ticks once per loop round, after the round's deliveries), when
``flush_bytes`` are waiting, before an fsync, and when a segment is sealed;
with ``FsyncPolicy.ALWAYS`` at once, record by record.  So a killed process
loses at most the records of the round it was in (and a write cut short
leaves a torn last line, which readers skip and report, never damage to what
came before); the fsync policy decides what a power loss may take.  A writer never opens an existing
file: after a restart it starts a new segment, and seals what a dead writer
of the same node left open without changing its bytes.  A writer holds an
exclusive ``flock`` on the segment it writes: a leftover ``.open`` segment
whose lock can be taken is a dead writer's, whatever pid its name carries.

A journal that cannot be written (a full disk, a file-size limit, its
directory removed) does not stop its process: :meth:`JournalWriter.append`,
:meth:`~JournalWriter.record_delivery` and :meth:`~JournalWriter.tick` never
raise an ``OSError``.  The failure is counted (``write_errors``,
``last_error``), logged at WARNING at most once a minute, and retried at each
tick; meanwhile records wait in memory up to ``max_bytes`` (the segment's
bound) and those past it are refused and counted in ``records_lost``, as are
records written into a segment whose file was removed.  The calls that promise
the bytes are written (:meth:`~JournalWriter.flush`,
:meth:`~JournalWriter.position`, :meth:`~JournalWriter.rotate`,
:meth:`~JournalWriter.close`, and :meth:`~JournalWriter.record_durable` when it
refuses a line) raise it.  Intervals (segment age, interval fsync, retries)
are on a monotonic clock; the wall clock only names segments, and a record's
``received`` time picks its partition.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import functools
import logging
import math
import os
import re
import threading
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from raetlike._native import compiled
from raetlike.journal import _delivery as _delivery_module
from raetlike.journal._delivery import (
    _NO_PREFIXES,
    _RAW_LINE,
    PLAIN_ROOM,
    Delivery,
    PlainLines,
    delivery_line,
)
from raetlike.journal._record import JournalRecord, encode_fields, encode_record
from raetlike.names import name_problem, quoted_name

__all__ = ["DEFAULT_FLUSH_BYTES", "DEFAULT_FSYNC", "DEFAULT_FSYNC_INTERVAL", "DEFAULT_MAX_AGE",
           "DEFAULT_MAX_BYTES",
           "OPEN_SUFFIX", "SEALED_SUFFIX", "FsyncPolicy", "JournalWriter", "partition_of"]

log = logging.getLogger(__name__)

SEALED_SUFFIX = ".jsonl"
OPEN_SUFFIX = ".jsonl.open"


class FsyncPolicy(enum.Enum):
    """When appended records are forced to stable storage."""

    ALWAYS = "always"
    """fdatasync after every record: survives power loss, slowest."""
    INTERVAL = "interval"
    """fdatasync at most every ``fsync_interval`` seconds (at the next tick or batch write)."""
    NEVER = "never"
    """Leave it to the OS: a killed process loses nothing, a power loss may lose seconds."""


DEFAULT_FSYNC = FsyncPolicy.INTERVAL
DEFAULT_FSYNC_INTERVAL = 1.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_AGE = 300.0
DEFAULT_FLUSH_BYTES = 64 * 1024
WARNING_EVERY = 60.0
"""Seconds (monotonic) between two WARNING lines about a journal that cannot be written."""
GONE_CHECK_EVERY = 1.0
"""Seconds (monotonic) between two checks, at a tick, that the open segment's file is still
linked (a removed directory takes it; writes into it still succeed and are lost)."""

_CBATCH: Any = compiled("raetlike.journal._cjournal", "Batch")
"""The compiled batch (``_cjournal.c``), unless missing or ``RAETLIKE_PURE_PYTHON`` is set."""

_SEGMENT_NAME = re.compile(r"^(?P<node>.+)\.(?P<stamp>\d{8}T\d{12})\.(?P<pid>\d+)\.(?P<serial>\d+)"
                           + re.escape(OPEN_SUFFIX) + "$")
_ANY_SEGMENT_NAME = re.compile(_SEGMENT_NAME.pattern.removesuffix(re.escape(OPEN_SUFFIX) + "$")
                               + "(" + re.escape(OPEN_SUFFIX) + "|" + re.escape(SEALED_SUFFIX)
                               + ")$")
"""A segment's name, open or sealed."""


def _node_problem(node: object) -> str | None:
    """Why ``node`` cannot name a journal's segments, or None: it must be a valid name
    (:mod:`raetlike.names`: no whitespace, separators or controls, not hidden) that does not
    start with ``_`` and holds no ``:`` either, since Spark skips files whose names start
    with ``_`` or ``.`` and Hadoop cannot read a name with a colon."""
    problem = name_problem(node)
    if problem is not None:
        return problem
    assert isinstance(node, str)  # noqa: S101 - name_problem said so
    if node.startswith("_"):
        return "must not start with '_' (Spark skips such files)"
    if ":" in node:
        return "must not hold ':' (Hadoop cannot read such files)"
    return None


@functools.lru_cache(maxsize=64)
def _partition_of_hour(hour: int) -> str:
    moment = datetime.fromtimestamp(hour * 3600, UTC)
    return f"date={moment:%Y-%m-%d}/hour={moment:%H}"


def partition_of(wall: float) -> str:
    """The ``date=YYYY-MM-DD/hour=HH`` directory (UTC) for a wall-clock time."""
    return _partition_of_hour(int(wall // 3600))


def _stamp(wall: float) -> str:
    """A segment name's time stamp (UTC, to the microsecond: sorts as time does)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y%m%dT%H%M%S%f")


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directories(directory: Path) -> list[Path]:
    """``mkdir -p``; the directories it made, the outermost first."""
    missing = []
    while not directory.is_dir():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    made = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue  # made meanwhile (another writer of the directory)
        made.append(path)
    return made


_OPEN_PATHS: set[Path] = set()  # segments this process is writing


def _process_alive(pid: int) -> bool:
    """Only where ``flock`` cannot tell (a file system without it)."""
    if pid == os.getpid():
        return False  # a leftover with our pid is from an earlier process (pid reuse)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock(fd: int) -> bool:
    """Take the exclusive lock of a segment's file; False when another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class _PyBatch:
    """Lines waiting for their ``write()``: the pure-Python twin of ``_cjournal.Batch``
    (which is also the writer's ``record_delivery``; this one is not callable)."""

    __slots__ = ("_busy", "data", "end", "limit", "records", "start", "written",
                 "written_records")

    def __init__(self) -> None:
        self._busy = False  # write() under way (its data must not change meanwhile)
        self.data = bytearray()
        self.records = 0  # lines waiting
        self.written = 0  # bytes written, and lines (the segment resets both)
        self.written_records = 0
        self.start = self.end = 0.0  # raw-bytes lines received from start to before end
        self.limit = 0  # join while fewer bytes than this wait

    def __len__(self) -> int:
        return len(self.data)

    def append(self, line: bytes | bytearray) -> None:
        self.data += line
        self.records += line.count(b"\n")

    def write(self, fd: int) -> int:
        """Hand every waiting byte to the OS; what went out leaves the batch (also when a
        later ``write()`` fails: the error is raised, the rest waits).  Meanwhile (a
        signal handler, another thread) the batch refuses to change with BufferError, as
        the C one does: append and clear by the bytearray's export, write here."""
        if self._busy:
            raise BufferError("the journal batch is being written")
        data = self.data
        done = 0
        self._busy = True
        try:
            with memoryview(data) as whole:
                while done < len(whole):
                    done += os.write(fd, whole[done:])
        finally:
            self._busy = False
            lines = self.records if done == len(data) else data.count(b"\n", 0, done)
            self.written += done
            self.written_records += lines
            self.records -= lines
            del data[:done]
        return done

    def clear(self) -> None:
        self.data.clear()
        self.records = 0

    def getvalue(self) -> bytes:
        return bytes(self.data)


_Batch = _PyBatch | Any  # or a _cjournal.Batch, which has the same attributes


class _Segment:
    """One open segment file; the writer's batch holds its records waiting to be written."""

    def __init__(self, path: Path, opened: float, partition: str, hour: int, batch: _Batch, *,
                 sync_directory: bool, flush_bytes: int, max_bytes: int) -> None:
        self.path = path
        self.opened = opened  # on the writer's monotonic clock
        self.partition = partition
        self.hour = hour  # the UTC hour (epoch hours) of the partition
        self.start, self.end = hour * 3600.0, (hour + 1) * 3600.0  # its wall times
        self.flush_bytes = flush_bytes
        self.max_bytes = max_bytes
        self.closed = False  # its file closed (sealed, or its seal failed past the write)
        self.sealed: Path | None = None  # its name once sealed
        if len(batch):  # bytes another segment left would land in this one's file
            raise RuntimeError("a new journal segment's batch must be empty")
        made = _make_directories(path.parent)
        # read and write: a torn end is told by its last byte (see JournalWriter._replace)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                          0o644)
        try:
            try:
                _lock(self.fd)  # new (O_EXCL): ours; its lock tells other writers it lives
            except OSError as exc:  # a file system without flock: the pid tells instead
                log.debug("journal: no flock on %s: %s", path, exc)
            if sync_directory:
                # the new file's entry, and each new directory's in its parent, up to the
                # first directory that was there
                for directory in [path.parent, *(new.parent for new in reversed(made))]:
                    _sync_directory(directory)
        except BaseException:
            os.close(self.fd)
            path.unlink(missing_ok=True)
            raise
        _OPEN_PATHS.add(path)
        self.batch = batch  # empty (above): the last segment's was written when it was sealed
        batch.written = batch.written_records = 0
        batch.start, batch.end = self.start, self.end
        self._set_limit()

    def _set_limit(self) -> None:
        # a raw-bytes line (at most PLAIN_ROOM) below it neither passes max_bytes nor
        # leaves a full batch unwritten
        self.batch.limit = min(self.flush_bytes, self.max_bytes - self.batch.written - PLAIN_ROOM)

    @property
    def written(self) -> int:
        """Bytes handed to the OS."""
        return int(self.batch.written)

    @property
    def written_records(self) -> int:
        """Records handed to the OS."""
        return int(self.batch.written_records)

    @property
    def size(self) -> int:
        """Bytes of the segment, written or waiting."""
        return int(self.batch.written) + len(self.batch)

    @property
    def records(self) -> int:
        """Records in the segment, written or waiting (a line is a record)."""
        return int(self.batch.written_records + self.batch.records)

    def flush(self) -> bool:
        """Hand what waits to the OS in one ``write`` (whole records only); False: nothing."""
        if not len(self.batch):
            return False
        try:
            self.batch.write(self.fd)
        finally:
            self._set_limit()
        return True

    def close_window(self) -> None:
        """No raw-bytes line joins the batch any more (the segment is done with)."""
        batch = self.batch
        batch.start = batch.end = 0.0
        batch.limit = 0

    def gone(self) -> bool:
        """Whether its file was removed (or its descriptor closed under it)."""
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def torn(self, *, by_path: bool = False) -> bool:
        """Whether what was written ends inside a line (a write cut short), read by its
        descriptor (or by its path: a descriptor closed under us may be another file's
        now); True when that cannot be read."""
        if self.written == 0:
            return False
        try:
            if not by_path:
                return os.pread(self.fd, 1, self.written - 1) != b"\n"
            with self.path.open("rb") as file:
                file.seek(self.written - 1)
                return file.read(1) != b"\n"
        except OSError:
            return True

    def let_go(self, *, close: bool = True) -> None:
        """Close its file as it is, unsealed (``close=False``: the descriptor is no longer
        ours to close, EBADF)."""
        self.close_window()
        self.closed = True
        if close:
            try:
                os.close(self.fd)
            except OSError as exc:
                log.debug("journal: closing %s: %s", self.path, exc)
        _OPEN_PATHS.discard(self.path)

    def seal(self, *, sync: bool) -> Path:
        """Write what waits, close the file and rename it sealed.  A failed write (a full
        disk) changes nothing: the segment stays open, its lines waiting for its file.
        Past the write it is done with (:attr:`closed`), whatever fails: a failed sync
        still closes and renames the file, then is raised."""
        self.flush()
        self.close_window()
        self.closed = True
        try:
            if sync:
                _sync(self.fd)
        finally:
            os.close(self.fd)
            _OPEN_PATHS.discard(self.path)
            sealed = self.path.with_name(self.path.name.removesuffix(OPEN_SUFFIX)
                                         + SEALED_SUFFIX)
            os.rename(self.path, sealed)
            self.sealed = sealed
        if sync:
            _sync_directory(sealed.parent)
        return sealed


class _Syncer:
    """The interval fdatasync, in a thread of its own: the loop round that starts it goes
    on delivering while the disk works (a sync of a second's journal took 15-35 ms here,
    which on the delivery path stalled every sender).  One at a time; the writer waits for
    it before closing the segment's file, and raises there any error it met."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: Exception | None = None

    def idle(self) -> bool:
        """No sync under way (one that ended has its error raised here)."""
        if self._thread is not None and self._thread.is_alive():
            return False
        self.wait()
        return True

    def start(self, fd: int) -> None:
        """Sync ``fd`` in a thread; inline when no thread can be started (a process at its
        limit), an error then raised here."""
        thread = threading.Thread(target=self._sync, args=(fd,), daemon=True,
                                  name="journal-fdatasync")
        try:
            thread.start()
        except RuntimeError:
            log.warning("journal: no thread for the interval fdatasync; syncing inline")
            _sync(fd)
            return
        self._thread = thread  # only one that started: wait() joins it

    def _sync(self, fd: int) -> None:
        try:
            _sync(fd)
        except Exception as exc:  # noqa: BLE001 - any: raised by the writer, not the thread
            self._error = exc

    def wait(self, *, raise_error: bool = True) -> Exception | None:
        """Until the sync under way (if any) is done; then its error, if it met one, is
        raised (or returned)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None and raise_error:
            raise error
        return error


class JournalWriter:
    """Appends records for one node to a journal directory.

    Not thread-safe; one writer per node and directory.  Call :meth:`tick`
    now and then (the estate does every loop round) so idle segments are
    sealed by age, interval fsyncs happen and failed writes are retried; call
    :meth:`close` at the end.

    ``clock`` is the wall clock that names segments; ``monotonic`` the clock
    every interval is measured on (segment age, fsync interval, retries,
    warnings), :func:`time.monotonic` unless a test injects its own.  A wall
    clock that steps (NTP, a resumed VM) moves no interval.
    """

    def __init__(self, directory: Path, node: str, *,
                 fsync: FsyncPolicy = DEFAULT_FSYNC,
                 fsync_interval: float = DEFAULT_FSYNC_INTERVAL,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 max_age: float = DEFAULT_MAX_AGE,
                 flush_bytes: int = DEFAULT_FLUSH_BYTES,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] | None = None) -> None:
        problem = _node_problem(node)
        if problem is not None:
            raise ValueError(f"invalid node name {quoted_name(node)}: {problem}")
        self.directory = Path(directory)
        self.node = node
        self.fsync = fsync
        self.fsync_interval = fsync_interval
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.flush_bytes = flush_bytes
        self.clock = clock
        self.monotonic: Callable[[], float] = time.monotonic if monotonic is None else monotonic
        self._done_records = 0  # records of the segments done with (sealed or let go)
        self.records_lost = 0
        """Records that are not in the journal: refused while it could not be written (past
        ``max_bytes`` waiting, or of another hour while the last segment could not be
        sealed), written into a segment file that was removed, or still waiting when
        :meth:`close` could not write them."""
        self.write_errors = 0
        """Journal I/O operations that failed (writes, syncs, seals, new segments)."""
        self.last_error: OSError | None = None
        """The last of them."""
        self._failing = False  # the last write failed: appends wait, the next tick retries
        self._warned = -math.inf  # monotonic time of the last WARNING about failures
        self._told = False  # a failure was logged and its end not yet
        self.segments_sealed: list[Path] = []
        self._segment: _Segment | None = None
        self._serial = 0
        self._synced = self._checked = self.monotonic()
        self._dirty = False
        self._syncer = _Syncer()
        self._plain = PlainLines()
        self._raw_prefixes = self._plain.prefixes
        self._time, self._time_text = -1.0, b""  # the pure path's last time and its digits
        self._batch: _Batch
        if _CBATCH is not None and _delivery_module._APPEND_PLAIN is not None:
            # record_delivery is the C batch itself (no Python frame for a raw-bytes
            # delivery); what it does not write goes to the method below.  Not when a
            # subclass overrides the method: its override is called, as on the pure path
            self._batch = _CBATCH(self._plain.prefixes,
                                  types.MethodType(JournalWriter.record_delivery, self),
                                  self._full)
            if type(self).record_delivery is JournalWriter.record_delivery:
                self.record_delivery = self._batch  # type: ignore[method-assign]
        else:
            self._batch = _PyBatch()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recovered = self._seal_leftovers()
        self._serial = self._last_serial()

    # -- appending ----------------------------------------------------------

    def append(self, record: JournalRecord) -> None:
        """Append one record (its ``received`` time picks the hour partition)."""
        self._append_line(encode_record(record), record.received)

    def record_delivery(self, node: str, delivery: Delivery, now_wall: float, *,
                        resends: int = 0) -> None:
        """Journal a delivered message (e.g. a road ``MessageReceived``).

        The record is :func:`~raetlike.journal.record_from_delivery`'s, written
        straight from the delivery (the journal's hot path makes no record object).
        With the compiled path this is, on each writer, its ``_cjournal.Batch``, which
        writes a raw-bytes delivery's line itself and calls this method for the rest.
        An estate passes one ``now_wall`` for all the deliveries of a loop round: the
        compiled path then formats that time once.
        """
        segment = self._segment
        if segment is not None and segment.start <= now_wall < segment.end:
            # the common case: the open segment's batch takes a plain delivery's line
            batch = self._batch
            if type(batch) is _PyBatch:
                data, limit = batch.data, batch.limit
                if len(data) < limit and (
                        type(body := delivery.body) is bytes and type(now_wall) is float
                        and 1e-4 <= now_wall < 1e16  # where repr writes orjson's digits
                        and (prefix := self._raw_prefixes.get(node, _NO_PREFIXES).get(
                            delivery.remote))):
                    # the pure path's raw-bytes line, inline (no frame more): the C batch's
                    # numbers, formatted here when they are ints in [0, 2**63)
                    number, segments, session = (
                        delivery.transaction_id, delivery.segments, delivery.session_id)
                    if (type(number) is int and type(segments) is int
                            and type(session) is int and type(resends) is int
                            and not (number | segments | session | resends) >> 63):
                        if now_wall != self._time:  # one time a round: formatted once
                            self._time, self._time_text = now_wall, repr(now_wall).encode()
                        data += _RAW_LINE % (prefix, number, len(body), segments, resends,
                                             self._time_text, session)
                        batch.records += 1
                        if len(data) >= limit:
                            self._write(segment)
                        return
                if len(data) < limit and self._plain.append(data, node, delivery, now_wall,
                                                            resends):
                    batch.records += 1
                    if len(data) >= limit:
                        self._write(segment)
                    return
            elif len(batch) < batch.limit:
                # the compiled batch did not write it: a new pair, or not raw bytes
                line = bytearray()
                if self._plain.append(line, node, delivery, now_wall, resends):
                    batch.append(line)
                    if len(batch) >= batch.limit:
                        self._write(segment)
                    return
        self._append_line(delivery_line(node, delivery, now_wall, resends=resends), now_wall)

    def _full(self) -> None:
        """The compiled batch's call once ``flush_bytes`` wait: write them."""
        if self._segment is not None:
            self._write(self._segment)

    def record_durable(self, node: str, delivery: Delivery, now_wall: float, *, store: int,
                       durable_seq: int, resends: int = 0) -> None:
        """Journal a delivery of a durable message: :meth:`record_delivery`'s line plus
        ``durable_from`` (the remote that sent it: the road's authenticated name, which a
        routed body's source estate need not be), ``durable_store`` and ``durable_seq``
        (its store, and the message's number among those it sent this node), which make
        the line the receiver's dedup mark too (docs/reliability.md).

        Unlike the other appends this one raises an ``OSError`` when the journal cannot
        take the line (it is then not counted in :attr:`records_lost`: the caller keeps
        the mark elsewhere); a line it takes waits until :meth:`flush` or
        :meth:`position`, which raise while it cannot be written."""
        line = delivery_line(node, delivery, now_wall, resends=resends)
        sender = encode_fields({"durable_from": delivery.remote})[1:-2]
        self._append_line(b"%s,%s,\"durable_store\":%d,\"durable_seq\":%d}\n"
                          % (line[:-2], sender, store, durable_seq), now_wall, strict=True)

    def position(self) -> list[int | str]:
        """Where the journal stands, everything appended written to the OS first:
        ``[pid, stamp, serial, offset]``.  Lines after it are those at ``offset`` or later
        in this writer's segment (``stamp`` and ``serial`` as in its name) and in the
        segments it opens later (see :func:`raetlike.journal.durable_marks_after`); the
        stamp tells this writer's segments from an older one's that had the same pid.
        Raises the ``OSError`` that keeps what waits from being written."""
        segment = self._segment
        if segment is None:
            return [os.getpid(), _stamp(self.clock()), self._serial + 1, 0]
        self._flush_strict(segment)
        match = _SEGMENT_NAME.match(segment.path.name)
        assert match is not None  # noqa: S101 - the writer named it so
        return [os.getpid(), match["stamp"], self._serial, segment.written]

    def _append_line(self, data: bytes, received: float, *, strict: bool = False) -> None:
        segment = self._segment_for(received, len(data))
        if segment is None:  # the journal cannot take it now
            if strict:  # a new error each time (one raised again would grow its traceback)
                error = self.last_error
                if error is None:
                    raise OSError(errno.EIO, "the journal cannot be written")
                raise OSError(error.errno, error.strerror, error.filename)
            self._lose(1)
            return
        segment.batch.append(data)
        if self._failing:
            return  # it waits (within max_bytes) for the tick that retries
        if self.fsync is FsyncPolicy.ALWAYS:
            if self._flush(segment):
                self._sync_now(segment)
        elif len(segment.batch) >= self.flush_bytes:
            self._write(segment)

    def _write(self, segment: _Segment) -> None:
        """Write a full batch, and fsync when the interval says so (never raises OSError:
        a failure is counted, and the batch waits for the next tick)."""
        if not self._failing and self._flush(segment):
            self._maybe_sync(self.monotonic())

    def _flush(self, segment: _Segment) -> bool:
        """Write what waits; False when nothing was or the write failed (counted)."""
        try:
            if not segment.flush():
                return False
        except OSError as exc:
            self._failed("a write failed", exc)
            return False
        self._dirty = True  # written, not yet synced
        if self._told:
            self._recovered()
        return True

    def _flush_strict(self, segment: _Segment) -> None:
        """:meth:`_flush` for the callers that must know: the write's error is raised."""
        try:
            if segment.flush():
                self._dirty = True
        except OSError as exc:
            self._failed("a write failed", exc)
            raise
        self._failing = False
        if self._told:
            self._recovered()

    def _sync_now(self, segment: _Segment) -> None:
        try:
            _sync(segment.fd)
        except OSError as exc:
            self._failed("fdatasync failed", exc)

    def tick(self, now_wall: float | None = None) -> None:  # noqa: ARG002 - see below
        """Write what was appended; seal a segment older than ``max_age``; fsync when due;
        retry what failed.  Never raises an ``OSError``.  (``now_wall``, the round's wall
        time an estate passes, is not used: every interval is on the monotonic clock.)"""
        now = self.monotonic()
        retry, self._failing = self._failing, False
        segment = self._segment
        if segment is None:
            return
        if retry or now - self._checked >= GONE_CHECK_EVERY:
            self._checked = now
            if segment.gone():
                self._replace(segment)
                segment = self._segment
                if segment is None:
                    return
        if now - segment.opened >= self.max_age:
            self._try_seal()
            return
        written = self._flush(segment)
        if self._failing:
            return
        if self.fsync is FsyncPolicy.ALWAYS:
            if written:
                self._sync_now(segment)
        else:
            self._maybe_sync(now)

    def flush(self) -> None:
        """Write what was appended (the next :meth:`tick` would); raises the ``OSError``
        that keeps it from being written (it waits on)."""
        if self._segment is not None:
            self._flush_strict(self._segment)

    def rotate(self) -> None:
        """Seal the open segment now (the next record starts a new one); raises the
        ``OSError`` that kept it from being sealed (it stays open, its lines waiting)."""
        if self._segment is not None:
            try:
                self._seal()
            except OSError as exc:
                self._failed("a seal failed", exc)
                raise

    def close(self) -> None:
        """Seal the open segment; the writer is then done.  When what waits cannot be
        written it is lost (counted in :attr:`records_lost`), the file is closed as it
        is (``.open``: the next writer seals it) and the error is raised."""
        segment = self._segment
        if segment is not None and segment.gone():
            self._replace(segment)  # (what waits goes to a new segment, sealed below)
            segment = self._segment
        if segment is None:
            self._syncer.wait(raise_error=False)
            return
        try:
            self._seal()
        except OSError as exc:
            self._failed("a seal failed", exc)
            if self._segment is segment:  # its lines could not be written: give up on them
                self._segment = None
                self._syncer.wait(raise_error=False)
                self._lose(segment.batch.records)
                self._done_records += segment.records
                segment.batch.clear()
                segment.let_go(close=exc.errno != errno.EBADF)
            raise

    def abandon(self) -> None:
        """Let go of the open segment as a killed process would: what waits unwritten is
        lost, nothing is sealed (a test's crash; the next writer seals the segment)."""
        segment, self._segment = self._segment, None
        self._syncer.wait(raise_error=False)  # (a killed process's sync ends with it)
        if segment is not None:
            segment.batch.clear()
            segment.let_go()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def records_written(self) -> int:
        """Records this writer took (written, or waiting for the next write); those of them
        that were lost after all (a removed file's, or still waiting at a failed close)
        are in :attr:`records_lost` too."""
        segment = self._segment
        return self._done_records + (0 if segment is None else segment.records)

    @property
    def open_segment(self) -> Path | None:
        """The path of the segment being written, if any."""
        return None if self._segment is None else self._segment.path

    # -- failures -----------------------------------------------------------

    def _failed(self, what: str, exc: OSError) -> None:
        """Count a failed journal operation; WARNING at most every :data:`WARNING_EVERY`."""
        self.write_errors += 1
        self.last_error = exc
        self._failing = True
        now = self.monotonic()
        if now - self._warned >= WARNING_EVERY:
            self._warned = now
            self._told = True
            log.warning("journal %s: %s: %s (journal %s); %d failure(s) and %d record(s) "
                        "lost so far; retried at each tick, records wait in memory up to "
                        "max_bytes (%d)", self.node, what, exc.strerror or exc, self.directory,
                        self.write_errors, self.records_lost, self.max_bytes)

    def _recovered(self) -> None:
        self._told = False
        log.warning("journal %s: writing again after %d failure(s); %d record(s) lost",
                    self.node, self.write_errors, self.records_lost)

    def _lose(self, records: int) -> None:
        self.records_lost += records

    def _replace(self, segment: _Segment) -> None:
        """The open segment's file is gone (its directory removed: what was written to it
        is lost) or its descriptor was closed under us (the file, as written, is sealed).
        What waits goes to a new segment, less the rest of a line cut short, which would
        begin the new file torn."""
        self._syncer.wait(raise_error=False)  # before its descriptor closes
        self._segment = None
        self._dirty = False
        batch = segment.batch
        closed = self._closed_under_us(segment)
        removed = not closed or not segment.path.exists()  # (open, it has no link)
        torn = segment.torn(by_path=closed)
        self._done_records += segment.written_records
        waiting, records = batch.getvalue(), batch.records
        batch.clear()
        segment.let_go(close=not closed)
        if removed:
            self._lose(segment.written_records)
            self._failed(f"segment {segment.path} was removed, {segment.written_records} "
                         "record(s) written to it lost",
                         OSError(errno.ENOENT, "its file was removed", str(segment.path)))
        else:
            self._failed(f"segment {segment.path} lost its descriptor; sealed as written",
                         OSError(errno.EBADF, "its descriptor was closed", str(segment.path)))
            sealed = segment.path.with_name(segment.path.name.removesuffix(OPEN_SUFFIX)
                                            + SEALED_SUFFIX)
            try:
                os.rename(segment.path, sealed)
            except OSError as exc:  # left .open: the next writer seals it
                log.debug("journal %s: sealing %s: %s", self.node, segment.path, exc)
            else:
                self.segments_sealed.append(sealed)
        self._failing = False  # a new segment is tried at once
        if torn and waiting:
            cut = waiting.find(b"\n") + 1
            waiting, records = waiting[cut:], records - 1
            self._lose(1)
            self._done_records += 1
        if not waiting:
            return
        try:
            new = self._open(segment.hour)
        except OSError as exc:
            self._failed("no new segment", exc)
            self._lose(records)
            self._done_records += records
            return
        new.batch.append(waiting)

    @staticmethod
    def _closed_under_us(segment: _Segment) -> bool:
        try:
            os.fstat(segment.fd)
        except OSError:
            return True
        return False

    # -- internals ----------------------------------------------------------

    def _segment_for(self, received: float, size: int) -> _Segment | None:
        """The segment a record of ``size`` bytes received at ``received`` goes to; None
        when the journal cannot take it now (failing, and it needs a seal or a new segment,
        or it would pass ``max_bytes`` waiting).

        Its hour and size decide here; its age at :meth:`tick`, so an append costs no
        clock reading.
        """
        hour = int(received // 3600)
        segment = self._segment
        if segment is not None and (
            segment.hour != hour
            or (segment.size + size > self.max_bytes and segment.size > 0)
        ):
            if self._failing or not self._try_seal():
                return None
            segment = None
        if segment is None:
            if self._failing:
                return None
            try:
                segment = self._open(hour)
            except OSError as exc:
                self._failed("no new segment", exc)
                return None
        return segment

    def _open(self, hour: int) -> _Segment:
        partition = _partition_of_hour(hour)
        stamp = _stamp(self.clock())
        opened = self.monotonic()
        while True:
            self._serial += 1
            name = f"{self.node}.{stamp}.{os.getpid()}.{self._serial}{OPEN_SUFFIX}"
            path = self.directory / partition / name
            if path.exists() or path.with_name(name.removesuffix(OPEN_SUFFIX) + SEALED_SUFFIX
                                               ).exists():
                continue
            try:
                self._segment = _Segment(
                    path, opened, partition, hour, self._batch,
                    sync_directory=self.fsync is FsyncPolicy.ALWAYS,
                    # fsync always: every record is written at once, none is batched
                    flush_bytes=0 if self.fsync is FsyncPolicy.ALWAYS else self.flush_bytes,
                    max_bytes=self.max_bytes)
            except FileExistsError:
                continue
            self._checked = opened
            log.debug("journal %s: new segment %s", self.node, path)
            return self._segment

    def _try_seal(self) -> bool:
        """:meth:`_seal`, its ``OSError`` counted: whether the segment is done with."""
        try:
            self._seal()
        except OSError as exc:
            self._failed("a seal failed", exc)
        return self._segment is None

    def _seal(self) -> None:
        """Seal the open segment.  When its lines cannot be written (a full disk) it stays
        the open segment, lines, file and hour, and the error is raised: the next seal
        (at the next record of another hour, tick by age, or close) tries again, so no
        line ever lands in another segment's file."""
        segment = self._segment
        assert segment is not None  # noqa: S101 - callers check
        failed = self._syncer.wait(raise_error=False)  # before the fd closes
        try:
            segment.seal(sync=self.fsync is not FsyncPolicy.NEVER)
        finally:
            if segment.closed:  # done with, whatever failed after its write
                self._segment = None
                self._dirty = False
                self._synced = self.monotonic()
                if segment.sealed is None and not segment.path.exists():
                    # its rename found no file (its directory removed): nothing of it is left
                    self._lose(segment.written_records)
                self._done_records += segment.written_records
                if segment.sealed is not None:
                    self.segments_sealed.append(segment.sealed)
                log.debug("journal %s: sealed %s (%d records)", self.node, segment.sealed,
                          segment.records)
            if failed is not None:
                # the interval sync's error, told after the seal (a seal's own error,
                # if any, is chained to it as its __context__: neither is lost)
                raise failed

    def _maybe_sync(self, now: float) -> None:
        if (self.fsync is FsyncPolicy.INTERVAL and self._dirty and self._segment is not None
                and now - self._synced >= self.fsync_interval):
            segment = self._segment
            try:
                if not self._syncer.idle():
                    return  # the last one still waits for the disk: the next tick tries again
            except OSError as exc:  # the last sync's, met in its thread
                self._failed("fdatasync failed", exc)
                return
            if len(segment.batch) and not self._flush(segment):
                return
            try:
                self._syncer.start(segment.fd)
            except OSError as exc:  # inline (no thread to be had)
                self._failed("fdatasync failed", exc)
                return
            self._dirty = False
            self._synced = now

    def _last_serial(self) -> int:
        """The highest serial number in this node's segment names: a writer numbers its
        segments on from there, so their order is their serials' across every run of the
        node, whatever the wall clock or the process id did (``durable_marks_after``)."""
        highest = 0
        for path in self.directory.glob("date=*/hour=*/*"):
            match = _ANY_SEGMENT_NAME.match(path.name)
            if match is not None and match["node"] == self.node:
                highest = max(highest, int(match["serial"]))
        return highest

    def _seal_leftovers(self) -> list[Path]:
        """Rename segments a dead writer of this node left open (bytes untouched).  A
        segment is dead when its lock can be taken (the writer holds it while it lives),
        whatever pid its name carries; or, in this process, when it is ours no more."""
        recovered = []
        for path in sorted(self.directory.glob(f"date=*/hour=*/*{OPEN_SUFFIX}")):
            match = _SEGMENT_NAME.match(path.name)
            if match is None or match["node"] != self.node or path in _OPEN_PATHS:
                continue
            pid = int(match["pid"])
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # sealed meanwhile
            try:
                try:
                    dead = _lock(fd) or pid == os.getpid()
                except OSError:  # no flock here: the pid tells
                    dead = not _process_alive(pid)
                if not dead:
                    continue
                sealed = path.with_name(path.name.removesuffix(OPEN_SUFFIX) + SEALED_SUFFIX)
                os.rename(path, sealed)
            finally:
                os.close(fd)
            recovered.append(sealed)
            log.warning("journal %s: sealed %s left open by a stopped writer", self.node, sealed)
        return recovered
