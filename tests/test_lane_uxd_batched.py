"""The lane driver's batched syscalls (``raetlike._cmmsg``: recvmmsg, sendmmsg) hand the
stack what a ``recvfrom``/``sendto`` per datagram hands it, and report the same refusals."""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raetlike import uxd
from raetlike.uxd import UxdDriver

pytestmark = pytest.mark.skipif(not uxd.BATCHED,
                                reason="raetlike._cmmsg not built, or the pure path asked for")

SOCKET_LIMIT = 1 << 20  # socket buffers that hold the 100 KB datagram below


class Recorder:
    """A lane-like stack that keeps what it is given and sends what it is told to."""

    def __init__(self, path: str) -> None:
        self.name = "recorder"
        self.path = path
        self.received: list[tuple[bytes, Any]] = []
        self.outgoing: list[tuple[bytes, str]] = []
        self.failed: list[tuple[str, bytes, int]] = []
        self.ready: list[str] = []

    def receive_datagram(self, data: bytes, source: str | None, now: float) -> None:  # noqa: ARG002
        self.received.append((data, source))

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, str]]:  # noqa: ARG002
        out, self.outgoing = self.outgoing, []
        return out

    def send_failed(self, address: str, data: bytes, error: int, now: float) -> None:  # noqa: ARG002
        self.failed.append((address, data, error))

    def send_ready(self, address: str, now: float) -> None:  # noqa: ARG002
        self.ready.append(address)

    def get_timer(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass


@contextlib.contextmanager
def _driver(path: Path, *, batched: bool) -> Iterator[tuple[UxdDriver, Recorder]]:
    stack = Recorder(str(path))
    driver = UxdDriver(stack)
    driver.batched = batched
    try:
        yield driver, stack
    finally:
        driver.close()


def _readable(fileno: int, deadline: float) -> bool:
    remaining = deadline - time.monotonic()
    return remaining > 0 and bool(select.select([fileno], [], [], remaining)[0])


def _socket(path: Path | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_LIMIT)
    if path is not None:
        sock.bind(str(path))
    return sock


# what the senders send, a few at a time (a yard's queue holds max_dgram_qlen, often 10):
# pages of every size up to the largest (65,535) and one more (the mark of an oversize
# page, which the stack drops), and one past any slot (cut, as recvfrom cuts it)
PLAN = [(number % 3, f"page {number} ".encode() * (number % 5)) for number in range(40)]
PLAN[7:7] = [(0, b""), (1, b"x" * 65_535), (2, b"y" * 65_536), (0, b"z" * 100_000)]


def _received(tmp_path: Path, *, batched: bool) -> list[tuple[bytes, Any]]:
    name = "batched" if batched else "single"
    with contextlib.ExitStack() as stack:
        senders = [stack.enter_context(_socket(tmp_path / f"{name}-{n}.uxd")) for n in range(2)]
        senders.append(stack.enter_context(_socket()))  # unbound: no source
        driver, recorder = stack.enter_context(_driver(tmp_path / f"{name}.uxd",
                                                       batched=batched))
        deadline = time.monotonic() + 5.0
        for first in range(0, len(PLAN), 8):
            group = PLAN[first:first + 8]
            for index, data in group:
                senders[index].sendto(data, driver.path)
            while len(recorder.received) < first + len(group) and _readable(driver.fileno(),
                                                                            deadline):
                driver.receive(time.monotonic())
        return recorder.received


def test_both_paths_hand_the_stack_the_same_pages_from_the_same_senders(
        tmp_path: Path) -> None:
    batched = _received(tmp_path, batched=True)
    single = _received(tmp_path, batched=False)
    assert len(batched) == len(PLAN)
    assert [data for data, _ in batched] == [data[:65_536] for _, data in PLAN]
    renamed = [(data, source.replace("/single", "/batched") if source else source)
               for data, source in single]
    assert batched == renamed
    assert {source for _, source in batched} == {
        str(tmp_path / "batched-0.uxd"), str(tmp_path / "batched-1.uxd"), None}


def _refusals(tmp_path: Path, *, batched: bool) -> tuple[int, list[tuple[str, bytes, int]],
                                                         list[bytes], list[bytes], list[str]]:
    """Pages to a yard that reads nothing, interleaved with pages to one that reads, to a
    path where nobody listens and to one too long for a socket."""
    name = "batched" if batched else "single"
    with contextlib.ExitStack() as stack:
        full = stack.enter_context(_socket(tmp_path / f"{name}-full.uxd"))
        other = stack.enter_context(_socket(tmp_path / f"{name}-other.uxd"))
        driver, recorder = stack.enter_context(_driver(tmp_path / f"{name}.uxd",
                                                       batched=batched))
        to_full, to_other = str(tmp_path / f"{name}-full.uxd"), str(tmp_path / f"{name}-other.uxd")
        recorder.outgoing = [(f"full {n}".encode(), to_full) for n in range(30)]
        recorder.outgoing[12:12] = [(b"other 1", to_other)]
        recorder.outgoing += [(b"nobody", str(tmp_path / "nobody.uxd")),
                              (b"too long", str(tmp_path / ("x" * 120))),
                              (b"other 2", to_other)]
        sent = driver.send(0.0)
        queued = _drain(full)
        other_got = _drain(other)
        # the full yard's queue has room again: the driver's descriptor turns readable
        deadline = time.monotonic() + 5.0
        while not recorder.ready and _readable(driver.fileno(), deadline):
            driver.receive(0.0)
        failed = [(address.replace(f"/{name}", "/"), data, error)
                  for address, data, error in recorder.failed]
        ready = [address.replace(f"/{name}", "/") for address in recorder.ready]
        return sent, failed, queued, other_got, ready


def _drain(sock: socket.socket) -> list[bytes]:
    got = []
    while True:
        try:
            got.append(sock.recv(200, socket.MSG_DONTWAIT))
        except BlockingIOError:
            return got


def test_a_full_queue_and_bad_paths_are_refused_alike_on_both_paths(tmp_path: Path) -> None:
    batched = _refusals(tmp_path, batched=True)
    assert batched == _refusals(tmp_path, batched=False)
    sent, failed, queued, other_got, ready = batched
    assert 0 < len(queued) < 30  # the queue took a few, then said EAGAIN
    assert queued == [f"full {n}".encode() for n in range(len(queued))]
    assert other_got == [b"other 1", b"other 2"]  # a full yard holds no one else back
    assert sent == len(queued) + 2
    assert [(data, error) for _, data, error in failed] == [
        (f"full {len(queued)}".encode(), errno.EAGAIN),  # once: its later pages wait
        (b"nobody", errno.ENOENT),
        (b"too long", errno.EIO),  # sendto's own "AF_UNIX path too long"
    ]
    assert ready == [str(tmp_path / "-full.uxd")]


# -- the C module alone --------------------------------------------------------------------

cmmsg: Any = pytest.importorskip("raetlike._cmmsg") if uxd.BATCHED else None


@contextlib.contextmanager
def _pair(tmp_path: Path) -> Iterator[tuple[socket.socket, socket.socket, str]]:
    """A sender and a receiver bound at a path (returned too)."""
    path = str(tmp_path / "receiver.uxd")
    receiver = _socket()
    sender = _socket()
    try:
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_LIMIT)
        receiver.bind(path)
        yield sender, receiver, path
    finally:
        sender.close()
        receiver.close()


def test_a_datagram_larger_than_its_slot_is_cut_as_recvfrom_cuts_it(tmp_path: Path) -> None:
    buffer = cmmsg.Receiver()
    with _pair(tmp_path) as (sender, receiver, path):
        for data in (b"0123456789" * 10, b"abcdefghij" * 10, b"b" * 200_000):
            sender.sendto(data, path)
        assert buffer.recv_batch(receiver.fileno(), 1, 10) == [None]  # an unbound sender
        assert buffer.take(0) == b"0123456789"
        assert receiver.recvfrom(10) == (b"abcdefghij", None)
        assert buffer.recv_batch(receiver.fileno(), 64, cmmsg.MAX_SIZE) == [None]
        assert buffer.take(0) == b"b" * cmmsg.MAX_SIZE
        with pytest.raises(IndexError):
            buffer.take(1)
        assert buffer.recv_batch(receiver.fileno(), 64, cmmsg.MAX_SIZE) == []  # EAGAIN
        with pytest.raises(IndexError):
            buffer.take(0)


def test_an_abstract_sender_is_named_as_recvfrom_names_it(tmp_path: Path) -> None:
    with _pair(tmp_path) as (sender, receiver, path):
        sender.bind(b"\0raetlike-test-" + str(os.getpid()).encode())
        for _ in range(2):
            sender.sendto(b"hello", path)
        buffer = cmmsg.Receiver()
        assert buffer.recv_batch(receiver.fileno(), 1, 100) == [receiver.recvfrom(100)[1]]
        assert buffer.take(0) == b"hello"


@pytest.mark.parametrize(("count", "size"), [
    (0, 100), (65, 100), (-1, 100), (1, 0), (1, 65_537), (1, -5), (2**40, 1), (1, 2**40)])
def test_hostile_counts_and_sizes_are_refused_cleanly(tmp_path: Path, count: int,
                                                      size: int) -> None:
    with _pair(tmp_path) as (_, receiver, _), pytest.raises(ValueError, match="count must be"):
        cmmsg.Receiver().recv_batch(receiver.fileno(), count, size)


def test_bad_descriptors_and_arguments_raise_not_crash() -> None:
    buffer = cmmsg.Receiver()
    with pytest.raises(OSError, match="Bad file descriptor"):
        buffer.recv_batch(-1, 1, 1)
    reading, writing = os.pipe()
    try:
        with pytest.raises(OSError, match="non-socket") as not_socket:
            buffer.recv_batch(reading, 1, 1)
        assert not_socket.value.errno == errno.ENOTSOCK
        assert cmmsg.send_batch(writing, [(b"x", "/nowhere")], 0) == (0, errno.ENOTSOCK)
    finally:
        os.close(reading)
        os.close(writing)
    with pytest.raises(OverflowError):
        buffer.recv_batch(2**80, 1, 1)
    with pytest.raises(TypeError):
        buffer.recv_batch("3", 1, 1)
    with pytest.raises(TypeError, match="no arguments"):
        cmmsg.Receiver(1)
    with pytest.raises(TypeError):
        cmmsg.send_batch(0, "not a list", 0)
    for start in (-1, 2):
        with pytest.raises(ValueError, match="start"):
            cmmsg.send_batch(0, [(b"x", "/nowhere")], start)


@pytest.mark.parametrize("datagram", [
    1, (b"x",), ("text", "/run/x"), (bytearray(b"x"), "/run/x"), (b"x", b"/run/x"),
    (b"x", ""), (b"x", "/run/" + "x" * 103), (b"x", "/run/\x00x"), (b"x", "\udcff\ud800"),
    (b"x", ("127.0.0.1", 9)), (b"x", None),
])
def test_anything_but_bytes_to_a_path_is_left_to_sendto(tmp_path: Path,
                                                         datagram: object) -> None:
    with _pair(tmp_path) as (sender, _, _):
        assert cmmsg.send_batch(sender.fileno(), [datagram], 0) == (0, cmmsg.SEND_ALONE)


def test_a_batch_goes_until_the_first_refusal_and_says_why(tmp_path: Path) -> None:
    with _pair(tmp_path) as (sender, receiver, path):
        sender.setblocking(False)
        pages = [(f"page {n}".encode(), path) for n in range(100)]
        taken, error = cmmsg.send_batch(sender.fileno(), pages, 0)
        assert 0 < taken < 100
        assert error == errno.EAGAIN
        assert _drain(receiver) == [data for data, _ in pages[:taken]]
        assert cmmsg.send_batch(sender.fileno(), pages, 100) == (0, 0)  # nothing from there
