"""A full disk is an error at transmit (StoreFullError, a BackpressureError: nothing
stored), never a crash.

The open segment's blocks are reserved when it is made (posix_fallocate), so a copy into
the mapped file can never meet a full disk (which would kill the process with SIGBUS).
Here a child process gets a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) below a
segment's size once its first segment is made: that stands in for a full disk, making the
next segment fails with EFBIG as it would with ENOSPC.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LIMITS = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from raetlike.errors import BackpressureError, StoreFullError
    from raetlike.journal import FsyncPolicy

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    directory = Path(sys.argv[1])
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

    def no_room(size):  # files past size cannot be made: the next segment will not fit
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    def room():
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
""")


def _run(child: str, directory: Path) -> str:
    """Run ``child`` (after :data:`_LIMITS`) on ``directory``; its output."""
    done = subprocess.run([sys.executable, "-c", _LIMITS + child, str(directory)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


_CHILD = textwrap.dedent("""
    from raetlike.durable import DurableOutbox

    outbox = DurableOutbox(directory, fsync=FsyncPolicy.NEVER, segment_bytes=64 * 1024)
    no_room(32 * 1024)
    stored = refused = 0
    for n in range(2000):
        try:
            outbox.put("r", b"m" * 100, 1.0)
            stored += 1
        except StoreFullError as exc:
            assert isinstance(exc, BackpressureError)
            refused += 1
            message = str(exc)
    room()
    after = outbox.put("r", b"after", 1.0)  # room again: the next put makes the segment
    outbox.close()
    again = DurableOutbox(directory, fsync=FsyncPolicy.NEVER, segment_bytes=64 * 1024)
    bodies = [s.body for s in again.pending()]
    print(stored, refused, len(bodies), bodies[-1] == b"after", again.store == outbox.store)
    print(message)
""")


def test_a_full_disk_refuses_puts_and_the_store_goes_on_when_there_is_room(
        tmp_path: Path) -> None:
    counts, message = _run(_CHILD, tmp_path / "store").splitlines()
    stored, refused, held, last_is_after, same_store = counts.split()
    assert int(stored) > 0
    assert int(refused) > 0
    assert int(stored) + int(refused) == 2000
    assert int(held) == int(stored) + 1  # every accepted one, and the one after
    assert last_is_after == "True"
    assert same_store == "True"
    assert "no room for a segment" in message


_SEEN_CHILD = textwrap.dedent("""
    from raetlike.durable import DurableSeen

    seen = DurableSeen(directory, fsync=FsyncPolicy.NEVER, segment_bytes=16 * 1024)
    no_room(8 * 1024)
    refused = 0
    for n in range(1, 3001):
        seen.admit("sender", 7, n, journaled=False)
        try:
            seen.commit()
        except StoreFullError:
            refused += 1
    room()
    seen.commit()  # room again: every mark that waited goes down now
    seen.close()
    again = DurableSeen(directory, fsync=FsyncPolicy.NEVER, segment_bytes=16 * 1024)
    repeats = sum(not again.admit("sender", 7, n, journaled=False) for n in range(1, 3001))
    print(refused, repeats)
""")


def test_marks_the_disk_had_no_room_for_wait_and_are_written_when_it_has(
        tmp_path: Path) -> None:
    refused, repeats = (int(n) for n in _run(_SEEN_CHILD, tmp_path / "seen").split())
    assert refused > 0  # the disk was full for a while
    assert repeats == 3000  # and no mark was lost to it
