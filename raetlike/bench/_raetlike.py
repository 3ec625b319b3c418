"""raetlike over UDP, fast mode and RAET mode: a peer estate and the measuring client.

The peer (:func:`serve_estate`) is a main estate in a child process that echoes
messages starting with ``E``.  The client joins, is allowed, and measures
one-way messages/s (until every message is acknowledged), windowed echo,
ping-pong round trips and single large messages; :func:`joins` times N estates
joining and being allowed to a fresh main.
"""

from __future__ import annotations

import gc
import selectors
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen
from typing import Any

from raetlike.bench._common import (
    UNPINNED,
    BenchOptions,
    CpuMeter,
    Cpus,
    Progress,
    median,
    percentile,
    silent,
    spawn,
    stop,
)
from raetlike.durable import DurableConfig, DurableRoad
from raetlike.journal import FsyncPolicy, JournalWriter
from raetlike.udp import UdpDriver
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = ["Client", "alternated_one_way", "joins", "journaled_one_way", "measure_bursts",
           "measure_raetlike", "serve_estate"]

_LOOPBACK_DATAGRAM = 60_000


def _config(fast: bool, **more: Any) -> RoadConfig:
    return RoadConfig(fast=fast, fast_datagram_size=_LOOPBACK_DATAGRAM,
                      fast_max_window=3 << 20, auto=AutoMode.ALWAYS, keepalive=True, **more)


# The join bench's thousand estates all come from 127.0.0.1, as a site behind one NAT
# address would: its main lifts the per-address join rate (docs/security.md), which
# otherwise admits 20 at once and then 2 a second from one address.
_MANY_FROM_ONE_ADDRESS = {"join_rate_per_source": 1e6, "join_burst_per_source": 1_000_000}


def settle() -> None:
    """After a process's set-up, before it is measured: one full collection.

    What start-up, the join and the allow made and kept sits in the young
    generations; left there, the first collections of the traffic that follows
    traverse all of it (the first burst of 5,000 after an allow spent 1.1 ms more
    in gc than later ones).  Collected here, outside any timed window, they are old
    when traffic starts, as in a process that has run a while.  tools/burst_probe.py,
    10 runs alternated, medians, first burst minus later ones: sender CPU +3.38 ms
    (gc +1.11) without, +1.86 ms (gc +0.07) with; receiver +2.72 / +1.80 ms.
    """
    gc.collect()


def serve_estate(fast: bool, journal: str | None = None, durable: str | None = None,
                 fsync: str = "interval") -> None:
    """raetlike main estate: echoes messages whose bytes start with ``E``.

    With ``journal`` (a directory) it journals every delivery as ``raetlike
    estate --journal`` does: a record per message, stamped with the round's wall time,
    the writer ticked each round.
    With ``durable`` (a directory) it receives through a durable road (dedup marks on
    disk, fdatasynced per ``fsync``) as ``raetlike estate --durable`` does.
    """
    raw = RoadStack(LocalEstate("benchmain", main=True),
                    _config(fast, **_MANY_FROM_ONE_ADDRESS),
                    MemoryKeep(AutoMode.ALWAYS), now=time.monotonic())
    stack: RoadStack | DurableRoad = raw if durable is None else DurableRoad(
        raw, Path(durable), DurableConfig(fsync=FsyncPolicy(fsync)))
    driver = UdpDriver(stack)
    writer = None if journal is None else JournalWriter(Path(journal), stack.name)
    settle()
    sys.stdout.write(f"{driver.address[1]}\n")
    sys.stdout.flush()

    name = raw.name  # an attribute, as the estate's (raw.name is a property)

    def echo() -> None:
        wall = time.time()  # the round's deliveries are journaled with one time, as the estate's
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                if writer is not None:
                    writer.record_delivery(name, event, wall)
                if isinstance(event.body, bytes) and event.body[:1] == b"E":
                    stack.transmit(event.body, to=event.remote, now=time.monotonic())
        if writer is not None:
            writer.tick()

    _Pump([driver]).run(lambda: False, 1e9, echo)


# -- a small driver loop -----------------------------------------------------------------

class _Pump:
    """Services drivers until a condition holds (readiness plus the stacks' timers)."""

    def __init__(self, drivers: list[UdpDriver]) -> None:
        self.drivers = drivers
        self.selector = selectors.DefaultSelector()
        for driver in drivers:
            self.selector.register(driver.sock, selectors.EVENT_READ, driver)

    def run(self, done: Callable[[], bool], timeout: float,
            each: Callable[[], None] | None = None) -> bool:
        deadline = time.monotonic() + timeout
        drivers = self.drivers
        while True:
            now = time.monotonic()
            for driver in drivers:
                timer = driver.stack.get_timer()
                if timer is not None and timer <= now:
                    driver.stack.handle_timer(now)
            if each is not None:
                each()
            for driver in drivers:
                driver.send(now)
            if done():
                return True
            if now > deadline:
                return False
            timers = [t for d in drivers if (t := d.stack.get_timer()) is not None]
            wait = min([*timers, now + 0.05]) - now
            for key, _ in self.selector.select(max(0.0, wait)):
                driver = key.data
                driver.receive(time.monotonic())

    def close(self) -> None:
        self.selector.close()
        for driver in self.drivers:
            driver.close()


# -- the measuring side --------------------------------------------------------------------

class Client:
    """Our side of a raetlike measurement: one estate joined and allowed to the peer
    (through a durable road on ``durable``, fdatasynced per ``fsync``)."""

    def __init__(self, port: int, fast: bool, durable: Path | None = None,
                 fsync: str = "interval", name: str = "benchclient") -> None:
        raw = RoadStack(LocalEstate(name), _config(fast),
                        MemoryKeep(AutoMode.ALWAYS), now=time.monotonic())
        self.stack: RoadStack | DurableRoad = raw if durable is None else DurableRoad(
            raw, durable, DurableConfig(fsync=FsyncPolicy(fsync)))
        self.pump = _Pump([UdpDriver(self.stack)])
        self.sent = 0
        self.echoes: list[float] = []
        self.remote = raw.join(("127.0.0.1", port), now=time.monotonic())
        self.allowed = False
        if not self.pump.run(lambda: self.allowed, 20, self._drain):
            raise RuntimeError("bench client could not join and allow")
        settle()

    def _drain(self) -> None:
        while (event := self.stack.next_event()) is not None:
            if isinstance(event, events.Allowed):
                self.allowed = True
                self.remote = event.remote
            elif isinstance(event, events.MessageSent):
                self.sent += 1
            elif isinstance(event, events.MessageReceived):
                self.echoes.append(time.perf_counter())

    def one_way(self, count: int) -> float:
        body = b"o" * 100
        self.sent = 0
        start = time.perf_counter()
        queued = 0
        while queued < count:
            batch = min(count - queued, 2000)
            for _ in range(batch):
                self.stack.transmit(body, to=self.remote, now=time.monotonic())
            queued += batch
            self.pump.run(lambda q=queued: q - self.sent < 4000,  # type: ignore[misc]
                          60, self._drain)
        self.pump.run(lambda: self.sent >= count, 120, self._drain)
        return time.perf_counter() - start

    def ping(self, count: int, window: int = 1) -> tuple[float, list[float]]:
        body = b"E" + b"p" * 99
        self.echoes = []
        starts: list[float] = []
        begin = time.perf_counter()
        while len(self.echoes) < count:
            while len(starts) < count and len(starts) - len(self.echoes) < window:
                starts.append(time.perf_counter())
                self.stack.transmit(body, to=self.remote, now=time.monotonic())
            target = min(count, len(self.echoes) + 1)
            if not self.pump.run(lambda t=target: len(self.echoes) >= t,  # type: ignore[misc]
                                 10, self._drain):
                break
        elapsed = time.perf_counter() - begin
        return elapsed, [e - s for s, e in zip(starts, self.echoes, strict=False)]

    def big(self, size: int, cap: float = 120.0) -> float | None:
        """Seconds until one ``size``-byte message is acknowledged; None past ``cap``."""
        self.sent = 0
        start = time.perf_counter()
        self.stack.transmit(b"b" * size, to=self.remote, now=time.monotonic())
        done = self.pump.run(lambda: self.sent >= 1, cap, self._drain)
        return time.perf_counter() - start if done else None

    def close(self) -> None:
        self.pump.close()


def joins(port: int, count: int, fast: bool, cap: float = 60.0) -> float | None:
    """Seconds until ``count`` estates (one process) joined and were allowed; None past ``cap``."""
    stacks = [RoadStack(LocalEstate(f"joiner{n}"), _config(fast), MemoryKeep(AutoMode.ALWAYS),
                        now=time.monotonic()) for n in range(count)]
    pump = _Pump([UdpDriver(stack) for stack in stacks])
    allowed: set[int] = set()

    def drain() -> None:
        for number, stack in enumerate(stacks):
            while (event := stack.next_event()) is not None:
                if isinstance(event, events.Allowed):
                    allowed.add(number)

    start = time.perf_counter()
    for stack in stacks:
        stack.join(("127.0.0.1", port), now=time.monotonic())
    done = pump.run(lambda: len(allowed) == count, cap, drain)
    elapsed = time.perf_counter() - start
    pump.close()
    return elapsed if done else None


def _peer(fast: bool, cpu: int | None, journal: str | None = None,
          durable: str | None = None, fsync: str = "interval") -> tuple[Popen[str], int]:
    process, line = spawn("from raetlike.bench import serve_estate; "
                          f"serve_estate({fast}, {journal!r}, {durable!r}, {fsync!r})", cpu)
    return process, int(line)


def _durable_one_way(options: BenchOptions, count: int, progress: Progress,
                     cpus: Cpus) -> dict[str, float]:
    """Fast one-way msgs/s with the sender durable (its outbox on disk, this directory's
    file system, fdatasync every 10 ms), with both ends durable (the receiver's dedup too)
    at every 10 ms and per message, beside the in-memory pair: runs alternated on the
    same CPU, medians of each."""
    pairs = 3 if options.quick else 5
    count *= 3  # a run of a third of a second or more, as the journaling pair's
    # kind -> (the receiving peer's fsync, or None: in memory; the sender's likewise)
    ends = {"memory": (None, None), "sender": (None, "interval"),
            "interval": ("interval", "interval"), "always": ("always", "always")}
    figures: dict[str, list[float]] = {kind: [] for kind in ends}
    with tempfile.TemporaryDirectory(prefix="raetlike-bench-durable-",
                                     dir=Path.cwd()) as root:
        peers: dict[str, tuple[Popen[str], int]] = {}
        try:
            for kind, (receiver, _) in ends.items():
                peers[kind] = _peer(True, cpus.peer, None,
                                    None if receiver is None else f"{root}/peer-{kind}",
                                    receiver or "interval")
            clients = {kind: Client(port, True,
                                    None if ends[kind][1] is None else Path(root, f"c-{kind}"),
                                    ends[kind][1] or "interval")
                       for kind, (_, port) in peers.items()}
            for run in range(pairs):
                progress(f"fast mode: one-way, durable and in memory, {count:,} messages "
                         f"(round {run + 1}/{pairs})")
                kinds = list(figures) if run % 2 == 0 else list(reversed(figures))
                for kind in kinds:
                    number = count if kind != "always" else max(500, count // 20)
                    figures[kind].append(number / clients[kind].one_way(number))
            for client in clients.values():
                client.close()
        finally:
            for process, _ in peers.values():
                stop(process)
    return {"one_way_durable_sender_msgs_per_s": median(figures["sender"]),
            "one_way_durable_msgs_per_s": median(figures["interval"]),
            "one_way_durable_always_msgs_per_s": median(figures["always"]),
            "one_way_durable_alongside_msgs_per_s": median(figures["memory"])}


def _bursts(client: Client, port: int, options: BenchOptions,
            progress: Progress) -> dict[str, float]:
    """Fast one-way msgs/s of bursts of 5,000 just after an allow.

    The first is ``client``'s, and the first fast-mode traffic of both processes: it
    pays their one-time costs too (heap pages touched for the first time, the first
    collections of what start-up made, cold caches: docs/performance-floors.md, "Short
    bursts"), which the stream, measured later, does not.  So the
    burst figure set beside the stream is measured as the stream is, in the same warm
    processes and as the median of ``repeat`` runs: each a new estate of this process
    that joins the same peer and sends one burst on its new link (a fresh congestion
    window and fresh link state at both ends).
    """
    count = options.count(5_000, 5_000)
    progress(f"fast mode: a burst of {count:,}, the processes' first")
    first = count / client.one_way(count)
    runs = []
    for run in range(options.repeat):
        of = f" (run {run + 1}/{options.repeat})" if options.repeat > 1 else ""
        progress(f"fast mode: a burst of {count:,} on a new link{of}")
        fresh = Client(port, True, name=f"benchburst{run}")
        try:
            runs.append(count / fresh.one_way(count))
        finally:
            fresh.close()
    return {"burst_msgs_per_s": median(runs), "first_burst_msgs_per_s": first}


def measure_bursts(options: BenchOptions, progress: Progress = silent,
                   cpus: Cpus = UNPINNED) -> dict[str, float]:
    """The fast-mode burst figures of :func:`measure_raetlike` and the stream they are set
    beside (one-way, ``repeat`` runs, median), alone: ``tools/bench_burst.py`` repeats them."""
    process, port = _peer(True, cpus.peer)
    try:
        client = Client(port, True)
        figures = _bursts(client, port, options, progress)
        count = options.count(20_000, 5_000)
        stream = []
        for run in range(options.repeat):
            progress(f"fast mode: one-way, {count:,} messages (run {run + 1}/{options.repeat})")
            stream.append(count / client.one_way(count))
        client.close()
    finally:
        stop(process)
    return {**figures, "one_way_msgs_per_s": median(stream)}


def alternated_one_way(clients: dict[bool, Client], meters: dict[bool, CpuMeter], count: int,
                       pairs: int, progress: Progress = silent) -> dict[bool, list[float]]:
    """One-way msgs/s of ``count`` messages to a journaling main (``True``) and a plain one
    (``False``), in ``pairs`` pairs alternated ABBA so the machine's drift falls on both,
    each run's CPU metered; the runs of each."""
    runs: dict[bool, list[float]] = {True: [], False: []}
    for run in range(pairs):
        progress(f"fast mode: one-way to a journaling main and to a plain one, "
                 f"{count:,} messages (pair {run + 1}/{pairs})")
        for journaled in (True, False) if run % 2 == 0 else (False, True):
            with meters[journaled].run(count):
                runs[journaled].append(count / clients[journaled].one_way(count))
    return runs


def journaled_one_way(options: BenchOptions, count: int, progress: Progress = silent,
                      cpus: Cpus = UNPINNED, pairs: int | None = None) -> dict[str, float]:
    """Fast one-way msgs/s to a main that journals every message (the default fsync), and
    to one that does not, the runs alternated (ABBA) on the same CPU so that the machine's
    drift falls on both: medians of each (``journal``, ``alongside``), of the pairs' ratios
    (``ratio``), and of each main's CPU per message in µs (``journal_cpu_us``,
    ``alongside_cpu_us``), over ``pairs`` pairs (default 9, quick 3).
    ``tools/bench_journal.py --estate`` repeats it alone."""
    pairs = pairs or (3 if options.quick else 9)
    count *= 3  # a run of a third of a second or more: less of the machine's jitter
    with tempfile.TemporaryDirectory(prefix="raetlike-bench-journal-") as journal:
        journaling, journaling_port = _peer(True, cpus.peer, journal)
        try:
            plain, plain_port = _peer(True, cpus.peer)
        except BaseException:
            stop(journaling)  # the second peer did not start: end the first
            raise
        try:
            clients = {True: Client(journaling_port, True), False: Client(plain_port, True)}
            meters = {True: CpuMeter(journaling.pid), False: CpuMeter(plain.pid)}
            runs = alternated_one_way(clients, meters, count, pairs, progress)
            for client in clients.values():
                client.close()
        finally:
            stop(journaling)
            stop(plain)
    figures = {"journal": median(runs[True]), "alongside": median(runs[False]),
               "ratio": median([a / b for a, b in zip(runs[True], runs[False], strict=True)])}
    for journaled, name in ((True, "journal_cpu_us"), (False, "alongside_cpu_us")):
        receiver = meters[journaled].per_message().get("one_way_cpu_receiver_us")
        if receiver is not None:
            figures[name] = receiver
    return figures


def measure_raetlike(options: BenchOptions, fast: bool, progress: Progress = silent,
                     cpus: Cpus = UNPINNED) -> dict[str, float | None]:
    """One mode's figures: one-way, echo, RTT, 1 MB, 10 MB (capped) and N joins."""
    mode = "fast mode" if fast else "RAET mode"
    process, port = _peer(fast, cpus.peer)
    try:
        progress(f"{mode}: join and allow")
        client = Client(port, fast)
        count = options.count(20_000, 5_000) if fast else options.count(4_000, 2_000)
        pings = options.count(1000, 300) if fast else options.count(500, 200)
        one_way, echo, p50, p99, one_mb = [], [], [], [], []
        meter = CpuMeter(process.pid)
        bursts = _bursts(client, port, options, progress) if fast else {}
        for run in range(options.repeat):
            of = f" (run {run + 1}/{options.repeat})" if options.repeat > 1 else ""
            progress(f"{mode}: one-way, {count:,} messages{of}")
            with meter.run(count):
                one_way.append(count / client.one_way(count))
            progress(f"{mode}: echo, window 32{of}")
            elapsed, _rtts = client.ping(max(1, count // 4), window=32)
            echo.append(len(client.echoes) / elapsed)
            progress(f"{mode}: round trips{of}")
            _, rtts = client.ping(pings)
            p50.append(percentile(rtts, 0.5))
            p99.append(percentile(rtts, 0.99))
            progress(f"{mode}: a 1 MB message{of}")
            one_mb.append(client.big(1_000_000, options.cap))
        ten_mb: list[float | None] = []
        for run in range(options.repeat if fast else 1):  # RAET mode: seconds per run
            progress(f"{mode}: a 10 MB message (run {run + 1})")
            ten_mb.append(client.big(10_000_000 // options.scale, options.cap))
            if ten_mb[-1] is None:
                break
        client.close()
    finally:
        stop(process)
    process, port = _peer(fast, cpus.peer)
    try:
        progress(f"{mode}: {options.estates:,} estates join and allow")
        joined = joins(port, options.estates, fast, options.cap)
    finally:
        stop(process)
    figures: dict[str, float | None] = {
        "one_way_msgs_per_s": median(one_way), "echo_msgs_per_s": median(echo),
        "rtt_p50_ms": median(p50) * 1e3, "rtt_p99_ms": median(p99) * 1e3,
        "one_mb_s": _median_or_none(one_mb), "ten_mb_s": _median_or_none(ten_mb),
        "joins": options.estates, "joins_s": joined, "cap_s": options.cap,
        **meter.per_message(),
        **bursts,
    }
    if fast:
        journaled = journaled_one_way(options, count, progress, cpus)
        figures["one_way_journal_msgs_per_s"] = journaled["journal"]
        figures["one_way_alongside_msgs_per_s"] = journaled["alongside"]
        figures.update(_durable_one_way(options, count, progress, cpus))
    return figures


def _median_or_none(runs: list[float | None]) -> float | None:
    """The median, or None (past the cap) when any run was."""
    finished = [run for run in runs if run is not None]
    return median(finished) if finished and len(finished) == len(runs) else None


