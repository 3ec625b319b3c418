"""An append-only log of checksummed records in numbered segment files.

A record on disk is ``length`` (u32, little-endian), ``check`` (u32: CRC-32 of the
length's four bytes and the payload) and ``length`` payload bytes.  A crash in the middle
of an append leaves a torn record at the end of the newest segment: opening the log finds
it (a length past the end, or a check that fails), counts it, and cuts the segment back
to the last whole record, so the next append follows whole records.  Nothing before the
torn record is touched.  A bad record anywhere else is not a torn write: opening raises
:class:`~raetlike.errors.StoreError` naming the file and offset, and changes nothing.

Zeros (what a file system may leave after a power cut) never pass the check: the CRC of
four zero bytes is not zero.

Appends go to the OS at once (``os.write``), so a killed process loses nothing it
appended.  Whether they also reach stable storage before a power cut is the fsync policy
(:class:`raetlike.journal.FsyncPolicy`): every record, at most every ``interval`` seconds
(:meth:`RecordLog.sync_due` / :meth:`RecordLog.sync`), or never.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from raetlike.errors import StoreError
from raetlike.journal import FsyncPolicy

__all__ = ["HEAD", "MAX_RECORD", "RecordLog", "frame"]

log = logging.getLogger(__name__)

HEAD = struct.Struct("<II")
"""A record's head: payload length, CRC-32 of the length bytes and the payload."""
_LENGTH = struct.Struct("<I")
MAX_RECORD = 64 * 1024 * 1024
"""The largest payload a record may have (a longer length is corruption, not data)."""
_NAME = re.compile(r"^(?P<index>\d{12})\.log$")


def frame(payload: bytes) -> bytes:
    """``payload`` as a record: head and payload."""
    length = _LENGTH.pack(len(payload))
    return HEAD.pack(len(payload), zlib.crc32(payload, zlib.crc32(length))) + payload


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
    """Whether a bad record at ``offset`` can be a torn append: it runs to or past the end
    of the file, or only zeros (space the file system allocated, never written) follow."""
    if len(data) - offset < HEAD.size:
        return True
    length = _LENGTH.unpack_from(data, offset)[0]
    return offset + HEAD.size + length >= len(data) or not data[offset:].strip(b"\0")


class RecordLog:
    """Numbered segments ``000000000001.log``, ... in one directory; see the module doc.

    Open it, read what it holds with :meth:`records` (once, before appending), then
    :meth:`append`.  :meth:`rotate` starts a new segment; :meth:`drop_before` deletes old
    ones.  One process per directory: the caller holds a lock (see
    :mod:`raetlike.durable`).
    """

    def __init__(self, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.INTERVAL,
                 interval: float = 0.01) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.interval = interval
        self.torn = 0
        """Torn records found (and cut away) when the log was opened."""
        self.segments: list[int] = sorted(
            int(m["index"]) for p in self.directory.iterdir()
            if (m := _NAME.match(p.name)) is not None)
        self._loaded: list[tuple[int, list[bytes]]] = [self._load(i) for i in self.segments]
        if not self.segments:
            self.segments.append(1)
        self.index = self.segments[-1]
        self._fd = self._open(self.index)
        self.size = os.fstat(self._fd).st_size
        self.dirty = False
        """Appended since the last sync."""
        self.synced_at = 0.0

    def _path(self, index: int) -> Path:
        return self.directory / _segment_name(index)

    def _open(self, index: int) -> int:
        return os.open(self._path(index), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def _load(self, index: int) -> tuple[int, list[bytes]]:
        path = self._path(index)
        data = path.read_bytes()
        payloads: list[bytes] = []
        for offset, payload in _scan(data):
            if payload is None:
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
        return index, payloads

    def records(self) -> Iterator[tuple[int, bytes]]:
        """``(segment, payload)`` of every whole record found at open, oldest first."""
        loaded, self._loaded = self._loaded, []
        for index, payloads in loaded:
            for payload in payloads:
                yield index, payload

    def append(self, payload: bytes) -> int:
        """Write one record to the OS now; returns its segment (fsync per the policy)."""
        self.write(frame(payload))
        return self.index

    def write(self, framed: bytes | bytearray) -> None:
        """Write records already framed with :func:`frame`, in one ``write``."""
        with memoryview(framed) as view:
            done = 0
            while done < len(view):
                done += os.write(self._fd, view[done:])
        self.size += len(framed)
        if self.fsync is FsyncPolicy.ALWAYS:
            os.fdatasync(self._fd)
        else:
            self.dirty = True

    def sync_due(self) -> float | None:
        """When the interval policy wants the next sync (None: nothing waits)."""
        if not self.dirty or self.fsync is not FsyncPolicy.INTERVAL:
            return None
        return self.synced_at + self.interval

    def sync(self, now: float) -> None:
        """Force what was appended to stable storage (a no-op when nothing waits)."""
        if self.dirty:
            os.fdatasync(self._fd)
            self.dirty = False
        self.synced_at = now

    def rotate(self) -> int:
        """Start a new segment (the old one synced first); returns its index."""
        if self.fsync is not FsyncPolicy.NEVER:
            os.fdatasync(self._fd)
        self.dirty = False
        os.close(self._fd)
        self.index += 1
        self.segments.append(self.index)
        self._fd = self._open(self.index)
        self.size = 0
        self._sync_directory()
        return self.index

    def drop_before(self, index: int) -> int:
        """Delete the segments older than ``index`` (never the open one); how many went."""
        gone = [i for i in self.segments if i < min(index, self.index)]
        if gone and self.dirty and self.fsync is not FsyncPolicy.NEVER:
            os.fdatasync(self._fd)  # what was copied forward is on disk before the old goes
            self.dirty = False
        for old in gone:
            self._path(old).unlink(missing_ok=True)
        self.segments = [i for i in self.segments if i not in gone]
        if gone:
            self._sync_directory()
        return len(gone)

    def _sync_directory(self) -> None:
        if self.fsync is FsyncPolicy.NEVER:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def abandon(self) -> None:
        """Close without syncing (what a killed process leaves)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Sync (unless the policy is never) and close."""
        if self._fd < 0:
            return
        if self.dirty and self.fsync is not FsyncPolicy.NEVER:
            os.fdatasync(self._fd)
        os.close(self._fd)
        self._fd = -1
