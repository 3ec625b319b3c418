"""Segments rotate by size, age and hour; fsync follows the policy; crashes only tear the tail."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from raetlike.journal import (
    DEFAULT_FSYNC,
    FsyncPolicy,
    JournalWriter,
    encode_record,
    journal_files,
    read_journal,
)
from raetlike.journal import _writer as writer_module
from tests.journalkit import HOUR_START, record


class Clock:
    """A settable clock (the tests give it as both the wall and the monotonic clock)."""

    def __init__(self, now: float = HOUR_START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_segments_rotate_by_size_and_each_stays_under_the_limit(tmp_path: Path) -> None:
    size = len(encode_record(record(10)))  # every record below has this size
    with JournalWriter(tmp_path, "main", max_bytes=size * 8) as writer:
        for n in range(10, 90):
            writer.append(record(n))
    files = journal_files(tmp_path, include_open=False)
    assert [path.stat().st_size for path in files] == [size * 8] * 10
    assert [r.sequence for r in read_journal([tmp_path]).records] == list(range(10, 90))


def test_segments_rotate_at_the_hour_into_the_next_partition(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, "main") as writer:
        writer.append(record(1, received=HOUR_START + 3599.5))
        writer.append(record(2, received=HOUR_START + 3600.0))
    hours = [p.parent.relative_to(tmp_path).as_posix() for p in journal_files(tmp_path)]
    assert hours == ["date=2026-01-01/hour=10", "date=2026-01-01/hour=11"]


def test_an_idle_segment_is_sealed_by_age_on_tick(tmp_path: Path) -> None:
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", max_age=60.0, clock=clock, monotonic=clock)
    writer.append(record(1))
    clock.now += 59.0
    writer.tick()
    assert writer.open_segment is not None
    clock.now += 1.0
    writer.tick()
    assert writer.open_segment is None
    assert len(journal_files(tmp_path, include_open=False)) == 1


def _count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = writer_module._sync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(writer_module, "_sync", counting)
    return calls


def test_the_default_fsync_policy_is_every_interval() -> None:
    assert DEFAULT_FSYNC is FsyncPolicy.INTERVAL


def test_fsync_always_syncs_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = _count_syncs(monkeypatch)
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.ALWAYS)
    for n in range(5):
        writer.append(record(n))
    assert len(syncs) == 5
    writer.close()
    assert len(syncs) == 6  # and once more when sealed


def test_fsync_interval_syncs_once_the_interval_has_passed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = _count_syncs(monkeypatch)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=clock, monotonic=clock)
    for n in range(100):
        writer.append(record(n))
    assert syncs == []
    clock.now += 1.0
    writer.tick()
    writer._syncer.wait()  # the sync runs in a thread of its own (below)
    assert len(syncs) == 1
    clock.now += 5.0
    writer.tick()  # nothing new since: no sync
    writer._syncer.wait()
    assert len(syncs) == 1
    writer.append(record(101))
    assert len(syncs) == 1  # gathered: written and synced at the tick that ends the round
    writer.tick()
    writer._syncer.wait()
    assert len(syncs) == 2


def test_the_interval_fsync_does_not_hold_up_the_loop_and_sealing_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow disk: the tick that starts the interval sync returns at once, records go on
    being written meanwhile, no second sync starts while one waits, and sealing waits for
    it (and syncs once more) before the file is closed and renamed."""
    started, release = threading.Event(), threading.Event()
    order: list[str] = []
    real = writer_module._sync

    def slow(fd: int) -> None:
        order.append("sync")
        started.set()
        release.wait(10.0)  # the old, inline sync would hold tick() here for 10 s
        real(fd)

    monkeypatch.setattr(writer_module, "_sync", slow)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=clock, monotonic=clock)
    writer.append(record(0))
    clock.now += 1.0
    began = time.monotonic()
    writer.tick()
    assert time.monotonic() - began < 5.0
    assert started.wait(5.0)
    for n in range(1, 50):
        writer.append(record(n))
    clock.now += 1.0
    writer.tick()  # written; one sync already waits: none more
    assert order == ["sync"]
    release.set()
    writer.close()
    assert order == ["sync", "sync"]  # the seal's own, after the first ended
    assert len(read_journal([tmp_path]).records) == 50


def test_an_error_of_the_interval_fsync_is_raised_by_the_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = writer_module._sync, []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.EIO, "disk gone")
        real(fd)  # the seal's own sync works

    monkeypatch.setattr(writer_module, "_sync", failing)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.INTERVAL, fsync_interval=1.0,
                           clock=clock, monotonic=clock)
    writer.append(record(0))
    clock.now += 1.0
    writer.tick()  # started; it fails in its thread
    with pytest.raises(OSError, match="disk gone"):
        writer.close()
    assert writer.open_segment is None  # sealed all the same
    assert len(journal_files(tmp_path, include_open=False)) == 1
    assert len(read_journal([tmp_path]).records) == 1


def test_fsync_never_leaves_it_to_the_os(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = _count_syncs(monkeypatch)
    clock = Clock()
    writer = JournalWriter(tmp_path, "main", fsync=FsyncPolicy.NEVER, clock=clock, monotonic=clock)
    for n in range(10):
        writer.append(record(n))
        clock.now += 10.0
        writer.tick()
    writer.close()
    assert syncs == []
    assert len(read_journal([tmp_path]).records) == 10


def _digests(directory: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in journal_files(directory)}


def test_a_torn_last_record_is_skipped_and_reported_and_a_restart_starts_a_new_segment(
        tmp_path: Path) -> None:
    crashed = JournalWriter(tmp_path, "main")
    for n in range(1, 4):
        crashed.append(record(n))
    crashed.tick()  # the loop round that appended them ended: they are written
    torn = crashed.open_segment
    assert torn is not None
    with torn.open("ab") as tail:  # what a process killed mid-write leaves behind
        tail.write(encode_record(record(4))[:37])
    writer_module._OPEN_PATHS.discard(torn)  # the crashed process is gone
    before = torn.read_bytes()

    restarted = JournalWriter(tmp_path, "main")
    assert restarted.recovered == [torn.with_name(torn.name.removesuffix(".open"))]
    restarted.append(record(5))
    restarted.close()

    assert restarted.recovered[0].read_bytes() == before  # sealed by a rename, bytes untouched
    contents = read_journal([tmp_path])
    assert [r.sequence for r in contents.records] == [1, 2, 3, 5]
    [skipped] = contents.skipped
    assert (skipped.path, skipped.line, skipped.reason) == (restarted.recovered[0], 4, "torn")
    assert len(contents.files) == 2


def test_files_are_never_rewritten_after_a_restart(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, "main") as first:
        first.append(record(1))
    before = _digests(tmp_path)
    with JournalWriter(tmp_path, "main") as second:
        second.append(record(2))
    after = _digests(tmp_path)
    assert {p: after[p] for p in before} == before
    assert len(after) == 2


def test_a_writer_killed_mid_stream_leaves_a_journal_that_reads(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from raetlike.journal import JournalWriter\n"
        "from tests.journalkit import record\n"
        "writer = JournalWriter(Path(sys.argv[1]), 'main')\n"
        "n = 0\n"
        "while True:\n"
        "    n += 1\n"
        "    writer.append(record(n, topic='t' * (n % 5000)))\n"
        "    if n == 1000:\n"
        "        print('ready', flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                               stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent)
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    contents = read_journal([tmp_path])
    sequences = [r.sequence for r in contents.records]
    assert len(sequences) >= 1000
    assert sequences == list(range(1, len(sequences) + 1))
    assert all(s.reason == "torn" for s in contents.skipped)
    assert len(contents.skipped) <= 1
