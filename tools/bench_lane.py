"""Measure lane throughput beside a raw UXD datagram loop, in the same run.

Each figure is one sender (this process) streaming to one receiver (a child
process) over UNIX datagram sockets in a temporary directory, then waiting
for the receiver's "done" datagram.  Both sides face the same kernel limit
(``/proc/sys/net/unix/max_dgram_qlen``: a receiver's queue holds that many
datagrams; a sender then gets EAGAIN).

- ``raw``: a bound, non-blocking socket ``sendto`` the receiver's path (as a
  yard sends), the datagrams exactly as large as the lane's pages; on EAGAIN
  it waits for the receiver's queue to have room (an unbound socket connected
  to the receiver polls writable then, the way the lane driver waits).  The
  receiver drains its socket and counts.
- ``lane``: a ``LaneStack`` + ``UxdDriver`` in a ``raetlike.run.Loop`` on
  both sides; the sender transmits ``{"payload": "x" * size}`` messages until
  the outbox is full, then runs the loop; the receiver counts
  ``MessageReceived`` events.
- ``16 MB``: one 16 MiB message (``payload`` string) through the lane, and
  raw: the same number and size of datagrams its pages make.

Usage: ``.venv/bin/python tools/bench_lane.py [--count 100000] [--size 100]
[--repeat 3] [--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lane import LaneStack, LocalYard, events
from raetlike.errors import BackpressureError
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
from raetlike.wire.page import paginate

ROOT = Path(__file__).resolve().parent.parent
LANE = "bench"
BIG = 16 * 1024 * 1024
TIMEOUT = 120.0
MAX_DATAGRAM = 65536


def _queue_limit() -> str:
    try:
        return Path("/proc/sys/net/unix/max_dgram_qlen").read_text().strip()
    except OSError:
        return "?"


# -- receivers (child processes) ---------------------------------------------


def _raw_receiver(directory: str, total_bytes: int) -> None:
    """Count bytes received on ``raw.sink``; send 'done' to the sender once all are in."""
    path = os.path.join(directory, "raw.sink.uxd")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    print("ready", flush=True)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    got = 0
    source = ""
    while got < total_bytes:
        poller.poll()
        while True:
            try:
                data, source = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                break
            got += len(data)
    sock.setblocking(True)
    sock.sendto(b"done", source)
    sock.close()
    os.unlink(path)


def _lane_receiver(directory: str, count: int) -> None:
    """Count messages on the yard ``sink``; answer ``{"done": n}`` once ``count`` arrived."""
    stack = LaneStack(LocalYard("sink", LANE, directory))
    loop = Loop()
    loop.add(UxdDriver(stack))
    print("ready", flush=True)
    got = 0
    sender = ""

    def counted() -> bool:
        nonlocal got, sender
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                got += 1
                sender = event.yard
        return got >= count

    loop.run_until(counted, timeout=TIMEOUT)
    stack.transmit({"done": got}, to=sender)
    loop.run_until(lambda: stack.get_timer() is None, timeout=5)
    loop.close()


# -- senders (this process) --------------------------------------------------


def _start(role: str, directory: str, amount: int) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--role", role, "--dir", directory, "--amount", str(amount)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if child.stdout is None or child.stdout.readline().strip() != "ready":
        raise SystemExit(f"{role} receiver did not start")
    return child


def raw_send(directory: str, datagrams: list[bytes]) -> float:
    """Seconds to stream ``datagrams`` to a raw receiver and hear it has them all."""
    path = os.path.join(directory, "raw.sink.uxd")
    child = _start("raw", directory, sum(len(d) for d in datagrams))
    own = os.path.join(directory, "raw.source.uxd")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(own)
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    waiter = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    waiter.connect(path)
    waiter.setblocking(False)
    poller = select.poll()
    start = time.perf_counter()
    index = 0
    while index < len(datagrams):
        try:
            sock.sendto(datagrams[index], path)
        except OSError as exc:
            if exc.errno not in {errno.EAGAIN, errno.ENOBUFS}:
                raise
            poller.register(waiter, select.POLLOUT)
            poller.poll(1000)
            poller.unregister(waiter)
            continue
        index += 1
    sock.setblocking(True)
    sock.settimeout(TIMEOUT)
    if sock.recv(16) != b"done":
        raise SystemExit("raw receiver said something else")
    seconds = time.perf_counter() - start
    child.wait(timeout=10)
    waiter.close()
    sock.close()
    os.unlink(own)
    return seconds


def lane_send(directory: str, messages: list[dict[str, Any]]) -> float:
    """Seconds to transmit ``messages`` to a lane receiver and get its answer."""
    child = _start("lane", directory, len(messages))
    stack = LaneStack(LocalYard("source", LANE, directory))
    loop = Loop()
    loop.add(UxdDriver(stack))
    answer: list[dict[str, Any]] = []

    def answered() -> bool:
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                answer.append(event.body)
        return bool(answer)

    start = time.perf_counter()
    index = 0
    while index < len(messages):
        try:
            stack.transmit(messages[index], to="sink")
        except BackpressureError:
            loop.run_once(max_wait=1.0)
            continue
        index += 1
    if not loop.run_until(answered, timeout=TIMEOUT):
        raise SystemExit("lane receiver did not answer")
    seconds = time.perf_counter() - start
    if answer[0].get("done") != len(messages):
        raise SystemExit(f"lane receiver answered {answer[0]}")
    child.wait(timeout=10)
    loop.close()
    return seconds


# -- the table ---------------------------------------------------------------


def _best(repeat: int, run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(repeat))


def measure(count: int, size: int, repeat: int, *, big: bool = True) -> dict[str, Any]:
    """The figures: messages (or datagrams) per second and 16 MB seconds, raw and lane."""
    directory = tempfile.mkdtemp(prefix="bench-lane-")
    os.chmod(directory, 0o700)
    try:
        message = {"payload": "x" * size}
        small = paginate("source", "sink", "0" * 18, 1, message)
        small_pages = [small[0]] * count
        figures: dict[str, Any] = {
            "max_dgram_qlen": _queue_limit(),
            "count": count, "size": size, "page_bytes": len(small[0]), "repeat": repeat,
        }
        raw = _best(repeat, lambda: raw_send(directory, small_pages))
        lane = _best(repeat, lambda: lane_send(directory, [message] * count))
        figures["raw_per_second"] = count / raw
        figures["lane_per_second"] = count / lane
        figures["ratio"] = raw / lane
        if big:
            huge = {"payload": "x" * BIG}
            pages = paginate("source", "sink", "0" * 18, 1, huge)
            figures["big_pages"] = len(pages)
            figures["big_raw_seconds"] = _best(repeat, lambda: raw_send(directory, pages))
            figures["big_lane_seconds"] = _best(repeat, lambda: lane_send(directory, [huge]))
            figures["big_ratio"] = figures["big_raw_seconds"] / figures["big_lane_seconds"]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return figures


def table(figures: dict[str, Any]) -> str:
    """The figures as a small text table."""
    lines = [
        (f"max_dgram_qlen {figures['max_dgram_qlen']}, {figures['count']} messages of "
         f"{figures['size']} B ({figures['page_bytes']} B pages), median of {figures['repeat']}"),
        f"{'':28}{'raw UXD':>14}{'lane':>14}{'lane/raw':>10}",
        (f"{'100 B messages/s':28}{figures['raw_per_second']:>14,.0f}"
         f"{figures['lane_per_second']:>14,.0f}{figures['ratio']:>10.2f}"),
    ]
    if "big_pages" in figures:
        lines.append(
            f"{'16 MiB message, s (' + str(figures['big_pages']) + ' pages)':28}"
            f"{figures['big_raw_seconds']:>14.3f}{figures['big_lane_seconds']:>14.3f}"
            f"{figures['big_ratio']:>10.2f}")
    return "\n".join(lines)


def main() -> None:
    """Run the receiver role, or the whole measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-big", action="store_true", help="skip the 16 MiB message")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--role", choices=["raw", "lane"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--amount", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "raw":
        _raw_receiver(args.dir, args.amount)
        return
    if args.role == "lane":
        _lane_receiver(args.dir, args.amount)
        return
    figures = measure(args.count, args.size, args.repeat, big=not args.no_big)
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(figures) if args.json else table(figures))


if __name__ == "__main__":
    main()
