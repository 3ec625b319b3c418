"""A journal that cannot be written never stops its process: appends and ticks do not raise,
what is lost is counted (and shown in the estate's stats), later ticks retry, and what waits
in memory stays within ``max_bytes``.  Intervals run on a monotonic clock; a dead writer's
segment is told by its lock, not its pid; with fsync ``always`` new directories are synced."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from raetlike.cli.ping import ping
from raetlike.journal import FsyncPolicy, JournalWriter, journal_files, read_journal
from raetlike.journal import _delivery as delivery_module
from raetlike.journal import _writer as writer_module
from raetlike.journal._delivery import COMPILED
from raetlike.udp import parse_host_port
from road.events import MessageReceived
from tests.journalkit import HOUR_START, run_full_disk

ROOT = Path(__file__).resolve().parent.parent
PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


class Clock:
    """A settable clock."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _path(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    elif not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")


def _event(n: int, size: int = 100) -> MessageReceived:
    return MessageReceived(remote="minion", body=b"x" * size, session_id=1, transaction_id=n,
                           segments=1)


# Run in a child with a full disk (tests.journalkit.run_full_disk).
_FULL_DISK = """
    now = [0.0]
    time.monotonic = lambda: now[0]  # the writer's interval clock (its default)
    writer = JournalWriter(directory, "main", fsync=FsyncPolicy.INTERVAL, max_bytes=16_384,
                           flush_bytes=1024, fsync_interval=1.0, clock=lambda: H)
    print(type(writer._batch).__name__)

    def event(n):
        return MessageReceived(remote="minion", body=b"x" * 100, session_id=1,
                               transaction_id=n, segments=1)

    offered = 0
    for n in range(10):
        writer.record_delivery("main", event(n), H + 1.0)
        offered += 1
    writer.tick(H + 1.0)
    resource.setrlimit(resource.RLIMIT_FSIZE, (3000, hard))  # the disk is full at 3000 bytes
    most = 0
    for n in range(10, 1010):  # ~250 KB of lines: far past max_bytes
        writer.record_delivery("main", event(n), H + 2.0)
        offered += 1
        most = max(most, len(writer._batch))
        if n % 20 == 0:
            now[0] += 0.5
            writer.tick(H + 2.0)  # retried, fails again: never raised
    print("error", errno.errorcode[writer.last_error.errno], writer.write_errors > 1)
    print("bounded", 0 < most <= writer.max_bytes, writer.records_lost > 0)
    try:
        writer.flush()  # the calls that promise a write say it failed
        print("flush wrote")
    except OSError as exc:
        print("flush", errno.errorcode[exc.errno])
    try:
        writer.record_durable("main", event(5000), H + 2.0, store=1, durable_seq=1)
        print("durable taken")
    except OSError as exc:
        print("durable", errno.errorcode[exc.errno])
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # room again
    now[0] += 0.5
    writer.tick(H + 2.0)  # the retry writes what waited
    for n in range(2000, 2010):
        writer.record_delivery("main", event(n), H + 3.0)
        offered += 1
    writer.close()
    print("offered", offered, "lost", writer.records_lost, "taken", writer.records_written)
"""


@pytest.mark.parametrize("compiled", PATHS)
def test_a_full_disk_never_raises_from_appends_or_ticks_and_counts_what_it_loses(
        tmp_path: Path, compiled: bool) -> None:
    """Before, the first tick after the disk filled raised EFBIG out of the writer (an
    estate died of it) and nothing counted the records it could not keep."""
    done = run_full_disk(_FULL_DISK, tmp_path, compiled=compiled)
    lines = done.stdout.splitlines()
    assert lines[:5] == ["Batch" if compiled else "_PyBatch", "error EFBIG True",
                         "bounded True True", "flush EFBIG", "durable EFBIG"]
    assert "a write failed: File too large" in done.stderr  # the WARNING, once
    assert done.stderr.count("a write failed") == 1
    assert "writing again" in done.stderr
    words = lines[5].split()
    offered, lost, taken = int(words[1]), int(words[3]), int(words[5])
    contents = read_journal([tmp_path])
    assert contents.skipped == []  # the line cut short was completed by the retry
    assert len(contents.records) + lost == offered == 1020
    assert taken + lost == offered  # a refused record was never taken
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)
    numbers = [r.transaction_id for r in contents.records]
    assert numbers == sorted(numbers)
    assert numbers[:10] == list(range(10))
    assert numbers[-10:] == list(range(2000, 2010))


@pytest.mark.parametrize("compiled", PATHS)
def test_a_removed_journal_directory_costs_what_was_in_it_and_the_writer_goes_on(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rm -rf`` of the journal under a running writer: its writes into the unlinked file
    succeed, so the tick finds the file gone (fstat: no link), counts what was written to it
    as lost and starts a new segment, which takes what waited; close does not raise.
    Before, every record went on into the unlinked file, unseen, and close raised
    FileNotFoundError."""
    _path(compiled, monkeypatch)
    root = tmp_path / "journal"
    mono = Clock()
    monkeypatch.setattr(time, "monotonic", mono)  # the writer's interval clock (its default)
    writer = JournalWriter(root, "main", fsync=FsyncPolicy.NEVER)
    for n in range(100):
        writer.record_delivery("main", _event(n), HOUR_START + 1.0)
    writer.tick()
    shutil.rmtree(root)
    for n in range(100, 150):
        writer.record_delivery("main", _event(n), HOUR_START + 2.0)
    writer.tick()  # within a second of the last check: written into the unlinked file
    for n in range(150, 170):
        writer.record_delivery("main", _event(n), HOUR_START + 3.0)
    mono.now += 1.0  # writer_module.GONE_CHECK_EVERY
    writer.tick()  # the file is found gone: the 20 waiting go to a new segment
    assert writer.records_lost == 150
    assert writer.last_error is not None
    assert writer.last_error.errno == errno.ENOENT
    for n in range(170, 200):
        writer.record_delivery("main", _event(n), HOUR_START + 4.0)
    writer.close()
    assert writer.records_written == 200
    contents = read_journal([root])
    assert contents.skipped == []
    assert [r.transaction_id for r in contents.records] == list(range(150, 200))
    assert journal_files(root) == journal_files(root, include_open=False)


def test_a_directory_removed_just_before_close_loses_nothing_that_waited(
        tmp_path: Path) -> None:
    """Close finds the file gone: what waits goes to a new segment, which it seals."""
    root = tmp_path / "journal"
    writer = JournalWriter(root, "main")
    writer.record_delivery("main", _event(1), HOUR_START + 1.0)
    shutil.rmtree(root)
    writer.record_delivery("main", _event(2), HOUR_START + 2.0)
    writer.close()
    assert writer.records_lost == 0
    assert [r.transaction_id for r in read_journal([root]).records] == [1, 2]


@pytest.mark.parametrize("compiled", PATHS)
def test_a_descriptor_closed_under_the_writer_seals_its_file_and_goes_on(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its writes fail with EBADF: the next tick seals the file as written (nothing of it
    lost) and a new segment takes what waited.  Before, the tick raised EBADF."""
    _path(compiled, monkeypatch)
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.NEVER)
    for n in range(10):
        writer.record_delivery("main", _event(n), HOUR_START + 1.0)
    writer.tick()
    segment = writer._segment
    assert segment is not None
    os.close(segment.fd)  # another part of the process closes it
    for n in range(10, 20):
        writer.record_delivery("main", _event(n), HOUR_START + 2.0)
    writer.tick()  # EBADF: counted
    assert writer.last_error is not None
    assert writer.last_error.errno == errno.EBADF
    writer.tick()  # the retry finds the descriptor gone
    for n in range(20, 30):
        writer.record_delivery("main", _event(n), HOUR_START + 3.0)
    writer.close()
    assert writer.records_lost == 0
    assert writer.records_written == 30
    contents = read_journal([tmp_path])
    assert contents.skipped == []
    assert sorted(r.transaction_id for r in contents.records) == list(range(30))
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)


def test_a_failed_interval_sync_is_counted_at_the_tick_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync thread's OSError (an fdatasync's EIO, which no test can make for real: the
    error injected at the writer's _sync) was raised by the next tick, out of the estate's
    loop.  Now it is counted and the next interval syncs again."""
    real, calls = writer_module._sync, []

    def failing_once(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(writer_module, "_sync", failing_once)
    mono = Clock()
    monkeypatch.setattr(time, "monotonic", mono)  # the writer's interval clock (its default)
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=mono)  # (main's code measured intervals on this one)
    for round_ in range(4):
        writer.record_delivery("main", _event(round_), HOUR_START + 1.0 + round_)
        mono.now += 1.0
        writer.tick()  # the second one finds the first sync's error
        thread = writer._syncer._thread
        if thread is not None:
            thread.join()  # that round's sync done (its error kept for the next tick)
    assert len(calls) == 3  # the second round told the error; the third and fourth synced
    assert writer.write_errors == 1
    assert writer.last_error is not None
    assert writer.last_error.errno == errno.EIO
    writer.close()  # the error was told at a tick: not again
    assert len(read_journal([tmp_path]).records) == 4


def test_a_wall_clock_step_back_moves_neither_interval_fsync_nor_age_rotation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built and ticked as the estate does (defaults; ``tick(time.time())``), with the wall
    clock stepped back 20 minutes: the interval fsync and the ``max_age`` seal go on, by the
    monotonic clock.  Before, both waited for the wall clock to catch up."""
    syncs: list[int] = []
    real = writer_module._sync
    monkeypatch.setattr(writer_module, "_sync", lambda fd: (syncs.append(fd), real(fd))[1])
    mono = Clock()
    monkeypatch.setattr(time, "monotonic", mono)  # the writer's default interval clock
    writer = JournalWriter(tmp_path, "main", max_age=10.0)  # interval fsync, 1 s
    wall = HOUR_START + 1800.0
    writer.record_delivery("main", _event(0), wall)
    writer.tick(wall)
    wall -= 1200.0  # NTP steps the wall clock back (the same hour partition)
    for second in range(1, 34):
        mono.now += 1.0
        writer.record_delivery("main", _event(second), wall + second)
        writer.tick(wall + second)
        writer._syncer.wait()
    # sealed when 10 s old (a new segment opens at the next record, a second later)
    assert len(writer.segments_sealed) == 3
    assert len(syncs) >= 25  # about one a second (the seals' own among them)
    writer.close()
    assert len(read_journal([tmp_path]).records) == 34


_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from raetlike.journal import JournalWriter
    from road.events import MessageReceived
    writer = JournalWriter(Path(sys.argv[1]), "main")
    writer.record_delivery("main", MessageReceived(remote="minion", body=b"x", session_id=1,
                           transaction_id=1, segments=1), 1_767_261_601.0)
    writer.flush()
    print(writer.open_segment, flush=True)
    sys.stdin.read()  # until the test lets go
    writer.close()
""")


def test_a_dead_writer_s_segment_is_sealed_by_its_lock_not_its_pid(tmp_path: Path) -> None:
    """A leftover whose name carries the pid of a live process that is no writer (pid
    reuse): its lock can be taken, so it is sealed; before, ``kill(pid, 0)`` said alive and
    the segment stayed ``.open`` for ever (sealed-only readers never saw it).  A live
    writer's segment in another process holds its lock and is left alone."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = Path(holder.stdout.readline().strip())
        assert held.name.endswith(".jsonl.open")
        # a dead writer's leftover named with the pid that now is the (live) holder's
        left = (tmp_path / "date=2026-01-01" / "hour=10"
                / f"main.20260101T100000000000.{holder.pid}.1.jsonl.open")
        left.write_bytes(b'{"version":1}\n')
        writer = JournalWriter(tmp_path, "main")
        assert writer.recovered == [left.with_name(left.name.removesuffix(".open"))]
        assert held.exists()
        writer.close()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
    assert not held.exists()  # sealed by its own writer
    assert journal_files(tmp_path) == journal_files(tmp_path, include_open=False)


def test_fsync_always_syncs_every_new_directory_up_to_the_journal_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of a new day makes ``date=`` and ``hour=`` directories: each one's entry is
    synced in its parent (the journal root, the date directory), and the segment's in its
    hour directory.  Before, only the hour directory was synced."""
    synced: list[Path] = []
    real = writer_module._sync_directory

    def recording(directory: Path) -> None:
        synced.append(directory)
        real(directory)

    monkeypatch.setattr(writer_module, "_sync_directory", recording)
    root = tmp_path / "journal"
    writer = JournalWriter(root, "main", fsync=FsyncPolicy.ALWAYS)
    writer.record_delivery("main", _event(1), HOUR_START + 1.0)
    day, hour = root / "date=2026-01-01", root / "date=2026-01-01" / "hour=10"
    assert set(synced) == {root, day, hour}
    synced.clear()
    writer.record_delivery("main", _event(2), HOUR_START + 3601.0)  # a new hour, same day
    assert set(synced) == {hour, day, day / "hour=11"}  # the seal's rename, the new hour's
    writer.close()


def _wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _limited() -> None:  # the estate's own process: a full disk at 64 KiB a file
    import resource  # noqa: PLC0415 - in the child only

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # ignored: inherited across exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (65_536, resource.getrlimit(
        resource.RLIMIT_FSIZE)[1]))


def test_an_estate_whose_journal_fills_the_disk_goes_on_and_shows_the_loss(
        tmp_path: Path) -> None:
    """``raetlike estate --journal`` under a 64 KiB file-size limit echoes all 400 pings,
    its stats line shows the journal's losses, and it stops with status 0.  Before, the
    first failed write killed it (``raetlike estate: error: File too large``)."""
    journal = tmp_path / "journal"
    command = [sys.executable, "-m", "raetlike", "estate", "master", "--host", "127.0.0.1",
               "--port", "0", "--main", "--auto", "once", "--echo",
               "--keep", str(tmp_path / "keep"), "--journal", str(journal)]
    log_path = tmp_path / "master.log"
    with log_path.open("wb") as log:
        estate = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                  preexec_fn=_limited, cwd=ROOT)  # noqa: PLW1509 - setrlimit
    try:
        assert estate.stdout is not None
        line = estate.stdout.readline().decode()
        assert line.startswith("estate master listening on "), line
        address = parse_host_port(line.removeprefix("estate master listening on ").strip())
        result = ping(address, count=400, size=200, timeout=30)
        assert len(result.round_trips) == 400
        estate.send_signal(signal.SIGUSR1)
        _wait_for(lambda: '"journal"' in log_path.read_text(), "the stats line")
    finally:
        estate.terminate()
        status = estate.wait(timeout=30)
        if estate.stdout is not None:
            estate.stdout.close()
    text = log_path.read_text()
    assert status == 0, text[-2000:]
    stats = json.loads(next(line for line in text.splitlines() if '"journal"' in line))
    figures = stats["journal"]
    # all taken: they wait in memory (within max_bytes, 64 MiB) for a write that fails
    assert (figures["records_written"], figures["records_lost"]) == (400, 0)
    assert figures["write_errors"] > 0
    assert figures["last_error"] == "[Errno 27] File too large"
    # at the stop, what still waits is lost, counted and told
    lost = int(text.split("the journal lost ")[1].split()[0])
    contents = read_journal([journal])
    assert 0 < len(contents.records) < 400
    assert len(contents.records) + lost == 400
    assert all(os.path.getsize(path) <= 65_536 for path in journal_files(journal))
