"""An append-only log of checksummed records in numbered segment files.

A record on disk is ``length`` (u32, little-endian), ``check`` (u32: CRC-32 of the
length's four bytes and the payload) and ``length`` payload bytes.  A crash in the middle
of an append leaves a torn record at the end of the newest segment: opening the log finds
it (a length past the end, or a check that fails), counts it, and cuts the segment back
to the last whole record, so the next append follows whole records.  Nothing before the
torn record is touched.  A bad record anywhere else is not a torn write: opening raises
:class:`~raetlike.errors.StoreError` naming the file and offset, and changes nothing.

Zeros never pass the check (the CRC of four zero bytes is not zero): zeros after the last
record are the free space of a segment still open, or what a file system left after a
power cut, never a record.  A torn record is recognised as such only when no whole record
follows it.

Appends go to the page cache at once (a copy into the mapped segment), so a killed
process loses nothing it appended.  Whether they also reach stable storage before a power
cut is the fsync policy (:class:`raetlike.journal.FsyncPolicy`): every record (msync),
at most every ``interval`` seconds (:meth:`RecordLog.sync_due` / :meth:`RecordLog.sync`),
or never.

A removed directory is not an error a write meets: appends to the open segment (mapped)
go on into a file that no longer has a name.  :meth:`RecordLog.gone` tells (one fstat), and
the owner writes what it holds into a fresh segment.

An I/O error while writing (a full disk, EIO, EROFS, the directory removed, ...) is raised
as :class:`~raetlike.errors.StoreWriteError` (:class:`~raetlike.errors.StoreFullError`
when the disk has no room), the log left as it was before the call, or where the next
call picks up (a segment that could not be made is made again by the next append); a
record whose forced sync failed is taken back.  Opening the log raises what it meets.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raetlike.errors import LocalProtocolError, StoreError, StoreFullError, StoreWriteError
from raetlike.journal import FsyncPolicy

__all__ = ["HEAD", "MAX_RECORD", "NO_ROOM", "RecordLog", "frame", "write_error"]

log = logging.getLogger(__name__)

HEAD = struct.Struct("<II")
"""A record's head: payload length, CRC-32 of the length bytes and the payload."""
_LENGTH = struct.Struct("<I")
MAX_RECORD = 64 * 1024 * 1024
"""The largest payload a record may have (a longer length is corruption, not data)."""
_MAX_FRAMED = HEAD.size + MAX_RECORD
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""The errors that mean the disk (or quota, or file size limit) has no room."""
_NAME = re.compile(r"^(?P<index>\d{12})\.log$")


def write_error(what: str, exc: OSError) -> StoreWriteError:
    """``exc``, met while writing ``what``, as the store's error: StoreFullError when the
    disk has no room (:data:`NO_ROOM`), else StoreWriteError."""
    kind = StoreFullError if exc.errno in NO_ROOM else StoreWriteError
    return kind(f"{what}: {exc.strerror or exc}")


def frame(payload: bytes, _crc32: Any = zlib.crc32, _pack: Any = HEAD.pack) -> bytes:
    """``payload`` as a record: head and payload (LocalProtocolError past
    :data:`MAX_RECORD`: opening the log would take it for damage)."""
    length = len(payload)
    if length > MAX_RECORD:
        raise _too_large(length)
    framed: bytes = _pack(length, _crc32(payload, _length_check(length))) + payload
    return framed


def _too_large(length: int) -> LocalProtocolError:
    return LocalProtocolError(f"a record of {length} bytes is past the durable store's "
                              f"largest ({MAX_RECORD} bytes)")


def _check_framed(framed: bytes | bytearray) -> None:
    """LocalProtocolError when ``framed`` (records made by :func:`frame`) holds a record
    past :data:`MAX_RECORD`, or does not end where its last record does."""
    offset, end = 0, len(framed)
    while offset < end:
        if end - offset < HEAD.size:
            raise LocalProtocolError(f"{end - offset} bytes after the last record")
        (length,) = _LENGTH.unpack_from(framed, offset)
        if length > MAX_RECORD:
            raise _too_large(length)
        offset += HEAD.size + length
    if offset != end:
        raise LocalProtocolError(f"the last record ends {offset - end} bytes past the data")


@functools.lru_cache(maxsize=4096)
def _length_check(length: int) -> int:
    """The CRC-32 of a length's four bytes (the start of every record's check)."""
    return zlib.crc32(_LENGTH.pack(length))


def _segment_name(index: int) -> str:
    return f"{index:012d}.log"


def _scan(data: bytes) -> Iterator[tuple[int, bytes | None]]:
    """``(offset, payload)`` for each whole record of ``data``; last ``(offset, None)``
    when a torn or bad record starts at ``offset``."""
    offset, end, head = 0, len(data), HEAD.size
    while offset < end:
        if end - offset < head:
            yield offset, None
            return
        length, check = HEAD.unpack_from(data, offset)
        start = offset + head
        if length > MAX_RECORD or start + length > end:
            yield offset, None
            return
        payload = data[start:start + length]
        if zlib.crc32(payload, zlib.crc32(data[offset:offset + 4])) != check:
            yield offset, None
            return
        yield offset, payload
        offset = start + length


def _torn_tail(data: bytes, offset: int) -> bool:
    """Whether what follows the last whole record, from ``offset``, can be a torn append:
    no whole record starts anywhere after it (whole data after a bad record is damage,
    not a crash mid-append)."""
    end = len(data.rstrip(b"\0"))
    for start in range(offset + 1, end):
        if end - start < HEAD.size:
            break
        length, check = HEAD.unpack_from(data, start)
        stop = start + HEAD.size + length
        if length <= MAX_RECORD and stop <= len(data) and zlib.crc32(
                data[start + HEAD.size:stop], zlib.crc32(data[start:start + 4])) == check:
            return False
    return True


class RecordLog:
    """Numbered segments ``000000000001.log``, ... in one directory; see the module doc.

    Open it, read what it holds with :meth:`records` (once, before appending), then
    :meth:`append`.  :meth:`rotate` starts a new segment; :meth:`drop_before` deletes old
    ones.  One process per directory: the caller holds a lock (see
    :mod:`raetlike.durable`).

    The open segment is a file of ``segment_bytes`` (zeros past the records) mapped into
    memory: an append is a copy into the page cache, which a killed process leaves to the
    kernel as surely as a ``write``, without a system call.  A segment is cut to its
    records when it is closed; zeros after the last record are free space, not damage.
    """

    def __init__(self, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.INTERVAL,
                 interval: float = 0.01, segment_bytes: int = 16 * 1024 * 1024) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.interval = interval
        self.segment_bytes = segment_bytes
        self.torn = 0
        """Torn records found (and cut away) when the log was opened."""
        self.segments: list[int] = sorted(
            int(m["index"]) for p in self.directory.iterdir()
            if (m := _NAME.match(p.name)) is not None)
        self.size = 0
        """Bytes of whole records in the open segment (where the next append goes)."""
        self._loaded: list[tuple[int, list[bytes]]] = [self._load(i) for i in self.segments]
        new = not self.segments
        if new:
            self.segments.append(1)
        self.index = self.segments[-1]
        self._fd = -1
        self._map: mmap.mmap | None = None
        self.vanished = False
        """The open segment, closed (to grow it, after an error), was not there to open
        again: :meth:`gone` is True."""
        self._room = 0  # where write_within stops: 0 while there is no such fast path
        self._open(self.index, self.size)
        if new:  # a new file (and maybe directory) is safe from a power cut once synced in
            self._sync_directory()
            self._sync_directory(self.directory.parent)
        self.dirty = False
        """Appended since the last sync."""
        self.synced_at = 0.0
        self.closed = False

    def _path(self, index: int) -> Path:
        return self.directory / _segment_name(index)

    def _open(self, index: int, used: int, room: int = 0) -> None:
        """Map segment ``index`` (``used`` bytes of records) with room for ``room`` more."""
        path = self._path(index)
        length = max(self.segment_bytes, used + room, 1)
        try:  # a segment with records is never made anew: its file must be there
            fd = os.open(path, os.O_RDWR | (0 if used else os.O_CREAT), 0o600)
        except OSError as exc:
            if used and exc.errno == errno.ENOENT:
                self.vanished = True
            raise write_error(f"{path}: a segment of {length} bytes cannot be made",
                              exc) from None
        try:
            size = os.fstat(fd).st_size
            if size < used:
                self.vanished = True
                raise StoreWriteError(f"{path}: the segment was cut to {size} bytes of "
                                      f"its {used} (removed and made again?)")
            length = max(length, size)
            os.ftruncate(fd, length)
            # blocks reserved now: a full disk is an error here, never SIGBUS at a copy
            os.posix_fallocate(fd, 0, length)
            self._map = mmap.mmap(fd, length)
        except OSError as exc:
            with contextlib.suppress(OSError):  # (the error to tell is the first)
                os.ftruncate(fd, used)
            os.close(fd)
            if exc.errno in NO_ROOM:
                raise StoreFullError(f"{path}: no room for a segment of {length} bytes: "
                                     f"{exc.strerror or exc}") from None
            raise write_error(f"{path}: a segment of {length} bytes cannot be made",
                              exc) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.size = fd, used
        self.vanished = False
        self._room = 0 if self.fsync is FsyncPolicy.ALWAYS else min(length, self.segment_bytes)

    def _load(self, index: int) -> tuple[int, list[bytes]]:
        path = self._path(index)
        data = path.read_bytes()
        payloads: list[bytes] = []
        end = 0
        for offset, payload in _scan(data):
            if payload is None:
                if not data[offset:].strip(b"\0"):
                    break  # free space of a segment that was not closed
                if index != self.segments[-1] or not _torn_tail(data, offset):
                    raise StoreError(f"{path}: bad record at byte {offset} of {len(data)} "
                                     "(whole data follows it, or it is not the newest "
                                     "segment: not a torn append)")
                self.torn += 1
                log.warning("%s: torn record at byte %d of %d (a crash mid-append); "
                            "cut back to the last whole record", path, offset, len(data))
                os.truncate(path, offset)
                break
            payloads.append(payload)
            end = offset + HEAD.size + len(payload)
        if index == self.segments[-1]:
            self.size = end
        return index, payloads

    def records(self) -> Iterator[tuple[int, bytes]]:
        """``(segment, payload)`` of every whole record found at open, oldest first."""
        loaded, self._loaded = self._loaded, []
        for index, payloads in loaded:
            for payload in payloads:
                yield index, payload

    def append(self, payload: bytes) -> int:
        """Write one record to the OS now; returns its segment (fsync per the policy).
        LocalProtocolError, nothing written, for a payload past :data:`MAX_RECORD`."""
        self.write(frame(payload))
        return self.index

    def write(self, framed: bytes | bytearray) -> None:
        """Append records already framed with :func:`frame` (to the page cache, at once).
        LocalProtocolError, nothing written, for a record past :data:`MAX_RECORD`."""
        if len(framed) > _MAX_FRAMED:  # (only then can a record be past it)
            _check_framed(framed)
        size = self.size
        end = size + len(framed)
        mapped = self._map
        if mapped is None:  # the last segment could not be made (disk full): again
            if self.closed:
                raise StoreError(f"{self.directory}: the log is closed")
            self._open(self.index, size, len(framed))
            mapped = self._map
            assert mapped is not None  # noqa: S101 - _open maps it or raises
        if end > len(mapped):
            self._grow(len(framed))
            mapped, size = self._map, self.size
            end = size + len(framed)
            assert mapped is not None  # noqa: S101 - _grow maps a segment
        mapped[size:end] = framed
        self.size = end
        if self.fsync is FsyncPolicy.ALWAYS:
            try:
                mapped.flush()
            except OSError as exc:  # not on stable storage: taken back, as if never made
                mapped[size:end] = bytes(end - size)
                self.size = size
                raise write_error(f"{self._path(self.index)}: msync", exc) from None
        else:
            self.dirty = True

    def write_within(self, framed: bytes) -> bool:
        """:meth:`write`'s fast path: append ``framed`` if it fits in the open segment
        below ``segment_bytes`` and the policy syncs no single record; False (nothing
        written) otherwise, and then the caller rotates or calls :meth:`write`."""
        size = self.size
        end = size + len(framed)
        if end > self._room or len(framed) > _MAX_FRAMED:  # (then write() tells)
            return False
        self._map[size:end] = framed  # type: ignore[index]  # _room is 0 while unmapped
        self.size = end
        self.dirty = True
        return True

    def _grow(self, room: int) -> None:
        """Make room for ``room`` more bytes in the open segment (its owner decides when
        to rotate; a segment grows past ``segment_bytes`` only for what it is given)."""
        self._close_map(sync=False)
        self._open(self.index, self.size, room)

    def gone(self) -> bool:
        """Whether the open segment's file was removed (its directory removed under the
        log): what was appended to it is then in no file, though every write succeeded.
        One fstat; while no segment is open, whether the last one was not there to
        open again (:attr:`vanished`).  The owner starts a fresh segment
        (:meth:`rotate`, a StoreWriteError until the directory is back) and writes there
        what the lost files held."""
        fd = self._fd
        if fd < 0:
            return self.vanished
        try:
            return os.fstat(fd).st_nlink == 0
        except OSError:
            return True

    def sync_due(self) -> float | None:
        """When the interval policy wants the next sync (None: nothing waits)."""
        if not self.dirty or self.fsync is not FsyncPolicy.INTERVAL:
            return None
        return self.synced_at + self.interval

    def sync(self, now: float) -> None:
        """Force what was appended to stable storage (a no-op when nothing waits).  When
        that fails (StoreWriteError) it stays dirty, and is due again an interval on."""
        self.synced_at = now
        if self.dirty and self._map is not None:
            self._flush_map(self._map)

    def force(self) -> None:
        """Put what was appended on stable storage now, whatever the fsync policy."""
        if self._map is not None:
            self._flush_map(self._map)

    def _flush_map(self, mapped: mmap.mmap) -> None:
        try:
            mapped.flush()
        except OSError as exc:
            raise write_error(f"{self._path(self.index)}: msync", exc) from None
        self.dirty = False

    def _close_map(self, *, sync: bool) -> None:
        """Unmap and close the open segment, cut to its records (synced first if asked).
        Unmapped and closed also when a step fails (StoreWriteError): the next append
        maps the segment again where its records end."""
        mapped, self._map = self._map, None
        fd, self._fd = self._fd, -1
        self._room = 0
        try:
            if mapped is not None and sync:
                mapped.flush()
            if fd >= 0:
                os.ftruncate(fd, self.size)
                if sync:
                    os.fdatasync(fd)
        except OSError as exc:
            raise write_error(f"{self._path(self.index)}: closing the segment", exc) \
                from None
        finally:
            if mapped is not None:
                mapped.close()
            if fd >= 0:
                os.close(fd)

    def rotate(self) -> int:
        """Start a new segment (the old one synced first); returns its index.  When the
        new one cannot be made (StoreWriteError: disk full, an I/O error) the next append
        or rotation tries again, under the same index."""
        if self._map is None and self.size == 0 and not self.closed:
            self._open(self.index, 0)  # the last rotation's segment was not made: again
        else:
            self._close_map(sync=self.fsync is not FsyncPolicy.NEVER)
            self.dirty = False
            self.index += 1
            self.segments.append(self.index)
            self.size = 0
            self._open(self.index, 0)
        self._sync_directory()
        return self.index

    def drop_before(self, index: int) -> int:
        """Delete the segments older than ``index`` (never the open one); how many went."""
        gone = [i for i in self.segments if i < min(index, self.index)]
        if gone and self.dirty and self.fsync is not FsyncPolicy.NEVER and self._map:
            self._flush_map(self._map)  # what was copied forward is on disk before the old goes
        for old in gone:
            try:
                self._path(old).unlink(missing_ok=True)
            except OSError as exc:  # (those before it are gone: the next call goes on)
                raise write_error(f"{self._path(old)}: unlink", exc) from None
            self.segments.remove(old)
        if gone:
            self._sync_directory()
        return len(gone)

    def _sync_directory(self, directory: Path | None = None) -> None:
        if self.fsync is FsyncPolicy.NEVER:
            return
        where = directory or self.directory
        try:
            fd = os.open(where, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise write_error(f"{where}: fsync of the directory", exc) from None

    def abandon(self) -> None:
        """Let go as a killed process would: the page cache keeps what was appended, the
        segment keeps its free space, nothing is synced."""
        self.closed = True
        mapped, self._map = self._map, None
        self._room = 0
        if mapped is not None:
            mapped.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Sync (unless the policy is never), cut the segment to its records and close."""
        try:
            self._close_map(sync=self.dirty and self.fsync is not FsyncPolicy.NEVER)
        finally:  # (closed also when the sync failed: StoreWriteError)
            self.dirty = False
            self.closed = True
