"""The durable outbox: every accepted message on disk until its fate is known.

Four kinds of record in a :class:`~raetlike.durable._log.RecordLog`:

- ``[0, id, remote, expires, body, seq]`` (msgpack): a message accepted for ``remote``;
  ``expires`` is wall-clock seconds (so a restart knows how much time to live is left);
  ``seq`` numbers the messages to that remote (1, 2, ...): it is what travels and what
  the receiver's dedup keeps, so a receiver sees its own numbers without gaps, whatever
  else the store sends;
- a raw-bytes message, in binary: ``0x00``, u64 id, u64 seq, f64 expires, u16 length of
  the remote's name, the name (UTF-8), the body (little-endian; a msgpack list never
  starts with ``0x00``).  :func:`raw_put` makes it, compiled (``_cdurable.c``) where
  built;
- ``[1, id, ...]``: the messages with these ids are done (acknowledged, or expired and
  reported): they are not sent again;
- ``[2, store, next, {remote: seq}, {remote: lease}, boot]``: the head of a segment: the
  store's random 64-bit id, the next message id, each remote's last seq and lease and
  the boot id, so all survive when every older segment is gone;
- ``[3, boot]``: the machine's boot id when the store was opened;
- ``[4, remote, lease]``: no seq at or past ``lease`` was given to ``remote`` yet.  It is
  forced to stable storage before the first put it covers, whatever the fsync policy.

A power cut can lose puts the receiver already has (under the interval or never policy);
numbering on from what survived would give new messages numbers the receiver has seen,
and its dedup would drop them.  So opening the store after a reboot (the boot id changed)
numbers on from each remote's lease instead: a jump of at most :data:`LEASE`.

Ids count up from 1 for the life of the store, across restarts.  A put is in the page
cache before :meth:`DurableOutbox.put` returns; done records wait for :meth:`flush` (a lost
one only means a message is sent once more, which the receiver's dedup drops).

The log is compacted as it rotates: old segments whose messages are all done go, and when
more than :data:`MAX_SEGMENTS` remain, the oldest one's live messages are copied forward
into the new segment and it goes too.  So the disk holds at most about ``MAX_SEGMENTS``
segments plus the live messages.
"""

from __future__ import annotations

import logging
import secrets
import struct
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from raetlike._native import compiled
from raetlike.durable._log import MAX_RECORD, RecordLog, frame
from raetlike.errors import BackpressureError, LocalProtocolError, StoreError
from raetlike.journal import FsyncPolicy

__all__ = ["COMPILED", "MAX_SEGMENTS", "RAW_HEAD", "RAW_MAGIC", "DurableOutbox", "Stored",
           "raw_put"]

_log = logging.getLogger(__name__)

_PUT, _DONE, _HEAD, _BOOT, _LEASE = 0, 1, 2, 3, 4
_AFTER = 1 << 64  # sorts after any segment number: (id, _AFTER) after every (id, segment)
LEASE = 65536
"""Seqs a lease covers: one forced sync per this many messages to a remote."""
_RAW = 0  # the first byte of a binary raw-bytes put
_RAW_PUT = struct.Struct("<BQQdH")
_packb = msgpack.Packer().pack
_UNPACKABLE = (TypeError, ValueError, OverflowError, RecursionError)
"""What packing a message may raise: a type msgpack has no form for, a string that is
not UTF-8 (a lone surrogate, which a peer's JSON body may carry: a UnicodeEncodeError),
an integer past 64 bits, a body nested too deep or holding itself."""
RAW_MAGIC = b"\x00rlkdur1"
"""The first eight bytes of a durable raw-bytes message as it travels (then store and seq,
u64 each, then the body).

A plain bytes message that happens to begin so is read as durable: only a sender's own
messages can be mistaken so, and only ones it built that way."""
RAW_HEAD = struct.Struct("<8sQQ")


def _raw_put_python(store: int, message_id: int, seq: int, remote: str, expires: float,  # noqa: PLR0917 - as the C one
                    body: bytes) -> tuple[bytes, bytes]:
    """A raw-bytes message's framed record and its envelope (see the module doc)."""
    name = remote.encode()
    if len(name) > 0xFFFF:
        raise ValueError("a remote name of more than 65535 bytes")
    payload = _RAW_PUT.pack(_RAW, message_id, seq, expires, len(name)) + name + body
    return frame(payload), RAW_HEAD.pack(RAW_MAGIC, store, seq) + body


RawPut = Callable[[int, int, int, str, float, bytes], tuple[bytes, bytes]]
"""``raw_put(store, id, seq, remote, expires, body) -> (framed record, envelope)``."""


raw_put: RawPut = compiled("raetlike.durable._cdurable", "raw_put") or _raw_put_python
"""Makes a raw-bytes put record and its envelope (:data:`RawPut`): the C version
(``_cdurable.c``) unless missing or ``RAETLIKE_PURE_PYTHON`` is set."""
COMPILED = raw_put is not _raw_put_python
"""Whether the compiled ``raw_put`` is in use."""


def _raise(numbers: dict[str, int], remote: str, number: int) -> None:
    numbers[remote] = max(numbers.get(remote, 0), number)


def machine_boot_id() -> str:
    """This boot's id (Linux), or "" when unknown (then every open counts as a reboot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _decode_put(payload: bytes) -> Stored:
    """The message in a put record's payload (either form)."""
    if payload[:1] == b"\x00":
        _, message_id, seq, expires, size = _RAW_PUT.unpack_from(payload)
        start = _RAW_PUT.size
        return Stored(message_id, payload[start:start + size].decode(), expires,
                      payload[start + size:], seq)
    record = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if record[0] != _PUT:
        raise ValueError(f"not a put record: kind {record[0]!r}")
    return Stored(int(record[1]), str(record[2]), float(record[3]), record[4], int(record[5]))
DONE_PER_RECORD = 1 << 20
"""Ids a done record holds at most (9 bytes each at most: a record stays far below the
log's largest, 64 MiB, however many wait)."""
MAX_SEGMENTS = 4
"""Segments kept before the oldest one's live messages are copied forward."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A message the outbox holds: accepted, its fate not yet known."""

    id: int
    remote: str
    expires: float
    """Wall-clock seconds."""
    body: Any
    seq: int = field(default=0, compare=False)
    """Its number among the store's messages to ``remote`` (what travels; follows from
    ``id``, so equality leaves it out)."""


class DurableOutbox:
    """Accepted messages on disk until done; see the module doc.

    ``max_messages`` and ``max_bytes`` bound what it holds: past either, :meth:`put`
    raises :class:`~raetlike.errors.BackpressureError` and stores nothing.
    """

    def __init__(self, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.INTERVAL,
                 interval: float = 0.01, max_messages: int = 100_000,
                 max_bytes: int = 256 * 1024 * 1024,
                 segment_bytes: int = 16 * 1024 * 1024,
                 boot_id: Callable[[], str] | None = None) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.log = RecordLog(directory, fsync=fsync, interval=interval,
                             segment_bytes=segment_bytes)
        self._live: dict[int, bytes] = {}  # id -> framed put, of every message held
        # Which segment holds a put is worked out when a rotation needs it, not kept per
        # put: the puts of this run are in the segment open when they came (the ids from
        # each segment's first one on), the others (found at open, copied forward) listed.
        self._firsts: list[tuple[int, int]] = []  # (first id put into it, segment), ascending
        self._placed: dict[int, int] = {}  # id -> segment, for puts not of this run's order
        self._bytes = 0
        self._done: list[int] = []  # ids done, not written yet
        self._seqs: dict[str, int] = {}  # remote name -> the last seq given a message to it
        self._leases: dict[str, int] = {}  # remote name -> the first seq not yet leased
        self._headless = False  # the open segment still wants its head record
        self._lost = False  # the log's files were removed: rebuild before anything else
        self.lost = 0
        """Times the store's files were found removed under it (each time every message
        held is written again, in a fresh segment)."""
        self.store = 0
        self.next_id = 1
        self.rebooted = False
        """Opened after a reboot: seqs went on from the leases."""
        self._boot = (boot_id or machine_boot_id)()
        self._recover(self._boot)

    # == opening ===========================================================

    def _recover(self, boot: str) -> None:
        booted: str | None = None
        for segment, payload in self.log.records():
            try:
                booted = self._read(segment, payload) or booted
            except (ValueError, TypeError, IndexError, AttributeError, UnicodeDecodeError,
                    struct.error, msgpack.UnpackException) as exc:
                raise StoreError(f"{self.log.directory}: unreadable outbox record in "
                                 f"segment {segment}: {exc}") from None
        store, seqs = self.store, self._seqs
        self.store = store or secrets.randbits(63) + 1
        if store and booted != boot:  # a power cut may have lost puts: on from the leases
            self.rebooted = True
            for remote, lease in self._leases.items():
                seqs[remote] = max(seqs.get(remote, 0), lease - 1)
        self._live = dict(sorted(self._live.items()))
        self._placed = {message_id: self._placed[message_id] for message_id in self._live}
        self._bytes = sum(len(framed) for framed in self._live.values())
        self._firsts.append((self.next_id, self.log.index))
        if not store or self.log.size == 0 or self.rebooted:
            self._write_head()  # after a reboot: the seqs past the leases, kept before
        if booted != boot:  # the boot record that ends "rebooted" for the next open
            self.log.append(msgpack.packb([_BOOT, boot]))
            self.log.force()

    def _read(self, segment: int, payload: bytes) -> str | None:
        """Apply one record found at open; a boot record's boot id, else None."""
        record = None if payload[:1] == b"\x00" else msgpack.unpackb(
            payload, raw=False, strict_map_key=False)
        if record is None or record[0] == _PUT:
            put = _decode_put(payload)
            self._live[put.id] = frame(payload)
            self._placed[put.id] = segment
            self.next_id = max(self.next_id, put.id + 1)
            _raise(self._seqs, put.remote, put.seq)
        elif record[0] == _DONE:
            for message_id in record[1:]:
                self._live.pop(message_id, None)
                self._placed.pop(message_id, None)
        elif record[0] == _HEAD:
            self.store, self.next_id = int(record[1]), max(self.next_id, int(record[2]))
            for remote, seq in record[3].items():
                _raise(self._seqs, str(remote), int(seq))
            for remote, lease in (record[4] if len(record) > 4 else {}).items():
                _raise(self._leases, str(remote), int(lease))
            if len(record) > 5:
                return str(record[5])
        elif record[0] == _BOOT:
            return str(record[1])
        elif record[0] == _LEASE:
            _raise(self._leases, str(record[1]), int(record[2]))
        else:
            raise ValueError(f"unknown record kind {record[0]!r}")
        return None

    def _write_head(self) -> None:
        self.log.append(msgpack.packb([_HEAD, self.store, self.next_id, self._seqs,
                                       self._leases, self._boot]))

    def pending(self) -> list[Stored]:
        """Every message held, oldest first (what a restart sends again)."""
        return [_decode_put(framed[8:]) for framed in self._live.values()]

    # == use ===============================================================

    def __len__(self) -> int:
        return len(self._live)

    @property
    def held_bytes(self) -> int:
        """Bytes of the messages held (as stored)."""
        return self._bytes

    def put(self, remote: str, body: Mapping[str, Any] | bytes, expires: float) -> int:
        """Store a message for ``remote``; its id, once the page cache has it (its seq is
        then :meth:`last_seq`).  LocalProtocolError (nothing stored) for a body the store
        cannot pack: see :data:`_UNPACKABLE`."""
        self._check_room()
        message_id, seq = self.next_id, self._seqs.get(remote, 0) + 1
        try:
            payload = _packb([_PUT, message_id, remote, expires, body, seq])
        except _UNPACKABLE as exc:  # (the packer starts afresh: nothing of it kept)
            raise LocalProtocolError("the durable store cannot keep this message "
                                     f"({type(exc).__name__}: {exc})") from None
        self._keep(message_id, remote, seq, frame(payload))
        return message_id

    def last_seq(self, remote: str) -> int:
        """The seq of the last message stored for ``remote`` (0: none yet)."""
        return self._seqs.get(remote, 0)

    def put_raw(self, remote: str, body: bytes, expires: float) -> tuple[int, bytes]:
        """Store a raw-bytes message for ``remote``: ``(its id, its envelope)``, once the
        page cache has it (the same bounds as :meth:`put`).

        This is the durable hot path: one compiled call makes the record, and while it is
        within the bounds, the lease and the open segment it is appended in line;
        anything else (a bound, a lease, a rotation) takes :meth:`_keep`'s way.
        """
        message_id, seq = self.next_id, self._seqs.get(remote, 0) + 1
        framed, envelope = raw_put(self.store, message_id, seq, remote, expires, body)
        size = len(framed)
        live = self._live
        if (len(live) < self.max_messages and self._bytes + size <= self.max_bytes
                and seq < self._leases.get(remote, 0) and not self._headless
                and self.log.write_within(framed)):
            self.next_id = message_id + 1
            self._seqs[remote] = seq
            live[message_id] = framed
            self._bytes += size
        else:
            self._check_room()
            self._keep(message_id, remote, seq, framed)
        return message_id, envelope

    def _check_room(self) -> None:
        if len(self._live) >= self.max_messages:
            raise BackpressureError(f"durable outbox is full ({self.max_messages} messages)")

    def _keep(self, message_id: int, remote: str, seq: int, framed: bytes) -> None:
        """Append a framed put and count it held (BackpressureError past max_bytes)."""
        size = len(framed)
        if size > MAX_RECORD:
            raise LocalProtocolError(f"a message of {size} bytes is past the durable store's "
                                     f"largest record ({MAX_RECORD} bytes)")
        if self._bytes + size > self.max_bytes:
            raise BackpressureError(f"durable outbox is full ({self.max_bytes} bytes)")
        log = self.log
        if self._lost or log.vanished:
            self._rebuild()
        if log.size + size > self.segment_bytes and log.size:
            self._rotate()
        if self._headless:  # a rotation the disk refused: the segment's head goes first
            self._write_head()
            self._headless = False
        if seq >= self._leases.get(remote, 0):  # on stable storage before the put it covers
            log.append(msgpack.packb([_LEASE, remote, seq + LEASE]))
            log.force()
            self._leases[remote] = seq + LEASE
        log.write(framed)
        self.next_id = message_id + 1
        self._seqs[remote] = seq
        self._live[message_id] = framed
        self._bytes += size

    def done(self, message_id: int) -> bool:
        """The message's fate is known: never send it again.  False for an unknown id."""
        framed = self._live.pop(message_id, None)
        if framed is None:
            return False
        self._bytes -= len(framed)
        if self._placed:
            self._placed.pop(message_id, None)
        self._done.append(message_id)
        return True

    def _segment(self, message_id: int) -> int:
        """The segment that holds the put of ``message_id`` (a message held)."""
        placed = self._placed.get(message_id)
        if placed is not None:
            return placed
        firsts = self._firsts
        return firsts[bisect_right(firsts, (message_id, _AFTER)) - 1][1]

    def flush(self) -> None:
        """Write the done records that wait (one write, a record per
        :data:`DONE_PER_RECORD` ids); when the log's files were found
        removed (:meth:`check`), write every message held in a fresh segment instead."""
        if self._lost:
            self._rebuild()
        elif self._done:
            done = self._done
            self.log.write(b"".join(frame(msgpack.packb([_DONE, *done[i:i + DONE_PER_RECORD]]))
                                    for i in range(0, len(done), DONE_PER_RECORD)))
            self._done = []

    def check(self) -> None:
        """Whether the open segment's file is still there (one fstat).  When it was
        removed (its directory removed: appends went on into a file with no name), every
        message held is written again in a fresh segment, and until that is done every
        put and flush tries it first (StoreWriteError till the directory is back)."""
        if self._lost or self.log.gone():
            self._rebuild()

    def _rebuild(self) -> None:
        """A fresh segment with the head (store id, next id, seqs, leases, boot id) and the
        put of every message held, forced to stable storage; the old segments dropped."""
        if not self._lost:
            self._lost = True
            self._headless = True  # (keeps put_raw off its fast path till it is done)
            self.lost += 1
            _log.error("%s: the durable outbox's open segment was removed (its directory "
                       "removed?): every message held is written again in a fresh "
                       "segment, puts refused till then", self.log.directory)
        log = self.log
        log.rotate()
        self._write_head()
        new = log.index
        if self._live:
            log.write(b"".join(self._live.values()))
        log.force()
        log.drop_before(new)
        self._done = []  # (what is not held is in no record now)
        self._placed = {}
        self._firsts = [(0, new)]  # every message held is in it, and every put to come
        self._lost = self._headless = False

    def _rotate(self) -> None:
        self.flush()
        self._headless = True
        self.log.rotate()
        self._write_head()
        self._headless = False
        new = self.log.index
        self._firsts.append((self.next_id, new))
        held = Counter(self._segment(message_id) for message_id in self._live)
        while True:
            oldest = self.log.segments[0]
            if oldest == new:
                break
            if held[oldest] and len(self.log.segments) <= MAX_SEGMENTS:
                break
            held[new] += self._copy_forward(oldest, new)
            self.log.drop_before(self.log.segments[1])
            del held[oldest]
        live = self.log.segments[0]
        self._firsts = [first for first in self._firsts if first[1] >= live] or self._firsts[-1:]

    def _copy_forward(self, old: int, new: int) -> int:
        """Write the puts ``old`` holds for messages still held into ``new``; how many."""
        moved = [message_id for message_id in self._live if self._segment(message_id) == old]
        if moved:
            self.log.write(b"".join(self._live[message_id] for message_id in moved))
            for message_id in moved:
                self._placed[message_id] = new
        return len(moved)

    # == sync ==============================================================

    def sync_due(self) -> float | None:
        """When the fsync interval next wants a sync, or None."""
        return self.log.sync_due()

    def sync(self, now: float) -> None:
        """Write waiting done records and force the log to stable storage (its files
        checked first: see :meth:`check`)."""
        self.check()
        self.flush()
        self.log.sync(now)

    def close(self) -> None:
        """Write what waits and close the log (closed also when the write fails)."""
        try:
            self.flush()
        finally:
            self.log.close()

