"""recvmmsg's buffer belongs to one driver (``raetlike._cmmsg.Receiver``): two lane drivers
on two threads of one process each hand their stack their own datagrams, never the other's
and never an IndexError.  (One module-wide buffer was filled by one thread's recv_batch
between another's recv_batch and take.)"""
from __future__ import annotations

import contextlib
import gc
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raetlike import uxd
from raetlike.uxd import UxdDriver

batched_only = pytest.mark.skipif(not uxd.BATCHED,
                                  reason="raetlike._cmmsg not built, or the pure path asked for")
PATHS = [pytest.param(False, id="recvfrom"),
         pytest.param(True, id="recvmmsg", marks=batched_only)]
# datagrams to each driver: the old code raised IndexError here in 5 runs of 6 (the test after
# this one makes the interleaving on purpose, and failed there every time)
COUNT = 50_000


class Recorder:
    """A lane-like stack that counts what it is given and keeps what is wrong with it."""

    def __init__(self, path: str, tag: bytes, sender: str) -> None:
        self.name = "recorder"
        self.path = path
        self.tag = tag
        self.sender = sender
        self.count = 0
        self.wrong: list[tuple[bytes, Any]] = []

    def receive_datagram(self, data: bytes, source: str | None, now: float) -> None:  # noqa: ARG002
        self.count += 1
        if not data.startswith(self.tag) or source != self.sender:
            self.wrong.append((data[:20], source))

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, str]]:  # noqa: ARG002
        return []

    def send_failed(self, address: str, data: bytes, error: int, now: float) -> None:
        pass

    def send_ready(self, address: str, now: float) -> None:
        pass

    def get_timer(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass


@contextlib.contextmanager
def _switching_often() -> Iterator[None]:
    """Let threads switch every microsecond, as in a busy process, so they interleave a lot."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.parametrize("batched", PATHS)
def test_two_drivers_on_two_threads_each_get_only_their_own_datagrams(
        tmp_path: Path, batched: bool) -> None:
    deadline = time.monotonic() + 60.0
    names = ("alpha", "beta")
    recorders = {name: Recorder(str(tmp_path / f"{name}.uxd"), name.encode() + b":",
                                str(tmp_path / f"{name}-sender.uxd")) for name in names}
    drivers = {name: UxdDriver(recorder) for name, recorder in recorders.items()}
    errors: list[tuple[str, str]] = []
    sent = {name: threading.Event() for name in names}

    def receive(name: str) -> None:
        driver, recorder = drivers[name], recorders[name]
        driver.batched = batched
        while recorder.count < COUNT and time.monotonic() < deadline:
            done = sent[name].is_set()  # then every datagram is in the socket's queue
            try:
                if select.select([driver.fileno()], [], [], 0.0 if done else 0.1)[0]:
                    driver.receive(time.monotonic())
                elif done:
                    return  # the queue is empty and nothing more comes: some were lost
            except Exception as exc:  # noqa: BLE001 - what escapes the driver is the finding
                errors.append((name, repr(exc)))

    def send(name: str) -> None:
        recorder = recorders[name]
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.bind(recorder.sender)
            sender.settimeout(10.0)  # a full queue blocks the sender until the driver reads
            for number in range(COUNT):
                if time.monotonic() > deadline:
                    break
                sender.sendto(recorder.tag + b"%d " % number + b"x" * 200, recorder.path)
        sent[name].set()

    threads = [threading.Thread(target=receive, args=(name,)) for name in names]
    threads += [threading.Thread(target=send, args=(name,)) for name in names]
    try:
        with _switching_often():
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        for driver in drivers.values():
            driver.close()
    assert errors == []
    for recorder in recorders.values():
        assert recorder.wrong == []
        assert recorder.count == COUNT


@pytest.mark.parametrize("batched", PATHS)
def test_a_driver_run_between_another_drivers_recvmmsg_and_its_takes_changes_nothing(
        tmp_path: Path, batched: bool) -> None:
    """The interleaving two threads make, made on purpose: a garbage collection callback
    runs beta's driver as soon as alpha's recvmmsg has emptied alpha's queue (the first
    collection after that is inside alpha's receive, before its datagrams are taken)."""
    names = ("alpha", "beta")
    recorders = {name: Recorder(str(tmp_path / f"{name}.uxd"), name.encode() + b":",
                                str(tmp_path / f"{name}-sender.uxd")) for name in names}
    drivers = {name: UxdDriver(recorder) for name, recorder in recorders.items()}
    senders = []
    armed = False

    def run_beta(phase: str, info: dict[str, int]) -> None:
        nonlocal armed
        alpha_waiting = select.select([drivers["alpha"].fileno()], [], [], 0)[0]
        if armed and phase == "start" and not alpha_waiting:
            armed = False
            drivers["beta"].receive(time.monotonic())

    threshold, enabled = gc.get_threshold(), gc.isenabled()
    try:
        for name, recorder in recorders.items():
            drivers[name].batched = batched
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            senders.append(sender)
            sender.bind(recorder.sender)
            for number in range(5):
                sender.sendto(recorder.tag + b"%d" % number, recorder.path)
        gc.callbacks.append(run_beta)
        gc.enable()
        gc.set_threshold(1)  # a collection at (almost) every allocation of a container
        armed = True
        drivers["alpha"].receive(time.monotonic())
    finally:
        gc.set_threshold(*threshold)
        if not enabled:
            gc.disable()
        gc.callbacks.remove(run_beta)
        for sock in senders:
            sock.close()
        for driver in drivers.values():
            driver.close()
    assert not armed  # beta's driver ran in alpha's receive
    for recorder in recorders.values():
        assert recorder.wrong == []
        assert recorder.count == 5


@batched_only
def test_each_receiver_keeps_its_own_batch(tmp_path: Path) -> None:
    """What two threads' drivers did in turn: one's recv_batch, the other's, then takes."""
    from raetlike import _cmmsg  # noqa: PLC0415 - built only where batched_only lets us in

    sockets = []
    try:
        for name in ("one", "two"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(str(tmp_path / f"{name}.uxd"))
            sockets.append(sock)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"for one", str(tmp_path / "one.uxd"))
            for number in range(3):
                sender.sendto(b"for two %d" % number, str(tmp_path / "two.uxd"))
        first, second = _cmmsg.Receiver(), _cmmsg.Receiver()
        assert first.recv_batch(sockets[0].fileno(), 64, 100) == [None]
        assert second.recv_batch(sockets[1].fileno(), 64, 100) == [None] * 3
        assert first.take(0) == b"for one"
        with pytest.raises(IndexError):
            first.take(1)
        assert [second.take(index) for index in range(3)] == [b"for two 0", b"for two 1",
                                                              b"for two 2"]
    finally:
        for sock in sockets:
            sock.close()
