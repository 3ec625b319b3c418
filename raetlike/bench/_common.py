"""What every bench scenario shares: options, progress reporting, peers, statistics."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

__all__ = ["BenchOptions", "Progress", "StatusLine", "median", "percentile", "silent",
           "spawn", "stop"]

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
    the longest one measurement may take before its cell reads ``> cap s``.
    """

    quick: bool = False
    repeat: int = 3
    estates: int = 1000
    scale: int = 1
    cap: float = 60.0

    def count(self, full: int, quick: int) -> int:
        """A message count: ``full`` for a default run, ``quick`` for --quick, over ``scale``."""
        return max(1, (quick if self.quick else full) // self.scale)


def spawn(code: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``code`` in a child interpreter; returns it and the first line it prints."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
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
