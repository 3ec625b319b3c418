"""Measure lane throughput beside a raw UXD datagram loop and pyzmq ipc, in the same run.

``raetlike bench`` runs it for its lane rows; ``tools/bench_lane.py`` runs it alone.

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
- ``zmq``: pyzmq PUSH to PULL over ``ipc://`` (when pyzmq is installed), the
  same byte strings as ``raw``, default high-water marks.
- ``lane``: a ``LaneStack`` + ``UxdDriver`` in a ``raetlike.run.Loop`` on
  both sides; the sender transmits ``{"payload": "x" * size}`` messages until
  the outbox is full, then runs the loop; the receiver counts
  ``MessageReceived`` events.  Once the receiver granted it, the messages go
  in coalesced batches (docs/lane.md, "Coalescing").
- ``pages``: the same with ``LaneConfig(coalesce=False)`` on both sides: one
  page per datagram, as RAET yards get.
- ``16 MB``: one 16 MiB message (``payload`` string) through the lane, and
  raw: the same number and size of datagrams its pages make.

The kinds alternate (raw, zmq, pages, lane, raw, ...) so that all see the
same load on a shared host; each figure is the median over ``--repeat`` runs,
and each ratio is the median of the per-round ratios.  Beside wall time the
table gives the CPU each side spent per message (``getrusage`` user + system, from
the first datagram to the last, in each process), split into user and
system time, with how often each side slept (voluntary context switches)
and, for the lane, how many loop rounds it ran, per 100 messages.  ``--kind msgpack`` sends
msgpack pages (``LaneConfig(page_kind=PageKind.MSGPACK)``; raw datagrams are
then as large as those pages).

``--parts`` instead measures each part alone, in this process: an idle
loop round, the stack's work per message (transmit, hand-out, receive) and
a ``sendto``/``recvfrom`` of one page (:mod:`raetlike.bench._lane_parts`).

Usage: ``.venv/bin/python tools/bench_lane.py [--count 100000] [--size 100]
[--repeat 5] [--kind json|msgpack] [--no-big] [--json] [--parts]``
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import resource
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.bench._common import UNPINNED, BenchOptions, Cpus, Progress, pin, silent
from raetlike.errors import BackpressureError
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import paginate

LANE = "bench"
BIG = 16 * 1024 * 1024
TIMEOUT = 120.0
MAX_DATAGRAM = 65536


def _say(line: str) -> None:
    """One line on stdout, at once (a receiver's "ready" and usage lines are read by the sender)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _zmq_available() -> bool:
    try:
        import zmq  # noqa: F401, PLC0415 - a measured peer, installed with the bench extra
    except ImportError:
        return False
    return True


def _queue_limit() -> str:
    try:
        return Path("/proc/sys/net/unix/max_dgram_qlen").read_text().strip()
    except OSError:
        return "?"


@dataclass(frozen=True, slots=True)
class Usage:
    """What one process spent over a stream: CPU seconds (user, system), sleeps, rounds."""

    user: float = 0.0
    system: float = 0.0
    sleeps: int = 0
    """Voluntary context switches: times the process blocked (in the selector or poll)."""
    rounds: int = 0
    """Loop rounds (lane only)."""

    @property
    def cpu(self) -> float:
        """User + system seconds."""
        return self.user + self.system

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.user - other.user, self.system - other.system,
                     self.sleeps - other.sleeps, self.rounds - other.rounds)

    def line(self) -> str:
        """The usage as the line a receiver prints for the sender to read."""
        return f"usage {self.user} {self.system} {self.sleeps} {self.rounds}"


def _usage(rounds: int = 0) -> Usage:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(own.ru_utime, own.ru_stime, own.ru_nvcsw, rounds)


# -- receivers (child processes) ---------------------------------------------


def _raw_receiver(directory: str, total_bytes: int) -> None:
    """Count bytes received on ``raw.sink``; send 'done' to the sender once all are in."""
    path = os.path.join(directory, "raw.sink.uxd")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    _say("ready")
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    got = 0
    source = ""
    start = Usage()
    while got < total_bytes:
        poller.poll()
        if not got:
            start = _usage()
        while True:
            try:
                data, source = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                break
            got += len(data)
    spent = _usage() - start
    sock.setblocking(True)
    sock.sendto(b"done", source)
    sock.close()
    os.unlink(path)
    _say(spent.line())


def _zmq_receiver(directory: str, count: int) -> None:
    """PULL ``count`` messages over ipc; then PUSH 'done' back to the sender."""
    import zmq  # noqa: PLC0415 - a measured peer, installed with the bench extra

    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(f"ipc://{directory}/zmq.sink")
    _say("ready")
    got = 0
    start = Usage()
    while got < count:
        pull.recv()
        if not got:
            start = _usage()
        got += 1
    spent = _usage() - start
    push = context.socket(zmq.PUSH)
    push.connect(f"ipc://{directory}/zmq.done")
    push.send(b"done")
    push.close(linger=2000)
    pull.close(linger=0)
    context.term()
    _say(spent.line())


def _lane_receiver(directory: str, count: int, kind: PageKind, coalesce: bool = True) -> None:
    """Count messages on the yard ``sink``; answer ``{"done": n}`` once ``count`` arrived."""
    stack = LaneStack(LocalYard("sink", LANE, directory),
                      LaneConfig(page_kind=kind, coalesce=coalesce))
    loop = Loop()
    loop.add(UxdDriver(stack))
    _say("ready")
    got = 0
    sender = ""
    start = Usage()

    def counted() -> bool:
        nonlocal got, sender, start
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                if not got:
                    start = _usage(loop.rounds)
                got += 1
                sender = event.yard
        return got >= count

    loop.run_until(counted, timeout=TIMEOUT)
    spent = _usage(loop.rounds) - start
    stack.transmit({"done": got}, to=sender)
    loop.run_until(lambda: stack.get_timer() is None, timeout=5)
    loop.close()
    _say(spent.line())


# -- senders (this process) --------------------------------------------------


def _start(role: str, directory: str, amount: int, kind: PageKind = PageKind.JSON,
           cpu: int | None = None) -> subprocess.Popen[str]:
    child = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", "from raetlike.bench._lane import main; main()", "--role", role,
         "--dir", directory, "--amount", str(amount), "--kind", kind.name.lower()],
        stdout=subprocess.PIPE, text=True)
    pin(child.pid, cpu)
    if child.stdout is None or child.stdout.readline().strip() != "ready":
        raise SystemExit(f"{role} receiver did not start")
    return child


def _finish(child: subprocess.Popen[str]) -> Usage:
    """Wait for a receiver to exit; what it reported spending over the stream."""
    out, _ = child.communicate(timeout=10)
    for line in out.splitlines():
        if line.startswith("usage "):
            user, system, sleeps, rounds = line.split()[1:]
            return Usage(float(user), float(system), int(sleeps), int(rounds))
    raise SystemExit("receiver reported no CPU time")


@dataclass(frozen=True, slots=True)
class Run:
    """One stream: wall seconds, and what the sender and the receiver spent."""

    seconds: float
    sender: Usage
    receiver: Usage


def raw_send(directory: str, datagrams: list[bytes], cpu: int | None = None) -> Run:
    """Stream ``datagrams`` to a raw receiver until it says it has them all."""
    path = os.path.join(directory, "raw.sink.uxd")
    child = _start("raw", directory, sum(len(d) for d in datagrams), cpu=cpu)
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
    began = _usage()
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
    spent = _usage() - began
    seconds = time.perf_counter() - start
    receiver = _finish(child)
    waiter.close()
    sock.close()
    os.unlink(own)
    return Run(seconds, spent, receiver)


def zmq_send(directory: str, datagrams: list[bytes], cpu: int | None = None) -> Run:
    """PUSH ``datagrams`` over ipc to a PULL receiver until it says it has them all."""
    import zmq  # noqa: PLC0415 - a measured peer, installed with the bench extra

    context = zmq.Context()
    done = context.socket(zmq.PULL)
    done.bind(f"ipc://{directory}/zmq.done")
    child = _start("zmq", directory, len(datagrams), cpu=cpu)
    push = context.socket(zmq.PUSH)
    push.connect(f"ipc://{directory}/zmq.sink")
    start = time.perf_counter()
    began = _usage()
    for data in datagrams:
        push.send(data)
    if not done.poll(int(TIMEOUT * 1000)) or done.recv() != b"done":
        raise SystemExit("zmq receiver did not answer")
    spent = _usage() - began
    seconds = time.perf_counter() - start
    receiver = _finish(child)
    push.close(linger=0)
    done.close(linger=0)
    context.term()
    return Run(seconds, spent, receiver)


def lane_send(directory: str, messages: list[dict[str, Any]],
              kind: PageKind = PageKind.JSON, coalesce: bool = True,
              cpu: int | None = None) -> Run:
    """Transmit ``messages`` to a lane receiver until it answers it has them all
    (``coalesce``: in batches, once the receiver grants them; else RAET's pages)."""
    child = _start("lane" if coalesce else "pages", directory, len(messages), kind, cpu)
    stack = LaneStack(LocalYard("source", LANE, directory),
                      LaneConfig(page_kind=kind, coalesce=coalesce))
    loop = Loop()
    loop.add(UxdDriver(stack))
    answer: list[dict[str, Any]] = []

    def answered() -> bool:
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                answer.append(event.body)
        return bool(answer)

    start = time.perf_counter()
    began = _usage(loop.rounds)
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
    spent = _usage(loop.rounds) - began  # waiting in the selector takes no CPU
    seconds = time.perf_counter() - start
    if answer[0].get("done") != len(messages):
        raise SystemExit(f"lane receiver answered {answer[0]}")
    receiver = _finish(child)
    loop.close()
    return Run(seconds, spent, receiver)


# -- the table ---------------------------------------------------------------


def _pairs(repeat: int, *kinds: Callable[[], Run]) -> list[tuple[Run, ...]]:
    """``repeat`` rounds of one run of each kind (raw first), alternating."""
    return [tuple(run() for run in kinds) for _ in range(repeat)]


def _summary(pairs: list[tuple[Run, ...]], amount: int,
             names: tuple[str, ...] = ("raw", "lane")) -> dict[str, float]:
    """Medians: seconds, CPU µs per item on each side (also split user/system), sleeps and
    loop rounds per 100 items, and each kind's throughput ratio to the first (raw)."""
    median = statistics.median
    out: dict[str, float] = {}
    for number, name in enumerate(names):
        runs = [pair[number] for pair in pairs]
        out[f"{name}_seconds"] = median(run.seconds for run in runs)
        for side in ("sender", "receiver"):
            used = [getattr(run, side) for run in runs]
            out[f"{name}_{side}_us"] = median(u.cpu for u in used) / amount * 1e6
            out[f"{name}_{side}_user_us"] = median(u.user for u in used) / amount * 1e6
            out[f"{name}_{side}_system_us"] = median(u.system for u in used) / amount * 1e6
            out[f"{name}_{side}_sleeps"] = median(u.sleeps for u in used) / amount * 100
            out[f"{name}_{side}_rounds"] = median(u.rounds for u in used) / amount * 100
    for number, name in enumerate(names[1:], 1):
        key = "ratio" if name == "lane" else f"{name}_ratio"
        out[key] = median(pair[0].seconds / pair[number].seconds for pair in pairs)
    return out


def measure(count: int, size: int, repeat: int, *, big: bool = True,
            kind: PageKind = PageKind.JSON, cpu: int | None = None) -> dict[str, Any]:
    """The figures: messages (or datagrams) per second and 16 MB seconds, raw and lane."""
    directory = tempfile.mkdtemp(prefix="bench-lane-")
    os.chmod(directory, 0o700)
    try:
        message = {"payload": "x" * size}
        small = paginate("source", "sink", "0" * 18, 1, message, kind)
        small_pages = [small[0]] * count
        figures: dict[str, Any] = {
            "max_dgram_qlen": _queue_limit(), "kind": kind.name.lower(),
            "count": count, "size": size, "page_bytes": len(small[0]), "repeat": repeat,
        }
        kinds: dict[str, Callable[[], Run]] = {
            "raw": lambda: raw_send(directory, small_pages, cpu),
            "zmq": lambda: zmq_send(directory, small_pages, cpu),
            "pages": lambda: lane_send(directory, [message] * count, kind, False, cpu),
            "lane": lambda: lane_send(directory, [message] * count, kind, True, cpu)}
        if not _zmq_available():
            del kinds["zmq"]
        names = tuple(kinds)
        pairs = _pairs(repeat, *kinds.values())
        figures["columns"] = list(names)
        figures.update(_summary(pairs, count, names))
        for name in names:
            figures[f"{name}_per_second"] = count / figures[f"{name}_seconds"]
        figures["runs"] = [[count / run.seconds for run in pair] for pair in pairs]
        if "zmq" in names:
            figures["lane_to_zmq"] = statistics.median(
                pair[names.index("zmq")].seconds / pair[names.index("lane")].seconds
                for pair in pairs)
        if big:
            huge = {"payload": "x" * BIG}
            pages = paginate("source", "sink", "0" * 18, 1, huge, kind)
            figures["big_pages"] = len(pages)
            big_pairs = _pairs(repeat, lambda: raw_send(directory, pages, cpu),
                               lambda: lane_send(directory, [huge], kind, True, cpu))
            summary = _summary(big_pairs, 1)
            figures["big_raw_seconds"] = summary["raw_seconds"]
            figures["big_lane_seconds"] = summary["lane_seconds"]
            figures["big_ratio"] = summary["ratio"]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return figures


def measure_lanes(options: BenchOptions, progress: Progress = silent,
                  cpus: Cpus = UNPINNED) -> dict[str, Any]:
    """``raetlike bench``'s lane rows: 100-byte messages one way through raw UXD, pyzmq ipc,
    lane pages and lane batches, the kinds alternated, the receivers on the peer's CPU."""
    count = options.count(30_000, 10_000)
    progress(f"lanes: raw UXD, pyzmq ipc, pages and batches, {count:,} messages"
             + (f" (x{options.repeat})" if options.repeat > 1 else ""))
    return measure(count, 100, options.repeat, big=False, cpu=cpus.peer)


def table(figures: dict[str, Any]) -> str:
    """The figures as a small text table."""
    names = figures.get("columns", ["raw", "lane"])
    titles = {"raw": "raw UXD", "zmq": "pyzmq ipc", "pages": "lane pages",
              "lane": "lane batches"}

    def row(label: str, key: str, form: str) -> str:
        return f"{label:30}" + "".join(
            f"{figures[name + '_' + key]:>14{form}}" for name in names)

    lines = [
        (f"max_dgram_qlen {figures['max_dgram_qlen']}, {figures['count']} messages of "
         f"{figures['size']} B ({figures['kind']}, {figures['page_bytes']} B pages), "
         f"median of {figures['repeat']} alternating runs"),
        f"{'':30}" + "".join(f"{titles[name]:>14}" for name in names),
        row("100 B messages/s", "per_second", ",.0f"),
        row("  sender CPU, us/message", "sender_us", ".1f"),
        row("  receiver CPU, us/message", "receiver_us", ".1f"),
        *(row(f"    {side} {part}, {unit}", f"{side}_{key}", ".1f")
          for side in ("sender", "receiver")
          for part, key, unit in (("user", "user_us", "us/msg"),
                                  ("system", "system_us", "us/msg"),
                                  ("sleeps", "sleeps", "/100 msgs"),
                                  ("rounds", "rounds", "/100 msgs"))),
        "ratios (medians of the per-run ratios):",
        f"  lane pages / raw UXD: {figures['pages_ratio']:.2f} (goal >= 0.5)",
        f"  lane batches / raw UXD: {figures['ratio']:.2f}",
        *([f"  lane batches / pyzmq ipc: {figures['lane_to_zmq']:.2f} (goal >= 1.0)"]
          if "lane_to_zmq" in figures else []),
        f"  runs ({', '.join(titles[n] for n in names)} msgs/s): " + "; ".join(
            ", ".join(f"{rate:,.0f}" for rate in run) for run in figures["runs"]),
    ]
    if "big_pages" in figures:
        lines.append(
            f"{'16 MiB message, s (' + str(figures['big_pages']) + ' pages)':30}"
            f"{figures['big_raw_seconds']:>12.3f}{figures['big_lane_seconds']:>12.3f}"
            f"{figures['big_ratio']:>10.2f}")
    return "\n".join(lines)


def main() -> None:
    """Run the receiver role, or the whole measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kind", choices=["json", "msgpack"], default="json",
                        help="how lane pages are serialized")
    parser.add_argument("--no-big", action="store_true", help="skip the 16 MiB message")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--parts", action="store_true",
                        help="CPU µs of each part of a message and of an idle loop round")
    parser.add_argument("--role", choices=["raw", "zmq", "lane", "pages"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--amount", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "raw":
        _raw_receiver(args.dir, args.amount)
        return
    kind = PageKind[args.kind.upper()]
    if args.role == "zmq":
        _zmq_receiver(args.dir, args.amount)
        return
    if args.role in {"lane", "pages"}:
        _lane_receiver(args.dir, args.amount, kind, coalesce=args.role == "lane")
        return
    if args.parts:
        from raetlike.bench._lane_parts import parts, parts_table  # noqa: PLC0415

        found = parts(args.count, args.size, kind)
        _say(json.dumps(found) if args.json else parts_table(found))
        return
    figures = measure(args.count, args.size, args.repeat, big=not args.no_big, kind=kind)
    with contextlib.suppress(BrokenPipeError):
        _say(json.dumps(figures) if args.json else table(figures))


if __name__ == "__main__":
    main()
