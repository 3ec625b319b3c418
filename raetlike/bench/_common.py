"""What every bench scenario shares: options, progress reporting, peers, statistics."""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

__all__ = ["BenchOptions", "CpuMeter", "Cpus", "Progress", "StatusLine", "cpu_seconds",
           "median", "percentile", "pin", "pinned", "silent", "spawn", "stop", "UNPINNED"]

Progress = Callable[[str], None]
"""Told the name of each measurement as it starts."""


def silent(_what: str) -> None:
    """A progress that shows nothing."""


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
    """How much to measure.

    ``scale`` divides every message count (tests use a large one); ``cap`` is
    the longest one measurement may take before its cell reads ``> cap s``;
    ``pin`` puts the measuring process and its peer on two different CPUs.
    """

    quick: bool = False
    repeat: int = 3
    estates: int = 1000
    scale: int = 1
    cap: float = 60.0
    pin: bool = True

    def count(self, full: int, quick: int) -> int:
        """A message count: ``full`` for a default run, ``quick`` for --quick, over ``scale``."""
        return max(1, (quick if self.quick else full) // self.scale)


@dataclass(frozen=True, slots=True)
class Cpus:
    """The CPU the measuring side runs on and the one its peer runs on (None: not pinned)."""

    measuring: int | None = None
    peer: int | None = None


UNPINNED = Cpus()


def pin(pid: int, cpu: int | None) -> None:
    """Keep process ``pid`` (0: this one) on ``cpu``; nothing when ``cpu`` is None."""
    if cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, {cpu})


@contextlib.contextmanager
def pinned(enabled: bool) -> Iterator[Cpus]:
    """While open, this process runs on one CPU and peers go on another (with two or more).

    Two communicating processes left to the scheduler often share one CPU
    (the waker's), which turns any pipeline into turn-taking; pinning gives
    every scenario the same two CPUs.  The old affinity comes back on exit.
    """
    if not enabled or not hasattr(os, "sched_getaffinity"):
        yield Cpus()
        return
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        yield Cpus()
        return
    first, second = sorted(allowed)[:2]
    pin(0, first)
    try:
        yield Cpus(first, second)
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, allowed)


def spawn(code: str, cpu: int | None = None) -> tuple[subprocess.Popen[str], str]:
    """Run ``code`` in a child interpreter (on ``cpu``); returns it and the first line it prints."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pin(process.pid, cpu)
    assert process.stdout is not None  # noqa: S101 - we asked for a pipe
    line = process.stdout.readline().strip()
    if not line:
        process.kill()
        process.wait()
        raise RuntimeError(f"bench peer did not start: {code}")
    return process, line


def stop(process: subprocess.Popen[str]) -> None:
    """End a peer this bench started."""
    process.kill()
    process.wait()


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted values (0.0 when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def median(runs: list[float]) -> float:
    """The median of the runs."""
    return statistics.median(runs)


def cpu_seconds(pid: int | None = None) -> float | None:
    """CPU seconds (user + system, every thread) spent so far by this process or by ``pid``
    (from ``/proc/<pid>/task/*/schedstat``, in nanoseconds); None when it cannot be read."""
    if pid is None:
        return time.process_time()
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
                total += int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


class CpuMeter:
    """CPU per message on each side of a run: this process (the sender) and its peer.

    ``with meter.run(): ...`` around each run; :meth:`per_message` gives the
    medians over the runs, in µs per message, ``(sender, receiver)``.
    """

    def __init__(self, peer: int) -> None:
        self.peer = peer
        self.runs: list[tuple[float, float | None]] = []

    @contextlib.contextmanager
    def run(self, count: int) -> Iterator[None]:
        """Measure one run of ``count`` messages."""
        own, peer = time.process_time(), cpu_seconds(self.peer)
        yield
        own_after, peer_after = time.process_time(), cpu_seconds(self.peer)
        spent = None if peer is None or peer_after is None else (peer_after - peer) / count
        self.runs.append(((own_after - own) / count, spent))

    def per_message(self) -> dict[str, float]:
        """``one_way_cpu_sender_us`` and ``one_way_cpu_receiver_us`` (when readable)."""
        out: dict[str, float] = {}
        if self.runs:
            out["one_way_cpu_sender_us"] = median([run[0] for run in self.runs]) * 1e6
            peer = [run[1] for run in self.runs if run[1] is not None]
            if len(peer) == len(self.runs):
                out["one_way_cpu_receiver_us"] = median(peer) * 1e6
        return out
