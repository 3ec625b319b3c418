"""The writer's batch (the C one and its Python twin) stays sound under odd callers: a
descriptor borrowed from another class, a signal handler or a thread touching it while
its write() waits, a node whose hash runs Python."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import JournalWriter, read_journal
from raetlike.journal import _delivery as delivery_module
from raetlike.journal._delivery import COMPILED
from raetlike.journal._writer import _CBATCH, _PyBatch
from road.events import MessageReceived

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]
FIELDS = ("remote", "body", "transaction_id", "segments", "session_id")


def _writer(tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> JournalWriter:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    elif not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    writer = JournalWriter(tmp_path, "main")
    assert (type(writer._batch).__name__ == "Batch") is compiled  # the path under test
    return writer


def _batch(compiled: bool) -> Any:
    if not compiled:
        return _PyBatch()
    if _CBATCH is None:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    return _CBATCH({}, lambda *_args, **_kwargs: None, lambda: None)


@pytest.mark.parametrize("compiled", PATHS)
def test_slots_borrowed_from_an_unrelated_class_are_not_read_at_their_offsets(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """C(B) given A's member descriptors: Python refuses to read them on a C (TypeError);
    the C batch read B's slots at A's offsets as if they were the fields (and past the
    object when A's are further)."""

    class A:
        __slots__ = FIELDS

    class B:
        __slots__ = ("x0", "x1", "x2", "x3", "x4")

    class C(B):
        __slots__ = ()

    for name in FIELDS:
        setattr(C, name, A.__dict__[name])
    foreign: Any = C()
    # A's slots lie in its names' sorted order (body, remote, segments, session_id,
    # transaction_id): B's at those offsets hold what A's would
    foreign.x0, foreign.x1, foreign.x2, foreign.x3, foreign.x4 = b"abc", "peer", 1, 9, 7
    writer = _writer(tmp_path, compiled, monkeypatch)
    event = MessageReceived(remote="peer", body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    for _ in range(2):  # the first opens the segment, the second keeps the pair's prefix
        writer.record_delivery("main", event, 1.7e9)
    assert writer._plain.prefixes["main"]["peer"]
    for _ in range(3):
        with pytest.raises(TypeError, match="doesn't apply"):
            writer.record_delivery("main", foreign, 1.7e9)
    writer.close()
    assert len(read_journal([tmp_path]).records) == 2


def _fill_pipe(batch: Any) -> tuple[int, int, bytes]:
    """A pipe, and 200,000 bytes (2,000 lines) waiting in ``batch``: more than the pipe
    holds, so a write() of them waits for a reader."""
    read, write = os.pipe()
    for n in range(2000):
        batch.append(b"%099d\n" % n)
    return read, write, batch.getvalue()


def _drain(read: int, expected: int) -> bytes:
    got = bytearray()
    while len(got) < expected:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        got += chunk
    return bytes(got)


@pytest.mark.parametrize("compiled", PATHS)
@pytest.mark.parametrize("touch", ["clear", "append", "write"])
def test_a_signal_handler_cannot_change_a_batch_while_it_is_written(
        compiled: bool, touch: str) -> None:
    """write() waits on a full pipe; a signal handler runs there (EINTR) and touches the
    batch: that raises BufferError out of write(), which counts what went out and keeps
    the rest, whole (before, on the C batch, clear() made its size negative)."""
    batch = _batch(compiled)
    read, write, data = _fill_pipe(batch)
    seen: list[BaseException] = []
    handled, finished = threading.Event(), threading.Event()
    drained = bytearray()

    def handler(_signum: int, _frame: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        handled.set()
        try:
            if touch == "clear":
                batch.clear()
            elif touch == "append":
                batch.append(b"y\n")
            else:
                batch.write(write)
        except BufferError as exc:
            seen.append(exc)
            raise

    def unblock() -> None:  # a write that was not stopped ends once a reader comes
        if not handled.wait(30.0) or finished.wait(2.0):
            return
        while not finished.is_set():
            if select.select([read], [], [], 0.05)[0]:
                drained.extend(os.read(read, 1 << 16))

    reader = threading.Thread(target=unblock)
    reader.start()
    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    try:
        with pytest.raises(BufferError):
            batch.write(write)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        finished.set()
        reader.join()
    try:
        assert len(seen) == 1
        assert drained == b""  # the write stopped at the handler's error
        assert batch.getvalue() == data[batch.written:]
        assert len(batch) == len(data) - batch.written
        assert batch.written_records + batch.records == 2000
        assert batch.written_records == data.count(b"\n", 0, batch.written)
        if compiled:  # what went out is counted: the handler runs at EINTR, in write()
            assert 0 < batch.written < len(data)
            assert _drain(read, batch.written) == data[:batch.written]
        # (the pure batch's os.write can return a short count and a handler's error be
        # raised before it is added up: those bytes are then not counted as written)
    finally:
        os.close(write)
        os.close(read)


def _waiting(descriptor: int) -> int:
    count = bytearray(4)
    fcntl.ioctl(descriptor, termios.FIONREAD, count)
    return int.from_bytes(count, "little")


@pytest.mark.parametrize("compiled", PATHS)
def test_another_thread_cannot_change_a_batch_while_it_is_written(compiled: bool) -> None:
    """write() lets other threads run while it waits on the disk; one that appends or
    clears gets BufferError (before, on the C batch, an append could move the buffer
    under the write: a use after free), and the pipe gets exactly the batch's bytes."""
    batch = _batch(compiled)
    read, write, data = _fill_pipe(batch)
    errors: list[BaseException] = []

    def write_all() -> None:
        try:
            batch.write(write)
        except BaseException as exc:  # noqa: BLE001 - told to the test below
            errors.append(exc)

    writer = threading.Thread(target=write_all)
    writer.start()
    try:
        deadline = time.monotonic() + 30.0
        while _waiting(read) < 4096 and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.05)  # the pipe is full: the write waits (for the reader below)
        with pytest.raises(BufferError):
            batch.append(b"y\n")
        with pytest.raises(BufferError):
            batch.clear()
        out = _drain(read, len(data))
    finally:
        writer.join(30.0)
        os.close(read)
        os.close(write)
    assert errors == []
    assert out == data
    assert (len(batch), batch.records, batch.written, batch.written_records) \
        == (0, 0, len(data), 2000)


def test_a_node_whose_hash_changes_the_delivery_does_not_free_the_remote_in_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C batch held the delivery's remote as a borrowed slot pointer while it looked
    the node up; a node of a str subclass runs Python there, which can replace the
    remote (freeing it) and put another string in its memory: the line then named a
    remote the delivery never had.  Now such a node goes to the general path."""
    writer = _writer(tmp_path, True, monkeypatch)
    for remote in ("peerA", "peerA", "peerB", "peerB"):  # both pairs' prefixes are kept
        writer.record_delivery("main", MessageReceived(
            remote=remote, body=b"x", session_id=1, transaction_id=1, segments=1), 1.7e9)
    assert writer._plain.prefixes["main"]["peerA"]
    assert writer._plain.prefixes["main"]["peerB"]
    kept: list[str] = []
    event = MessageReceived(remote="".join(["pee", "rA"]), body=b"x", session_id=1,
                            transaction_id=2, segments=1)

    class Node(str):
        def __hash__(self) -> int:
            object.__setattr__(event, "remote", "peerC")  # the old remote is freed ...
            kept.extend("".join(["pee", "rB"]) for _ in range(4))  # ... and its memory reused
            return str.__hash__(self)

        def __eq__(self, other: object) -> bool:
            return str.__eq__(self, other)

    writer.record_delivery(Node("main"), event, 1.7e9)
    writer.close()
    sources = [r.source.estate for r in read_journal([tmp_path]).records]
    assert sources[:4] == ["peerA", "peerA", "peerB", "peerB"]
    assert sources[4] in ("peerA", "peerC")
    assert len(sources) == 5
