"""Durable receive-side dedup: which durable message ids each sender has delivered.

A sender's durable outbox numbers its messages to each remote 1, 2, ... for the life of
its store (a random 64-bit ``store`` id names that life).  For each sender estate this
keeps one :class:`~raetlike.dedup.RangeWindow` over the numbers it sent us, so a message
the sender sends again after a restart is recognised however often either side
restarted.  A sender that shows a new store id started afresh: its window starts over.

Where the marks live:

- **on their own**: marks wait in memory and :meth:`DurableSeen.commit` writes them in
  one write, ``[0, sender, store, id, sender, store, id, ...]``, a record per
  :data:`MARKS_PER_RECORD` marks.  The caller commits
  before the acknowledgements of those messages leave the process.
- **in the journal**: when the application's effect is a journal line, the line itself
  carries the durable id (``durable_store``, ``durable_seq``) and no mark is written here:
  one append is both the effect and the mark, so a crash cannot fall between them.

Either way a snapshot starts every segment: a record per sender's window, ``[2, sender,
store, floor, [starts], [ends]]`` (at most ``max_ranges`` ranges: each record stays
small), then ``[1, journal_position, windows]``, which makes the snapshot whole (one cut
short by a crash or a write error is not used: the segments before it are still there,
and a whole snapshot in a later segment does not count its windows).  Opening the
store replays the newest whole snapshot, the marks after it and (with a journal) the
journal lines written after its position.
The snapshot is rewritten as the log grows (the old segments go), so opening never reads
more than a segment of marks and the journal lines of one checkpoint period.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgpack

from raetlike.dedup import RangeWindow
from raetlike.durable._log import RecordLog, frame
from raetlike.errors import LocalProtocolError, StoreError
from raetlike.journal import FsyncPolicy

__all__ = ["DurableSeen", "JournalMarks", "Position"]

log = logging.getLogger(__name__)

_MARKS, _SNAPSHOT, _WINDOW = 0, 1, 2
MARKS_PER_RECORD = 65536
"""Marks a record holds at most (a mark is at most about 220 bytes: a valid name and two
64-bit numbers), so a record stays far below the log's largest (64 MiB) however many
marks wait (they pile up while rounds are held)."""
Position = list[Any]
"""Where in a journal the marks of a snapshot end (see :mod:`raetlike.durable._journal`)."""
JournalMarks = Callable[[Position], Iterable[tuple[str, int, int]]]
"""Reads ``(sender, store, id)`` of every durable delivery journaled after a position."""


class DurableSeen:
    """Per-sender windows of delivered durable ids, kept on disk; see the module doc."""

    def __init__(self, directory: Path, *, fsync: FsyncPolicy = FsyncPolicy.INTERVAL,
                 interval: float = 0.01, window: int = 1 << 20, max_ranges: int = 4096,
                 max_senders: int = 1024,
                 segment_bytes: int = 4 * 1024 * 1024,
                 journal_marks: JournalMarks | None = None) -> None:
        self.window = window
        self.max_ranges = max_ranges
        self.max_senders = max_senders
        self.segment_bytes = segment_bytes
        self.log = RecordLog(directory, fsync=fsync, interval=interval,
                             segment_bytes=segment_bytes)
        self._windows: OrderedDict[str, tuple[int, RangeWindow]] = OrderedDict()
        self._marks: list[Any] = []  # sender, store, id, ... waiting for commit
        self.duplicates = 0
        """Messages refused as already delivered."""
        self.recovered_from_journal = 0
        """Marks found in the journal when the store was opened."""
        self.position: Position | None = None
        """Where the journal stood at the newest snapshot (None: no journal)."""
        self.lost = 0
        """Times the store's files were found removed under it (each time a new snapshot,
        in a fresh segment, holds every window again)."""
        self._lost = False  # the files are gone: no mark counts as written till a snapshot
        self._recover(journal_marks)

    # == opening ===========================================================

    def _recover(self, journal_marks: JournalMarks | None) -> None:
        position: Position | None = None
        pending: list[tuple[str, int, RangeWindow]] = []  # a snapshot's windows so far
        opened = 0  # the segment of the records so far
        for segment, payload in self.log.records():
            if segment != opened:  # a snapshot is all in one segment (it starts it): one
                opened, pending = segment, []  # cut short by a fault or crash is not used
            try:
                record = msgpack.unpackb(payload, raw=False, strict_map_key=False)
                if record[0] == _SNAPSHOT:  # the snapshot is whole: it replaces all
                    position = self._restore(pending, record)
                    pending = []
                elif record[0] == _WINDOW:
                    _, sender, store, floor, starts, ends = record
                    pending.append((str(sender), int(store), RangeWindow.restored(
                        self.window, self.max_ranges, (floor, starts, ends))))
                elif record[0] == _MARKS:
                    marks = record[1:]
                    for i in range(0, len(marks) - 2, 3):
                        self._admit(marks[i], marks[i + 1], marks[i + 2])
                else:
                    raise ValueError(f"unknown record kind {record[0]!r}")
            except (ValueError, TypeError, IndexError, KeyError, LocalProtocolError,
                    msgpack.UnpackException) as exc:
                raise StoreError(f"{self.log.directory}: unreadable dedup record in segment "
                                 f"{segment}: {exc}") from None
        self.position = position
        if position is not None and journal_marks is not None:
            try:
                for sender, store, message_id in journal_marks(position):
                    self._admit(sender, store, message_id)
                    self.recovered_from_journal += 1
            except (ValueError, TypeError, IndexError, LocalProtocolError) as exc:
                raise StoreError(f"{self.log.directory}: the journal position of its "
                                 f"snapshot, {position!r}, cannot be read: {exc}") from None
        if self.recovered_from_journal:
            log.info("%s: %d delivery mark(s) recovered from the journal",
                     self.log.directory, self.recovered_from_journal)

    def _restore(self, windows: list[tuple[str, int, RangeWindow]],
                 record: list[Any]) -> Position | None:
        """Make a snapshot's windows the ones kept; its journal position."""
        if len(windows) != record[2]:
            raise ValueError(f"a snapshot of {record[2]} windows has {len(windows)}")
        self._windows.clear()
        for sender, store, window in windows[-self.max_senders:]:
            self._windows[sender] = (store, window)
        position: Position | None = record[1]
        return position

    # == use ===============================================================

    def _admit(self, sender: str, store: int, message_id: int) -> bool:
        held = self._windows.get(sender)
        if held is None or held[0] != store:
            if held is None and len(self._windows) >= self.max_senders:
                self._windows.popitem(last=False)
            held = (store, RangeWindow(self.window, self.max_ranges))
            self._windows[sender] = held
            self._windows.move_to_end(sender)
        elif len(self._windows) > 1:  # (the order matters only among several)
            self._windows.move_to_end(sender)
        return held[1].check_and_mark(message_id)

    def admit(self, sender: str, store: int, message_id: int, *, journaled: bool) -> bool:
        """True when this durable message is new (now marked); False: delivered before.

        ``journaled``: the caller's journal line carries the mark; otherwise it waits
        for :meth:`commit`.
        """
        if not self._admit(sender, store, message_id):
            self.duplicates += 1
            return False
        if not journaled:
            self._marks += (sender, store, message_id)
        return True

    def mark(self, sender: str, store: int, message_id: int) -> None:
        """Write the mark of a delivery already admitted as journaled at the next
        :meth:`commit` after all (its journal line could not be made)."""
        self._marks += (sender, store, message_id)

    def commit(self) -> None:
        """Write the marks that wait, in one write (before their acks may leave).

        When the open segment's file was removed (its directory removed: one fstat per
        commit that has marks, see :meth:`check`), the marks are not written: a snapshot
        of every window is, in a fresh segment (StoreWriteError until the directory is
        back)."""
        if self._marks:
            if not (self._lost or self.log.vanished):
                self._write_marks()
                if not self.log.gone():  # (after the write: no removal slips between)
                    if self.log.size >= self.segment_bytes:
                        self.checkpoint(self.position)
                    return
            self._rebuild()
        elif self._lost:
            self._rebuild()

    def _write_marks(self) -> None:
        """The marks that wait, :data:`MARKS_PER_RECORD` to a record, in one write."""
        marks = self._marks
        if marks:
            step = 3 * MARKS_PER_RECORD
            self.log.write(b"".join(frame(msgpack.packb([_MARKS, *marks[i:i + step]]))
                                    for i in range(0, len(marks), step)))
            self._marks = []  # (only once written: a full disk keeps them for the next try)

    def check(self) -> None:
        """Whether the open segment's file is still there (one fstat); when it was
        removed, write every window in a fresh segment (as :meth:`commit` does)."""
        if self._lost or self.log.gone():
            self._rebuild()

    def _rebuild(self) -> None:
        """The store's files are gone: a snapshot in a fresh segment holds every window,
        so every mark (each is in its window since it was admitted)."""
        if not self._lost:
            self._lost = True
            self.lost += 1
            log.error("%s: the dedup store's open segment was removed (its directory "
                      "removed?): every window is written again in a fresh segment, "
                      "datagrams held till then", self.log.directory)
        self.checkpoint(self.position)

    def checkpoint(self, position: Position | None) -> None:
        """Start a new segment with a snapshot (``position``: where the journal stands,
        written up to there) and drop the old segments."""
        if self._lost:
            self._marks = []  # (in the windows the snapshot holds; no file to write them to)
        else:
            self._write_marks()
        self.position = position
        self.log.rotate()
        for sender, (store, window) in self._windows.items():  # a record each: bounded
            self.log.append(msgpack.packb([_WINDOW, sender, store, *window.state()]))
        self.log.append(msgpack.packb([_SNAPSHOT, position, len(self._windows)]))
        self.log.drop_before(self.log.index)
        self._lost = False

    def sync_due(self) -> float | None:
        """When the fsync interval next wants a sync, or None."""
        return self.log.sync_due()

    def sync(self, now: float) -> None:
        """Commit, and force the log to stable storage (its files checked first: see
        :meth:`check`)."""
        self.commit()
        self.check()
        self.log.sync(now)

    def close(self) -> None:
        """Commit and close (closed also when the commit fails)."""
        try:
            self.commit()
        finally:
            self.log.close()

    @property
    def senders(self) -> int:
        """Senders with a window."""
        return len(self._windows)

