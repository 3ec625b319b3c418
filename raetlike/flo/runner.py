"""Run a FloScript plan with ioflo's own skedder: the body of ``raetlike flo``.

The plan's houses are built by ioflo's ``Skedder`` with the raetlike deeds
registered (importing :mod:`raetlike.flo` registers them).  ``house`` keeps
only the house of that name, so one plan file can hold both ends of a road
and each end can run in its own process.  The skedder runs until every
framer has stopped (``bid stop all``) or it is interrupted (SIGINT or
SIGTERM: the framers are aborted, so exit actions still close the stacks);
a plan reports a
failure by putting text into ``meta.failure`` (``put "no reply" into
meta.failure``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

# ioflo 2.0.3 imports here because raetlike/flo/__init__.py imported _compat first
from ioflo.aid import consoling as aid_consoling
from ioflo.base import consoling as base_consoling
from ioflo.base import excepting, skedding

from raetlike.errors import RaetError

__all__ = ["DEFAULT_PERIOD", "PlanError", "PlanOutcome", "run_plan", "set_ioflo_verbosity"]

log = logging.getLogger(__name__)

DEFAULT_PERIOD = 0.1
"""Seconds between two runs of every framer (one tick of the houses' clocks)."""

VERBOSITY = ("mute", "terse", "concise", "verbose", "profuse")
"""ioflo's console levels, quietest first."""


_BUILD_ERRORS = (excepting.ParseError, excepting.ResolveError, excepting.ParameterError,
                 excepting.CloneError, excepting.RegisterError)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class PlanError(RaetError):
    """A plan that cannot be run: missing file, FloScript errors, no such house."""


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """How a plan's run ended."""

    houses: tuple[Any, ...]
    """The ioflo houses that ran; ``house.store`` holds their shares."""
    failures: dict[str, str]
    """House name -> what it put into ``meta.failure`` (only houses that did)."""
    seconds: float
    """Wall-clock duration of the run."""
    ticks: int
    """How many periods the skedder's clock advanced."""
    interrupted: str = ""
    """The signal that stopped the run (``SIGINT``, ``SIGTERM``), or "" when the plan stopped."""

    @property
    def ok(self) -> bool:
        """True when no house reported a failure."""
        return not self.failures

    def store(self, house: str) -> Any:
        """The store of the house called ``house`` (KeyError if none ran)."""
        for candidate in self.houses:
            if candidate.name == house:
                return candidate.store
        raise KeyError(house)


def set_ioflo_verbosity(level: str) -> None:
    """Set both of ioflo's consoles (they print to stdout) to ``level`` of :data:`VERBOSITY`."""
    value = VERBOSITY.index(level)
    aid_consoling.getConsole().reinit(verbosity=value)
    base_consoling.getConsole().reinit(verbosity=value)


@contextlib.contextmanager
def _signals_as_interrupt(caught: list[str]) -> Iterator[None]:
    """SIGINT and SIGTERM become KeyboardInterrupt, which the skedder turns into a clean stop.

    The skedder then aborts every framer, running their exit actions, so
    closers close stacks and remove socket files.  The signal's name is
    appended to ``caught``.  Only in the main thread (elsewhere: no change).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        caught.append(signal.Signals(signum).name)
        raise KeyboardInterrupt(caught[-1])

    previous = {number: signal.signal(number, interrupt)
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_plan(
    path: str | os.PathLike[str],
    *,
    house: str | None = None,
    period: float = DEFAULT_PERIOD,
    real: bool = True,
    verbosity: str = "mute",
) -> PlanOutcome:
    """Build the plan at ``path`` and run it with ioflo's skedder until it stops.

    ``real`` paces the ticks in real time (the default); ``real=False`` runs
    them back to back on simulated time, each tick advancing the houses'
    clocks by ``period`` (fast, for tests).  Raises :class:`PlanError` when
    the plan cannot be built or has no house called ``house``.
    """
    if period <= 0:
        raise PlanError(f"period must be positive, got {period}")
    filepath = os.fspath(path)
    if not os.path.isfile(filepath):
        raise PlanError(f"{filepath}: no such plan file")
    set_ioflo_verbosity(verbosity)
    skedder = skedding.Skedder(name="raetlike", period=period, real=real,
                               filepath=filepath, behaviors=["raetlike.flo"])
    try:
        built = skedder.build()
    except _BUILD_ERRORS as exc:
        raise PlanError(f"{filepath}: the plan does not build: {_first_line(exc)}") from None
    if not built:
        raise PlanError(f"{filepath}: the plan does not build (run with -vv for ioflo's report)")
    if house is not None:
        names = [h.name for h in skedder.houses]
        skedder.houses = [h for h in skedder.houses if h.name == house]
        if not skedder.houses:
            raise PlanError(f"{filepath}: no house {house!r} (houses: {', '.join(names)})")
    log.info("plan %s: running %s every %g s", filepath,
             ", ".join(h.name for h in skedder.houses), period)
    started = time.monotonic()
    caught: list[str] = []
    with _signals_as_interrupt(caught):
        skedder.run()
    seconds = time.monotonic() - started
    failures = {}
    for built in skedder.houses:
        failure = built.metas["failure"].value
        if failure:
            failures[str(built.name)] = str(failure)
    return PlanOutcome(houses=tuple(skedder.houses), failures=failures, seconds=seconds,
                       ticks=round(skedder.stamp / period),
                       interrupted=caught[0] if caught else "")
