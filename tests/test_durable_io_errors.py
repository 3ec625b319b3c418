"""An I/O error other than a full disk (EIO, EROFS, a removed directory, ...) in the durable
store or in the journal whose lines are its marks is a fault like a full disk: it never
raises out of the road, it is counted, and it keeps the full disk's guarantees (no
acknowledgement leaves before its mark; a message ``transmit`` refused is not stored).

The faults are real where one can be had without a device of our own: a store directory
removed under the road (ENOENT), and the kernel's own EIO for a write to a pty whose other
side is gone, put in place of the journal segment's descriptor (``dup2``).  An EIO or EROFS
from the store's system calls (``posix_fallocate``, ``fdatasync``, ``open``) or from an
``msync`` is injected by replacing that call for the test (no failing device is at hand).
"""

from __future__ import annotations

import errno
import json
import logging
import mmap
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import pytest

from raetlike.dedup import RangeWindow
from raetlike.durable import DurableConfig, DurableRoad, DurableSeen
from raetlike.durable._log import RecordLog
from raetlike.errors import BackpressureError, StoreWriteError
from raetlike.journal import FsyncPolicy, journal_files
from raetlike.metrics import Watch
from road import events
from tests.simlink import SimNet
from tests.test_durable_sim import MINION, _pair, _send

INTERVAL_SYNC = DurableConfig(fsync=FsyncPolicy.INTERVAL, checkpoint_every=5)


def _journaled_seqs(directory: Path) -> Counter[int]:
    seqs: Counter[int] = Counter()
    for path in journal_files(directory):
        for line in path.read_text().splitlines():
            seqs[json.loads(line)["durable_seq"]] += 1
    return seqs


@contextmanager
def _journal_eio(road: DurableRoad) -> Iterator[None]:
    """The journal segment's descriptor writes fail with a real EIO meanwhile: a pty whose
    master is closed takes its place, and the file is put back after."""
    assert road.journal is not None
    segment = road.journal._segment
    assert segment is not None
    fd = segment.fd
    saved = os.dup(fd)
    master, slave = os.openpty()
    os.close(master)
    os.dup2(slave, fd)
    os.close(slave)
    with pytest.raises(OSError, match="Input/output error"):
        os.write(fd, b"x")  # (the kernel's EIO: a hung-up tty)
    try:
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def test_a_journal_write_eio_holds_the_round_and_nothing_escapes(tmp_path: Path) -> None:
    """Before, the journal's EIO (not a full disk) was raised out of datagrams_to_send:
    a `raetlike estate --durable --journal` died of it."""
    net = SimNet(seed=1)
    main, minion = _pair(tmp_path, net, fast=True, journal=True)
    assert main.road is not None
    assert minion.road is not None
    _send(minion, 10)
    assert net.run_until(lambda: len(minion.road.outbox) == 0)  # type: ignore[union-attr]
    road = main.road
    with _journal_eio(road):
        _send(minion, 30)
        net.run_for(2.0)  # the marks (journal lines) cannot be written: held, not raised
        assert road.held_for_errors > 0
        assert road.held_for_room == 0
        assert isinstance(road.last_error, StoreWriteError)
        assert "Input/output error" in str(road.last_error)
        assert len(minion.road.outbox) == 20  # no acknowledgement left for them
        assert road.journal is not None
        assert road.journal.write_errors > 0
        line = Watch(durable=road).snapshot()["durable"]  # visible: stats line, metrics
        assert line["held_for_errors"] == road.held_for_errors
        assert "Input/output error" in line["last_error"]
        assert line["held"] == 0  # (the receiver's outbox: it sends nothing here)
        scraped = {metric.name: metric.samples[0].value
                   for metric in Watch(durable=road).collect()}
        assert scraped["raetlike_durable_held_for_errors"] == road.held_for_errors
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=60)
    road.journal.flush()
    assert _journaled_seqs(tmp_path / "main" / "journal") == Counter(range(1, 31))


def _fallocate_eio(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Callable[[], None]:
    real = os.posix_fallocate

    def failing(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "posix_fallocate", failing)
    return lambda: monkeypatch.setattr(os, "posix_fallocate", real)


def _fdatasync_eio(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Callable[[], None]:
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", failing)
    return lambda: monkeypatch.setattr(os, "fdatasync", real)


def _open_erofs(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Callable[[], None]:
    real = os.open

    def failing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and str(directory) in str(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing)
    return lambda: monkeypatch.setattr(os, "open", real)


def _removed(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Callable[[], None]:
    """A real fault: the directory is removed (the next segment cannot be made there)."""
    shutil.rmtree(directory)
    return directory.mkdir


FAULTS = {"removed": _removed, "fallocate-eio": _fallocate_eio,
          "fdatasync-eio": _fdatasync_eio, "open-erofs": _open_erofs}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_dedup_store_fault_holds_the_round_and_the_marks_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Before, the dedup store's snapshot (every ``checkpoint_every`` journaled deliveries)
    raised the error out of datagrams_to_send: FileNotFoundError, OSError (EIO), or a
    StoreError that was not a StoreFullError."""
    net = SimNet(seed=2)
    main, minion = _pair(tmp_path, net, fast=True, journal=True)
    assert minion.road is not None
    main.crash()
    main.config = INTERVAL_SYNC
    road = main.start()
    end = FAULTS[fault](monkeypatch, tmp_path / "main" / "durable" / "seen")
    _send(minion, 20)
    net.run_for(3.0)  # the snapshot cannot be written: the rounds are held
    assert road.held_for_errors > 0, fault
    assert isinstance(road.last_error, StoreWriteError)
    if fault != "fdatasync-eio":  # (a failed sync is counted, not tried again: after an
        # EIO the kernel may have let the pages go, and a second fdatasync proves nothing)
        assert len(minion.road.outbox) > 0  # no mark down, no acknowledgement either
    end()
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=60)
    assert road.journal is not None
    road.journal.flush()
    assert _journaled_seqs(tmp_path / "main" / "journal") == Counter(range(1, 21))
    main.crash()  # the store opens again, every mark in it or in the journal
    again = main.start()
    store = minion.road.outbox.store
    assert not any(again.seen.admit("minion", store, seq, journaled=True)
                   for seq in range(1, 21))


def _restarted(tmp_path: Path, seed: int, config: DurableConfig) -> tuple[SimNet, Any, Any,
                                                                     DurableRoad]:
    """A joined pair whose minion restarts with ``config`` and is allowed again: the net,
    both sides and the minion's new road."""
    net = SimNet(seed=seed)
    main, minion = _pair(tmp_path, net, fast=True)
    minion.crash()
    minion.config = config
    road = minion.start()
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=30)
    return net, main, minion, road


@pytest.mark.parametrize("fault", ["removed", "fallocate-eio", "open-erofs"])
def test_transmit_refuses_a_message_the_store_cannot_write_as_backpressure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Before, a put that needed a new segment raised the raw error (FileNotFoundError,
    a StoreError, PermissionError-like OSError) out of transmit: not a BackpressureError,
    so the estate's echo and the bus did not take it and the estate died."""
    net, main, _minion, road = _restarted(
        tmp_path, 3, DurableConfig(fsync=FsyncPolicy.NEVER, segment_bytes=4096))
    end = FAULTS[fault](monkeypatch, tmp_path / "minion" / "durable" / "outbox")
    accepted: set[int] = set()
    refused = 0
    for n in range(200):
        try:
            road.transmit({"n": n, "pad": "x" * 100}, to="main")
            accepted.add(n)
        except StoreWriteError:  # (a BackpressureError: what an estate's echo takes)
            refused += 1
        net.run_for(0.01)
    assert refused > 0
    assert issubclass(StoreWriteError, BackpressureError)
    end()
    for n in range(200, 210):
        road.transmit({"n": n, "pad": "x" * 100}, to="main")
        accepted.add(n)
    assert net.run_until(lambda: len(road.outbox) == 0, timeout=60)
    main.take()
    got = Counter(body["n"] for body in main.delivered)
    assert max(got.values()) == 1
    assert set(got) == accepted  # each accepted one once; no refused one at all


class _FailingMap(mmap.mmap):
    """A second mapping of the open segment whose msync fails with EIO (no failing device
    at hand); writes through it reach the same pages."""

    def flush(self, *_args: Any) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_an_interval_fsync_that_fails_is_counted_and_tried_again_later(
        tmp_path: Path) -> None:
    """Before, the interval msync's EIO was raised out of handle_timer."""
    net, _main, _minion, road = _restarted(
        tmp_path, 4, DurableConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval=0.01))
    log = road.outbox.log
    real = log._map
    assert real is not None
    road.transmit({"n": -1}, to="main")  # the lease record (forced at once) first
    failing = _FailingMap(log._fd, len(real))
    log._map = failing
    for n in range(20):
        road.transmit({"n": n}, to="main")
    net.run_for(0.5)  # interval syncs come due and fail: counted, tried again
    assert road.sync_errors > 0
    assert road.sync_errors <= 0.5 / 0.01 + 5  # an interval apart, not in a busy loop
    assert log.dirty
    assert isinstance(road.last_error, StoreWriteError)
    log._map = real
    failing.close()
    net.run_for(0.5)
    assert not log.dirty
    assert len(road.outbox) == 0


def test_closing_over_a_failing_disk_does_not_raise_and_releases_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Before, close() raised the fdatasync's EIO (the store was left locked and its
    descriptors open, and the estate's shutdown stopped there)."""
    net, _main, minion, road = _restarted(
        tmp_path, 5, DurableConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval=60.0))
    for n in range(5):
        road.transmit({"n": n}, to="main")
    end = _fdatasync_eio(monkeypatch, tmp_path)
    with caplog.at_level(logging.ERROR):
        road.close()
    end()
    assert road.write_errors > 0
    assert "could not be written" in caplog.text
    net.stacks.pop(MINION)
    minion.road = None
    again = minion.start()  # the lock was released; what was held is held again
    assert again.outbox.store == road.outbox.store
    assert len(again.outbox) == 5


def _window_records(log: RecordLog, windows: dict[str, RangeWindow]) -> None:
    for sender, window in windows.items():
        log.append(msgpack.packb([2, sender, 1, *window.state()]))


def test_a_snapshot_cut_short_before_a_whole_one_in_a_later_segment_opens(
        tmp_path: Path) -> None:
    """A snapshot a fault cut short (its windows down, its closing record not), then a
    whole one in the next segment, then a crash before the old segments went: a
    segment's windows are its own snapshot's.  Before, the cut-short one's windows were
    counted into the next one's and the store did not open (StoreError)."""
    windows = {"s": RangeWindow(1 << 20, 4096), "t": RangeWindow(1 << 20, 4096)}
    for seq in range(1, 10):
        windows["s"].check_and_mark(seq)
    windows["t"].check_and_mark(1)
    log = RecordLog(tmp_path, fsync=FsyncPolicy.NEVER)
    _window_records(log, windows)
    log.append(msgpack.packb([1, None, 2]))
    log.rotate()  # a snapshot that a fault cut short: one window, no closing record
    _window_records(log, {"s": windows["s"]})
    log.rotate()  # tried again, whole; the crash comes before the old segments go
    _window_records(log, windows)
    log.append(msgpack.packb([1, None, 2]))
    log.abandon()
    again = DurableSeen(tmp_path, fsync=FsyncPolicy.NEVER)
    assert again.senders == 2
    assert not again.admit("s", 1, 9, journaled=False)
    assert again.admit("s", 1, 10, journaled=False)


def test_a_held_round_puts_the_timer_off_so_the_driver_does_not_spin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the marks cannot be written (here the disk is full: ENOSPC), the stack's
    timer stays due at once for what waits to be sent.  Before, get_timer gave it as it
    was, so a driver called the road again and again without waiting (a busy loop; on the
    simulated link time stood still)."""
    net = SimNet(seed=6)
    main, minion = _pair(tmp_path, net, fast=True, journal=True)
    main.crash()
    main.config = INTERVAL_SYNC
    road = main.start()

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    _send(minion, 20)
    start = net.now
    for _ in range(400):
        net.step()
    assert road.held_for_room > 0
    assert net.now - start > 5.0  # the steps waited for timers: time went on
    assert road.held_for_errors == 0
    timer = road.get_timer()
    assert timer is not None
    assert timer > net.now  # the next try is later, not at once
    monkeypatch.undo()
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=60)  # type: ignore[union-attr]


# == a store's directory removed while its segment is open ==================
# The open segment is mapped: appends into it go on succeeding after its directory is
# removed, into a file with no name.  Before, nothing noticed: rounds committed, the
# acknowledgements left, and the marks (or the held messages) were in no file.


def test_record_log_tells_its_open_segment_was_removed(tmp_path: Path) -> None:
    log = RecordLog(tmp_path / "log", fsync=FsyncPolicy.NEVER)
    assert not log.gone()
    log.append(b"a record")
    shutil.rmtree(tmp_path / "log")
    log.append(b"appended all the same")  # (no error: the mapping is there)
    assert log.gone()
    with pytest.raises(StoreWriteError):
        log.rotate()  # no directory to make a segment in
    (tmp_path / "log").mkdir()
    log.rotate()
    assert not log.gone()
    log.close()


@pytest.mark.parametrize("journal", [False, True], ids=["store-marks", "journal-marks"])
def test_a_removed_dedup_store_holds_the_round_and_every_mark_is_written_again(
        tmp_path: Path, journal: bool) -> None:
    """The dedup store's directory removed while its segment is open: the next commit
    with marks (or the check at most a second on, with a journal) finds it, the rounds
    are held (no acknowledgement) till the directory is back, and then a snapshot in a
    fresh segment holds every mark, those from before the removal too."""
    net = SimNet(seed=2)
    main, minion = _pair(tmp_path, net, fast=True, journal=journal)
    assert minion.road is not None
    _send(minion, 10)
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=30)
    road = main.road
    assert road is not None
    gone = tmp_path / "main" / "durable" / "seen"
    shutil.rmtree(gone)  # the fault
    _send(minion, 20)
    net.run_for(3.0)
    assert road.held_for_errors > 0
    assert isinstance(road.last_error, StoreWriteError)
    assert road.seen.lost == 1
    if not journal:  # (with one, the journal's line is the mark: acknowledged at once)
        assert len(minion.road.outbox) > 0  # no mark down, no acknowledgement
    gone.mkdir()  # the operator puts it back
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=60)
    main.take()
    assert Counter(body["seq"] for body in main.delivered) == Counter(range(1, 21))
    main.crash()
    again = main.start()
    store = minion.road.outbox.store
    assert not any(again.seen.admit("minion", store, seq, journaled=journal)
                   for seq in range(1, 21))


@pytest.mark.parametrize("journal", [False, True], ids=["store-marks", "journal-marks"])
def test_a_dedup_store_removed_and_made_again_at_once_loses_no_mark(
        tmp_path: Path, journal: bool) -> None:
    """Removed and made again (empty) between two rounds: nothing fails, but the marks
    written before are gone with the old files and new ones would go to the old segment.
    The check finds it and writes every window in a fresh segment."""
    net = SimNet(seed=2)
    main, minion = _pair(tmp_path, net, fast=True, journal=journal)
    assert minion.road is not None
    _send(minion, 10)
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=30)
    gone = tmp_path / "main" / "durable" / "seen"
    shutil.rmtree(gone)
    gone.mkdir()
    _send(minion, 20)
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=30)
    net.run_for(2.0)  # (with a journal: the check comes at most a second on)
    assert main.road is not None
    assert main.road.seen.lost == 1
    main.crash()
    again = main.start()
    store = minion.road.outbox.store
    assert not any(again.seen.admit("minion", store, seq, journaled=journal)
                   for seq in range(1, 21))


def test_a_removed_outbox_refuses_puts_and_writes_every_held_message_again(
        tmp_path: Path) -> None:
    """The outbox's directory removed while it holds messages (its receiver is down):
    the check (at most a second on) finds it, puts are refused (StoreWriteError) till the
    directory is back, and then every message held is in a fresh segment: a crash after
    that loses none."""
    net = SimNet(seed=4)
    main, minion = _pair(tmp_path, net, fast=True)
    main.crash()  # the receiver is down: what the minion sends stays held
    road = minion.road
    assert road is not None
    for n in range(10):
        road.transmit({"n": n}, to="main")
    gone = tmp_path / "minion" / "durable" / "outbox"
    shutil.rmtree(gone)  # the fault
    net.run_for(2.0)
    assert road.outbox.lost == 1
    assert road.held_for_errors > 0
    with pytest.raises(StoreWriteError):
        road.transmit({"n": 99}, to="main")
    gone.mkdir()  # put back
    net.run_for(0.5)
    for n in range(10, 15):
        road.transmit({"n": n}, to="main")
    minion.crash()
    again = minion.start()
    assert sorted(stored.body["n"] for stored in again.outbox.pending()) == list(range(15))
    main.start()
    assert net.run_until(lambda: len(again.outbox) == 0, timeout=60)
    main.take()
    assert Counter(body["n"] for body in main.delivered) == Counter(range(15))


def test_a_segment_that_must_grow_after_its_directory_was_removed_is_not_made_anew(
        tmp_path: Path) -> None:
    """Growing the open segment closes and opens it again: with its directory removed
    that fails (StoreWriteError), and the log tells it is gone.  Before, once the
    directory was back, the next append made the segment anew, zeros where its records
    had been: the append succeeded and the log no longer opened (StoreError)."""
    directory = tmp_path / "log"
    log = RecordLog(directory, fsync=FsyncPolicy.NEVER, segment_bytes=4096)
    log.append(b"a" * 1000)
    shutil.rmtree(directory)
    with pytest.raises(StoreWriteError):
        log.append(b"b" * 8000)  # past the segment's room: it must grow
    assert log.gone()
    directory.mkdir()
    with pytest.raises(StoreWriteError):
        log.append(b"c" * 10)  # not into a segment made anew
    log.rotate()  # what an owner does: a fresh segment
    assert not log.gone()
    log.append(b"d" * 10)
    log.close()
    again = RecordLog(directory, fsync=FsyncPolicy.NEVER, segment_bytes=4096)
    assert [payload for _, payload in again.records()] == [b"d" * 10]
    again.close()
