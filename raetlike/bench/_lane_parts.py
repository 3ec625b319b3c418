"""The lane's cost per part, each alone in one process (``tools/bench_lane.py --parts``): an
idle loop round, the stack's work per message, and one datagram through a socket."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable

from lane import LaneConfig, LaneStack, LocalYard
from raetlike.bench._lane import LANE, MAX_DATAGRAM
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
from raetlike.wire.kinds import PageKind

__all__ = ["parts", "parts_table"]


def _best(action: Callable[[], object], times: int, repeat: int = 5) -> float:
    """Fewest CPU µs per call of ``action`` over ``repeat`` runs of ``times`` calls."""
    best = math.inf
    for _ in range(repeat):
        began = time.process_time()
        for _ in range(times):
            action()
        best = min(best, time.process_time() - began)
    return best / times * 1e6


def parts(count: int, size: int, kind: PageKind = PageKind.JSON) -> dict[str, float]:
    """CPU µs of each part of a lane message and of a loop round, measured alone.

    - ``idle_round``: ``Loop.run_once(0)`` with one idle ``UxdDriver`` (nothing
      to read, send or time): what a round costs besides the datagrams.
    - ``transmit``, ``hand_out`` (``datagrams_to_send``, 16 pages a call, as a
      busy yard's window), ``receive`` (``receive_datagram`` + ``next_event``):
      the stack's work per message, no sockets.
    - ``sendto``, ``recvfrom``: one datagram of the page's size through a real
      socket pair (what the raw loop pays per datagram), and ``eagain``: a
      ``recvfrom`` on an empty socket (the exception each drain ends with).
    """
    directory = tempfile.mkdtemp(prefix="bench-lane-parts-")
    os.chmod(directory, 0o700)
    try:
        out: dict[str, float] = {}
        loop = Loop()
        loop.add(UxdDriver(LaneStack(LocalYard("idle", LANE, directory))))
        out["idle_round"] = _best(lambda: loop.run_once(0), 20_000)
        loop.close()
        message = {"payload": "x" * size}
        config = LaneConfig(page_kind=kind, outbox_limit=count + 1)
        source = LaneStack(LocalYard("source", LANE, directory), config)
        sink = LaneStack(LocalYard("sink", LANE, directory), config)
        began = time.process_time()
        for _ in range(count):
            source.transmit(message, to="sink")
        out["transmit"] = (time.process_time() - began) / count * 1e6
        source.yards["sink"].window = 16
        pages: list[bytes] = []
        began = time.process_time()
        while batch := source.datagrams_to_send(1.0):
            source.yards["sink"].window = 16
            pages.extend(page for page, _ in batch)
        out["hand_out"] = (time.process_time() - began) / count * 1e6
        began = time.process_time()
        for page in pages:
            sink.receive_datagram(page, source.path, 1.0)
        while sink.next_event() is not None:
            pass
        out["receive"] = (time.process_time() - began) / count * 1e6
        out.update(_socket_parts(directory, pages[0]))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return out


def _socket_parts(directory: str, page: bytes) -> dict[str, float]:
    """``sendto`` and ``recvfrom`` CPU µs per datagram (batches of 10, the queue's size),
    and one ``recvfrom`` that finds the socket empty."""
    here = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    there = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    here.bind(os.path.join(directory, "parts.here"))
    there.bind(os.path.join(directory, "parts.there"))
    there.setblocking(False)
    address = os.path.join(directory, "parts.there")
    sent = received = 0.0
    batches = 2000
    for _ in range(batches):
        began = time.process_time()
        for _ in range(10):
            here.sendto(page, address)
        middle = time.process_time()
        for _ in range(10):
            there.recvfrom(MAX_DATAGRAM)
        sent += middle - began
        received += time.process_time() - middle

    def empty() -> None:
        with contextlib.suppress(BlockingIOError):
            there.recvfrom(MAX_DATAGRAM)
    eagain = _best(empty, 20_000)
    here.close()
    there.close()
    return {"sendto": sent / batches / 10 * 1e6, "recvfrom": received / batches / 10 * 1e6,
            "eagain": eagain}


def parts_table(figures: dict[str, float]) -> str:
    """The per-part figures as lines."""
    return "\n".join(f"{name:12}{value:8.2f} us" for name, value in figures.items())
