"""``raetlike bench``: raw UDP, raetlike fast mode, RAET mode and RAET 0.6.8 side by side.

Every peer is a separate process on loopback.  Each figure is the median of
``repeat`` runs.  :func:`run_bench` returns a JSON-ready mapping;
:func:`format_table` prints it with ratios.  docs/performance.md holds a run.
"""

from __future__ import annotations

import importlib.util
import json
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from raetlike.udp import UdpDriver
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = ["BenchOptions", "Progress", "StatusLine", "format_table", "run_bench"]

_ACK_EVERY = 32
_RAW_WINDOW = 512
_LOOPBACK_DATAGRAM = 60_000


Progress = Callable[[str], None]
"""Told the name of each measurement as it starts."""


def _silent(_what: str) -> None:
    pass


class StatusLine:
    """One line redrawn in place on a terminal naming the current measurement; nothing elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.live = out.isatty()
        self.shown = False

    def __call__(self, what: str) -> None:
        if self.live:
            self.out.write(f"\r\033[Kmeasuring {what} ...")
            self.out.flush()
            self.shown = True

    def clear(self) -> None:
        """Remove the line (before the results are printed)."""
        if self.shown:
            self.out.write("\r\033[K")
            self.out.flush()
            self.shown = False


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """How much to measure."""

    quick: bool = False
    repeat: int = 3
    estates: int = 200


# -- peers (run in child processes) -----------------------------------------------------

def serve_udp() -> None:
    """Raw UDP peer: echo datagrams starting with ``P``, count the rest and ack every 32."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    count = 0
    while True:
        data, source = sock.recvfrom(65535)
        if data[:1] == b"P":
            sock.sendto(data, source)
        elif data[:1] == b"R":
            count = 0
        else:
            count += 1
            if count % _ACK_EVERY == 0:
                sock.sendto(count.to_bytes(8, "big"), source)


def _config(fast: bool) -> RoadConfig:
    return RoadConfig(fast=fast, fast_datagram_size=_LOOPBACK_DATAGRAM,
                      fast_max_window=3 << 20, auto=AutoMode.ALWAYS, keepalive=True)


def serve_estate(fast: bool) -> None:
    """raetlike main estate: echoes messages whose bytes start with ``E``."""
    stack = RoadStack(LocalEstate("benchmain", main=True), _config(fast),
                      MemoryKeep(AutoMode.ALWAYS), now=time.monotonic())
    driver = UdpDriver(stack)
    sys.stdout.write(f"{driver.address[1]}\n")
    sys.stdout.flush()

    def echo() -> None:
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.MessageReceived) and isinstance(event.body, bytes) \
                    and event.body[:1] == b"E":
                stack.transmit(event.body, to=event.remote, now=time.monotonic())

    _Pump([driver]).run(lambda: False, 1e9, echo)


def _spawn(code: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None  # noqa: S101 - we asked for a pipe
    return process, int(process.stdout.readline())


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


# -- raw UDP -------------------------------------------------------------------------------

def _raw_stream(port: int, count: int, size: int) -> float:
    """Seconds to push ``count`` datagrams of ``size`` bytes, at most 512 unacknowledged."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    sock.send(b"R")
    payload = b"o" * size
    window = max(2 * _ACK_EVERY, min(_RAW_WINDOW, (2 << 20) // size))
    sent = acked = 0
    start = time.perf_counter()
    sock.settimeout(1.0)
    while acked < count:
        while sent < count and sent - acked < window:
            sock.send(payload)
            sent += 1
        try:
            acked = max(acked, int.from_bytes(sock.recv(64), "big"))
        except TimeoutError:  # a lost datagram on loopback: give up on exactness
            break
    elapsed = time.perf_counter() - start
    sock.close()
    return elapsed


def _raw_ping(port: int, count: int) -> list[float]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(1.0)
    payload = b"P" * 100
    times = []
    for _ in range(count):
        start = time.perf_counter()
        sock.send(payload)
        sock.recv(65535)
        times.append(time.perf_counter() - start)
    sock.close()
    return times


# -- raetlike ------------------------------------------------------------------------------

class _Client:
    """Our side of a raetlike measurement: one estate joined and allowed to the peer."""

    def __init__(self, port: int, fast: bool) -> None:
        self.stack = RoadStack(LocalEstate("benchclient"), _config(fast),
                               MemoryKeep(AutoMode.ALWAYS), now=time.monotonic())
        self.pump = _Pump([UdpDriver(self.stack)])
        self.sent = 0
        self.echoes: list[float] = []
        self.remote = self.stack.join(("127.0.0.1", port), now=time.monotonic())
        self.allowed = False
        if not self.pump.run(lambda: self.allowed, 20, self._drain):
            raise RuntimeError("bench client could not join and allow")

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

    def big(self, size: int) -> float:
        self.sent = 0
        start = time.perf_counter()
        self.stack.transmit(b"b" * size, to=self.remote, now=time.monotonic())
        self.pump.run(lambda: self.sent >= 1, 120, self._drain)
        return time.perf_counter() - start

    def close(self) -> None:
        self.pump.close()


def _joins(port: int, count: int, fast: bool) -> float:
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
    pump.run(lambda: len(allowed) == count, 60, drain)
    elapsed = time.perf_counter() - start
    pump.close()
    return elapsed if len(allowed) == count else float("inf")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def _median(runs: list[float]) -> float:
    return statistics.median(runs)


def _raetlike(options: BenchOptions, fast: bool,
              progress: Progress = _silent) -> dict[str, float]:
    mode = "fast mode" if fast else "RAET mode"
    code = f"from raetlike.bench import serve_estate; serve_estate({fast})"
    process, port = _spawn(code)
    try:
        progress(f"{mode}: join and allow")
        client = _Client(port, fast)
        quick = options.quick
        count = (20_000 if fast else 4_000) // (4 if quick else 1)
        one_way, echo, p50, p99, one_mb, ten_mb = [], [], [], [], [], []
        for run in range(options.repeat):
            of = f" (run {run + 1}/{options.repeat})" if options.repeat > 1 else ""
            progress(f"{mode}: one-way, {count:,} messages{of}")
            one_way.append(count / client.one_way(count))
            progress(f"{mode}: echo, window 32{of}")
            elapsed, _rtts = client.ping(count // 4, window=32)
            echo.append(len(client.echoes) / elapsed)
            progress(f"{mode}: round trips{of}")
            _, rtts = client.ping(300 if quick else 1000)
            p50.append(_percentile(rtts, 0.5))
            p99.append(_percentile(rtts, 0.99))
            progress(f"{mode}: a 1 MB message{of}")
            one_mb.append(client.big(1_000_000))
            if fast:  # RAET mode takes minutes for 10 MB under this pump
                progress(f"{mode}: a 10 MB message{of}")
                ten_mb.append(client.big(10_000_000))
        client.close()
        result = {
            "one_way_msgs_per_s": _median(one_way), "echo_msgs_per_s": _median(echo),
            "rtt_p50_ms": _median(p50) * 1e3, "rtt_p99_ms": _median(p99) * 1e3,
            "one_mb_s": _median(one_mb),
        }
        if ten_mb:
            result["ten_mb_s"] = _median(ten_mb)
    finally:
        process.kill()
        process.wait()
    process, port = _spawn(code)
    try:
        progress(f"{mode}: {options.estates} estates join and allow")
        result["joins"] = options.estates
        result["joins_s"] = _joins(port, options.estates, fast)
    finally:
        process.kill()
        process.wait()
    return result


def _raw(options: BenchOptions, progress: Progress = _silent) -> dict[str, float]:
    process, port = _spawn("from raetlike.bench import serve_udp; serve_udp()")
    try:
        count = 100_000 // (4 if options.quick else 1)
        progress(f"raw UDP: one-way, {count:,} datagrams")
        stream = [count / _raw_stream(port, count, 100) for _ in range(options.repeat)]
        progress("raw UDP: round trips")
        rtts = [_raw_ping(port, 2000) for _ in range(options.repeat)]
        progress("raw UDP: 10 MB")
        ten_mb = [_raw_stream(port, 10_000_000 // _LOOPBACK_DATAGRAM // _ACK_EVERY * _ACK_EVERY,
                              _LOOPBACK_DATAGRAM) for _ in range(options.repeat)]
    finally:
        process.kill()
        process.wait()
    return {
        "one_way_msgs_per_s": _median(stream),
        "rtt_p50_ms": _median([_percentile(r, 0.5) for r in rtts]) * 1e3,
        "rtt_p99_ms": _median([_percentile(r, 0.99) for r in rtts]) * 1e3,
        "ten_mb_s": _median(ten_mb),
    }


def _raet_068(options: BenchOptions, progress: Progress = _silent) -> dict[str, float] | None:
    script = Path(__file__).parent / "_raetbench" / "raet_echo.py"
    with tempfile.TemporaryDirectory() as directory:
        port_file = Path(directory) / "port"
        main = subprocess.Popen(  # noqa: S603 - our own script
            [sys.executable, str(script), "main", str(port_file)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            progress("RAET 0.6.8: starting its main estate")
            deadline = time.monotonic() + 20
            while not (port_file.exists() and port_file.read_text()):
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
            count = 500 if options.quick else 1500
            runs = []
            repeat = options.repeat if not options.quick else 1
            for run in range(repeat):
                of = f" (run {run + 1}/{repeat})" if repeat > 1 else ""
                progress(f"RAET 0.6.8: echo, {count:,} messages{of}")
                out = subprocess.run(  # noqa: S603 - our own script
                    [sys.executable, str(script), "client", f"127.0.0.1:{port_file.read_text()}",
                     str(count), "16"], capture_output=True, text=True, timeout=180, check=False)
                if out.returncode != 0:
                    return None
                report = json.loads(out.stdout.strip().splitlines()[-1])
                runs.append(report["echoes"] / report["seconds"])
        finally:
            main.kill()
            main.wait()
    return {"echo_msgs_per_s": _median(runs)}


def run_bench(options: BenchOptions, progress: Progress = _silent) -> dict[str, Any]:
    """Measure everything; a JSON-ready mapping of scenario -> figures.

    ``progress`` is told the name of each measurement as it starts.
    """
    zmq_note = ("pyzmq importable, but the CURVE scenario is not implemented yet"
                if importlib.util.find_spec("zmq") else "skipped: pyzmq not installed")
    return {
        "raw_udp": _raw(options, progress),
        "fast": _raetlike(options, fast=True, progress=progress),
        "raet_mode": _raetlike(options, fast=False, progress=progress),
        "raet_0_6_8": _raet_068(options, progress) or "skipped: RAET 0.6.8 not runnable",
        "pyzmq_curve": zmq_note,
        "repeat": options.repeat,
        "quick": options.quick,
    }


def _cell(value: Any, digits: int = 0) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, float | int) else "-"


def format_table(result: dict[str, Any]) -> str:
    """The figures as a text table, with the ratios the goals are stated in."""
    raw, fast, raet = result["raw_udp"], result["fast"], result["raet_mode"]
    legacy = result["raet_0_6_8"] if isinstance(result["raet_0_6_8"], dict) else {}
    rows = [
        ("one-way msgs/s (100 B)", raw.get("one_way_msgs_per_s"), fast.get("one_way_msgs_per_s"),
         raet.get("one_way_msgs_per_s"), None, 0),
        ("echo msgs/s (window 16-32)", None, fast.get("echo_msgs_per_s"),
         raet.get("echo_msgs_per_s"), legacy.get("echo_msgs_per_s"), 0),
        ("RTT p50 ms", raw.get("rtt_p50_ms"), fast.get("rtt_p50_ms"), raet.get("rtt_p50_ms"),
         None, 3),
        ("RTT p99 ms", raw.get("rtt_p99_ms"), fast.get("rtt_p99_ms"), raet.get("rtt_p99_ms"),
         None, 3),
        ("1 MB message s", None, fast.get("one_mb_s"), raet.get("one_mb_s"), None, 3),
        ("10 MB message s", raw.get("ten_mb_s"), fast.get("ten_mb_s"), raet.get("ten_mb_s"),
         None, 3),
        (f"{fast.get('joins')} estates join+allow s", None, fast.get("joins_s"),
         raet.get("joins_s"), None, 2),
    ]
    lines = [f"{'':34}{'raw UDP':>12}{'fast':>12}{'RAET mode':>12}{'RAET 0.6.8':>12}"]
    for name, *values, digits in rows:
        lines.append(f"{name:34}" + "".join(f"{_cell(v, int(digits)):>12}" for v in values))
    ratios = []

    def ratio(label: str, top: Any, bottom: Any) -> None:
        if isinstance(top, float | int) and isinstance(bottom, float | int) and bottom:
            ratios.append(f"  {label}: {top / bottom:.2f}x")

    ratio("fast one-way / raw UDP one-way", fast.get("one_way_msgs_per_s"),
          raw.get("one_way_msgs_per_s"))
    ratio("fast RTT p50 / raw UDP RTT p50", fast.get("rtt_p50_ms"), raw.get("rtt_p50_ms"))
    ratio("fast 10 MB / raw UDP 10 MB", fast.get("ten_mb_s"), raw.get("ten_mb_s"))
    ratio("fast one-way / RAET mode one-way", fast.get("one_way_msgs_per_s"),
          raet.get("one_way_msgs_per_s"))
    ratio("RAET mode echo / RAET 0.6.8 echo", raet.get("echo_msgs_per_s"),
          legacy.get("echo_msgs_per_s"))
    ratio("fast echo / RAET 0.6.8 echo", fast.get("echo_msgs_per_s"),
          legacy.get("echo_msgs_per_s"))
    notes = [f"  pyzmq+CURVE: {result['pyzmq_curve']}"]
    if not legacy:
        notes.append(f"  RAET 0.6.8: {result['raet_0_6_8']}")
    return "\n".join([*lines, "ratios:", *ratios, "notes:", *notes,
                      f"(median of {result['repeat']} runs)"])


def main(quick: bool, as_json: bool, repeat: int | None, estates: int | None) -> int:
    """The ``raetlike bench`` command."""
    options = BenchOptions(quick=quick, repeat=repeat or (1 if quick else 3),
                           estates=estates or (50 if quick else 200))
    status = StatusLine(sys.stdout)
    progress: Progress = _silent if as_json else status
    try:
        result = run_bench(options, progress)
    finally:
        status.clear()
    sys.stdout.write((json.dumps(result, indent=2) if as_json else format_table(result)) + "\n")
    return 0
