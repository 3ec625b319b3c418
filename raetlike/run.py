"""The cooperative loop: many stacks (and their sockets) in one thread.

The loop sleeps in the selector until a socket is readable (or writable when
the kernel refused datagrams earlier) or the earliest stack timer is due; an
idle loop uses no CPU.  The clock is ``time.monotonic`` unless given.
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Driver", "Loop"]

IDLE_WAIT = 3600.0  # nothing scheduled: sleep until a socket wakes us


class Driver(Protocol):
    """A socket-owning pump around one sans-IO stack."""

    @property
    def wants_write(self) -> bool: ...
    def fileno(self) -> int: ...
    def receive(self, now: float) -> int: ...
    def send(self, now: float) -> int: ...
    def close(self) -> None: ...

    @property
    def stack(self) -> object: ...


class _Timed(Protocol):
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...


class Loop:
    """Services drivers until told to stop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.drivers: list[Driver] = []
        self._selector = selectors.DefaultSelector()
        self.stopped = False

    def add(self, driver: Driver) -> Driver:
        self.drivers.append(driver)
        self._selector.register(driver.fileno(), selectors.EVENT_READ, driver)
        return driver

    def remove(self, driver: Driver) -> None:
        self.drivers.remove(driver)
        self._selector.unregister(driver.fileno())

    def stop(self) -> None:
        """Make ``run_until`` / ``run_forever`` return after the current round."""
        self.stopped = True

    def _next_deadline(self) -> float | None:
        deadlines = []
        for driver in self.drivers:
            stack: _Timed = driver.stack  # type: ignore[assignment]
            timer = stack.get_timer()
            if timer is not None:
                deadlines.append(timer)
        return min(deadlines) if deadlines else None

    def run_once(self, max_wait: float = IDLE_WAIT) -> None:
        """Wait for sockets or the next timer (at most ``max_wait``), then service all."""
        now = self.clock()
        for driver in self.drivers:  # commands given between rounds queue datagrams: flush them
            driver.send(now)
        deadline = self._next_deadline()
        wait = max_wait if deadline is None else min(max_wait, max(0.0, deadline - now))
        for driver in self.drivers:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if driver.wants_write else 0)
            self._selector.modify(driver.fileno(), events, driver)
        ready = self._selector.select(wait)
        now = self.clock()
        for key, _ in ready:
            key.data.receive(now)
        for driver in self.drivers:
            stack: _Timed = driver.stack  # type: ignore[assignment]
            timer = stack.get_timer()
            if timer is not None and timer <= now:
                stack.handle_timer(now)
            driver.send(now)

    def run_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Service until ``condition()`` holds (True) or ``timeout`` seconds pass (False)."""
        end = self.clock() + timeout
        self.stopped = False
        while not self.stopped:
            if condition():
                return True
            remaining = end - self.clock()
            if remaining <= 0:
                return condition()
            self.run_once(max_wait=min(remaining, 0.5))
        return condition()

    def run_forever(self) -> None:
        """Service until :meth:`stop`."""
        self.stopped = False
        while not self.stopped:
            self.run_once(max_wait=1.0)

    def close(self) -> None:
        for driver in list(self.drivers):
            self.remove(driver)
            driver.close()
        self._selector.close()
