"""A journal writer meets faults (a full disk, a failed sync, no thread to be had) and
loses nothing it did not report, never moves a record into another hour's segment, and
stays usable; a subclass's record_delivery is called on either path."""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import (
    FsyncPolicy,
    JournalWriter,
    journal_files,
    partition_of,
    read_journal,
)
from raetlike.journal import _delivery as delivery_module
from raetlike.journal import _writer as writer_module
from raetlike.journal._delivery import COMPILED
from road.events import MessageReceived
from tests.journalkit import HOUR_START, record, run_full_disk

ROOT = Path(__file__).resolve().parent.parent
PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


class Clock:
    """A settable clock (the tests give it as both the wall and the monotonic clock)."""

    def __init__(self, now: float = HOUR_START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _writer(tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch,
            cls: type[JournalWriter] = JournalWriter, **options: Any) -> JournalWriter:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    elif not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    writer = cls(tmp_path, "main", **options)
    assert (type(writer._batch).__name__ == "Batch") is compiled  # the path under test
    return writer


# Run in a child with a full disk (tests.journalkit.run_full_disk).
_FULL_DISK = """
    descriptors = len(os.listdir("/proc/self/fd"))
    writer = JournalWriter(directory, "main", fsync=FsyncPolicy.NEVER, clock=lambda: H)
    print(type(writer._batch).__name__)

    def event(n):
        return MessageReceived(remote="minion", body=b"x" * 10, session_id=1,
                               transaction_id=n, segments=1)

    for n in range(5):
        writer.record_delivery("main", event(n), H + 1.0)
    resource.setrlimit(resource.RLIMIT_FSIZE, (700, hard))  # the disk is full at 700 bytes
    writer.tick(H + 1.0)  # a short write (mid-line), then EFBIG: counted, not raised
    print("tick", errno.errorcode[writer.last_error.errno])
    # the next hour: a seal, which cannot write the old hour's lines: the record is refused
    writer.record_delivery("main", event(100), H + 3601.0)
    print("seal", writer.records_lost)
    print("open", writer.open_segment is not None)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # room again
    writer.tick(H + 3601.5)  # the retry completes the old hour's segment
    writer.record_delivery("main", event(101), H + 3602.0)
    writer.close()
    print("descriptors", len(os.listdir("/proc/self/fd")) - descriptors)
"""


@pytest.mark.parametrize("compiled", PATHS)
def test_a_seal_that_meets_a_full_disk_keeps_the_segment_and_its_hour(
        tmp_path: Path, compiled: bool) -> None:
    """A write cut short leaves half a line waiting; the seal that the next hour's record
    asks for fails on the same full disk.  The segment stays open (its file, its lines,
    its hour), the next hour's record is refused and counted (neither raises): once there
    is room the next tick's retry completes its file, and the next hour's records go to a
    segment of their own.  Before, the failed seal dropped the segment
    (left .open, its descriptor leaked) and the next segment began with the old hour's
    half line and records."""
    done = run_full_disk(_FULL_DISK, tmp_path, compiled=compiled)
    assert done.stdout.split("\n") == [
        "Batch" if compiled else "_PyBatch", "tick EFBIG", "seal 1", "open True",
        "descriptors 0", ""]
    contents = read_journal([tmp_path])
    assert contents.skipped == []
    assert [r.transaction_id for r in contents.records] == [0, 1, 2, 3, 4, 101]
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)
    for path in journal_files(tmp_path):
        for line in path.read_bytes().splitlines():
            received = json.loads(line)["received"]
            assert path.parent.relative_to(tmp_path).as_posix() == partition_of(received)


@pytest.mark.parametrize("compiled", PATHS)
def test_a_thread_that_will_not_start_leaves_the_interval_sync_to_the_loop(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """No thread to be had (a process at its limit): that round's interval sync is done
    inline, and the writer goes on (before, every later tick and the seal raised
    'cannot join thread before it is started')."""
    real_sync, syncs = writer_module._sync, []

    def counting(fd: int) -> None:
        syncs.append(fd)
        real_sync(fd)

    monkeypatch.setattr(writer_module, "_sync", counting)
    real_start = threading.Thread.start

    def refused_once(self: threading.Thread) -> None:
        monkeypatch.setattr(threading.Thread, "start", real_start)
        raise RuntimeError("can't start new thread")

    clock = Clock()
    writer = _writer(tmp_path, compiled, monkeypatch, fsync=FsyncPolicy.INTERVAL,
                     fsync_interval=1.0, clock=clock, monotonic=clock)
    monkeypatch.setattr(threading.Thread, "start", refused_once)
    event = MessageReceived(remote="minion", body=b"x", session_id=1, transaction_id=1,
                            segments=1)
    writer.record_delivery("main", event, HOUR_START + 1.0)
    clock.now += 2.0
    writer.tick()
    assert threading.Thread.start is real_start  # refused once
    assert len(syncs) == 1  # inline
    for n in range(3):
        writer.record_delivery("main", event, HOUR_START + 3.0 + n)
        clock.now += 2.0
        writer.tick()  # in its thread again
        writer._syncer.wait()
    assert len(syncs) == 4
    writer.close()
    assert writer.open_segment is None
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)
    assert len(read_journal([tmp_path]).records) == 4


def _errors(exc: BaseException | None) -> list[str]:
    """The messages of an exception and of those chained to it."""
    found = []
    while exc is not None:
        found.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return found


def test_a_failed_interval_sync_is_told_when_the_seal_s_own_sync_fails_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both errors reach the caller, and the segment is sealed all the same (its bytes
    were written): before, the interval sync's error was dropped, and the seal's left
    the file .open with its descriptor."""
    errors = iter([OSError(errno.EIO, "disk gone"), OSError(errno.EIO, "still gone")])

    def failing(_fd: int) -> None:
        raise next(errors)

    monkeypatch.setattr(writer_module, "_sync", failing)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=clock, monotonic=clock)
    writer.append(record(0))
    clock.now += 1.0
    writer.tick()  # the sync fails in its thread
    with pytest.raises(OSError, match="disk gone") as raised:
        writer.close()
    assert sorted(_errors(raised.value)) == ["[Errno 5] disk gone", "[Errno 5] still gone"]
    assert writer.open_segment is None
    assert len(journal_files(tmp_path, include_open=False)) == 1
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)
    assert len(read_journal([tmp_path]).records) == 1


def test_any_error_of_the_interval_sync_s_thread_is_raised_by_the_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only an OSError (before, anything else was printed by the thread and lost)."""
    real, calls = writer_module._sync, []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise ValueError("odd descriptor")
        real(fd)

    monkeypatch.setattr(writer_module, "_sync", failing)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=clock, monotonic=clock)
    writer.append(record(0))
    clock.now += 1.0
    writer.tick()
    with pytest.raises(ValueError, match="odd descriptor"):
        writer.close()
    assert writer.open_segment is None
    assert len(read_journal([tmp_path]).records) == 1


class _Counting(JournalWriter):
    """A writer whose record_delivery counts its calls."""

    seen = 0

    def record_delivery(self, node: str, delivery: Any, now_wall: float, *,
                        resends: int = 0) -> None:
        self.seen += 1
        super().record_delivery(node, delivery, now_wall, resends=resends)


@pytest.mark.parametrize("compiled", PATHS)
def test_a_subclass_s_record_delivery_is_called_on_either_path(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the compiled batch replaced the method on the instance, so an override
    never saw a raw-bytes delivery."""
    writer = _writer(tmp_path, compiled, monkeypatch, cls=_Counting)
    assert isinstance(writer, _Counting)
    event = MessageReceived(remote="minion", body=b"x", session_id=1, transaction_id=1,
                            segments=1)
    for n in range(10):
        writer.record_delivery("main", event, HOUR_START + 1.0, resends=n % 2)
    assert (writer.seen, writer.records_written) == (10, 10)
    writer.close()
    assert [r.resends for r in read_journal([tmp_path]).records] == [0, 1] * 5
