"""The cooperative loop: many stacks, their sockets and user micro-threads in one thread.

A round of the loop: flush what the stacks queued, sleep in the selector
until a socket is readable (or writable when the kernel refused datagrams
earlier), the earliest stack timer or the earliest task deadline; then drain
the ready sockets (a batch each), let due stack timers fire, hand stack
events to their handlers, resume ready tasks and flush again.  An idle loop
sleeps in the selector and uses no CPU.

A round allocates as little as it can, since a busy lane runs one every
few datagrams: each stack's ``get_timer`` is asked once per round (after the
flush, for the sleep; again only for a stack whose socket was read), the
write interest of a socket is changed only when its driver's ``wants_write``
changes, tasks and event handlers cost nothing when there are none, and the
default selector is a thin epoll wrapper (Linux).  ``run_forever`` and
``run_task`` skip the flush that opens a round: no code of theirs runs
between rounds, so the previous round's closing flush left nothing.

Tasks are generators.  A task yields what it waits for and the loop resumes
it when that happens:

- a number: a delay in seconds (resumed with the current time);
- ``None``: the next round;
- a :class:`Signal`: until it is set (resumed with its value);
- an :class:`Until`: until its predicate holds (resumed with True), or its
  timeout passes (resumed with False);
- a :class:`Task`: until that task ends (resumed with its result, or its
  exception is raised inside the waiter).

:meth:`Loop.serve` runs until SIGINT or SIGTERM (woken at once through
``signal.set_wakeup_fd``), then closes every stack and driver and returns
the messages that were never delivered (``MessageExpired`` and
``YardUnreachable`` events) in a :class:`Shutdown` report.  The clock and
the selector can be injected, so tests run the loop on virtual time.

The tasks live in :mod:`raetlike._run_tasks` and the selector in
:mod:`raetlike._run_select`; this module re-exports them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import select
import selectors
import signal
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol

from raetlike._run_select import EpollSelector, Selector
from raetlike._run_tasks import Signal, Task, TaskBody, Until
from raetlike._run_visits import Visits

__all__ = [
    "Driver", "Selector", "EpollSelector", "Loop",
    "Task", "TaskBody", "Signal", "Until",
    "Shutdown", "EventHandler",
]

log = logging.getLogger(__name__)

IDLE_WAIT = 3600.0  # nothing scheduled: sleep until a socket wakes us
CONDITION_STEP = 0.5  # run_until looks at its condition at least this often (it may watch
# things outside the loop, e.g. another process)
STOP_STEP = 1.0  # run_forever without handle_signals: a stop() from a signal handler is seen
SHUTDOWN_SIGNALS = (signal.SIGINT, signal.SIGTERM)
UNDELIVERED_EVENTS = frozenset({"MessageExpired", "YardUnreachable"})
"""Event class names that hand an undelivered message back (road and lane)."""

EventHandler = Callable[[Any], None]
"""Called with each event a stack reports, in order."""


class Driver(Protocol):
    """A socket-owning pump around one sans-IO stack."""

    @property
    def wants_write(self) -> bool: ...
    def fileno(self) -> int: ...
    def receive(self, now: float) -> int: ...
    def send(self, now: float) -> int: ...
    def close(self) -> None: ...

    @property
    def stack(self) -> Any: ...


class _Entry:
    """What the loop keeps per driver, so a round looks nothing up."""

    __slots__ = ("alone", "driver", "fd", "filed", "handler", "holds", "stack", "timer",
                 "writing")

    def __init__(self, driver: Driver, handler: EventHandler | None, *, alone: bool) -> None:
        self.driver = driver
        self.stack: Any = driver.stack
        self.fd = driver.fileno()
        self.handler = handler
        self.alone = alone
        """Visited only when touched (raetlike._run_visits), not every round."""
        self.timer: float | None = None
        """The stack's ``get_timer`` as asked this round (an alone one's: when last asked)."""
        self.filed: float | None = None
        """An alone entry's deadline as it waits on the heap (None: not waiting)."""
        self.writing = False
        self.holds: Callable[[float], bool] | None = getattr(driver, "holds_timers", None)
        """The driver's say whether a backlog holds the stack's timers (UdpDriver's)."""
        """Registered for EVENT_WRITE too."""


@dataclass(frozen=True, slots=True)
class Shutdown:
    """What :meth:`Loop.shutdown` found when it closed the stacks."""

    signal: int | None
    """The signal that stopped the loop, or None when stopped by :meth:`Loop.stop`."""
    undelivered: tuple[Any, ...]
    """Every ``MessageExpired`` (road) and ``YardUnreachable`` (lane) event from closing."""
    events: tuple[Any, ...]
    """Every event the stacks reported while closing (``undelivered`` among them)."""
    tasks_unfinished: tuple[str, ...]
    """Names of the tasks still waiting when the loop stopped."""


class Loop:
    """Services drivers and tasks until told to stop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 selector: Selector | None = None) -> None:
        self.clock = clock
        self.drivers: list[Driver] = []
        self.tasks: list[Task] = []
        self.handlers: dict[int, EventHandler] = {}
        if selector is None:
            selector = EpollSelector() if hasattr(select, "epoll") \
                else selectors.DefaultSelector()
        self._selector: Selector = selector
        self._epoll = selector if isinstance(selector, EpollSelector) else None
        self._entries: list[_Entry] = []
        self._swept: list[_Entry] = []  # visited every round (not added alone)
        self._handled: list[_Entry] = []  # the swept entries with an event handler
        self._alone: dict[int, _Entry] = {}  # id(driver) -> entry, for touch()
        self._visits = Visits()
        self._flushed: list[_Entry] = []  # alone entries flushed since the last _watch
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._previous: dict[int, Any] = {}
        self._previous_wakeup_fd = -1
        self.signal: int | None = None
        """The shutdown signal received, if any."""
        self.stopped = False
        self.rounds = 0
        """Rounds run so far (a busy loop would show here)."""

    # == drivers and tasks =================================================

    def add(self, driver: Driver, on_event: EventHandler | None = None, *,
            alone: bool = False) -> Driver:
        """Service ``driver``; with ``on_event`` the loop takes its stack's events and hands them
        over after every round (without it, the caller takes them with ``next_event``).

        Every round visits every driver (flushes it, asks its timer), since any code may have
        given its stack a command.  ``alone=True`` says that only the driver's own socket,
        timers and ``on_event`` handler command its stack, and any other code that does calls
        :meth:`touch` after: the loop then visits it only in rounds when one of those
        happened, and keeps its deadline on a heap (raetlike._run_visits; docs/drivers.md,
        "Many stacks on one loop").
        """
        entry = _Entry(driver, on_event, alone=alone)
        self._selector.register(entry.fd, selectors.EVENT_READ, self._data(entry))
        self.drivers.append(driver)
        self._entries.append(entry)
        if on_event is not None:
            self.handlers[id(driver)] = on_event
        if alone:
            self._alone[id(driver)] = entry
            self._visits.live += 1
            self._visits.touch(entry)  # (commands given before it was added)
        else:
            self._swept.append(entry)
            if on_event is not None:
                self._handled.append(entry)
        return driver

    def touch(self, driver: Driver) -> None:
        """``driver``'s stack was given a command outside the loop's own calls: visit it in
        the next round (flush, timer, events).  Nothing for a driver not added ``alone``."""
        entry = self._alone.get(id(driver))
        if entry is not None:
            self._visits.touch(entry)

    def remove(self, driver: Driver) -> None:
        """Stop servicing ``driver`` (it is not closed)."""
        self.drivers.remove(driver)
        entry = next(entry for entry in self._entries if entry.driver is driver)
        self._entries.remove(entry)
        if entry.alone:
            del self._alone[id(driver)]
            self._visits.live -= 1
            self._visits.forget(entry)
            # (flushed since the last _watch: that must not modify its descriptor)
            self._flushed = [other for other in self._flushed if other is not entry]
        else:
            self._swept.remove(entry)
        if entry in self._handled:
            self._handled.remove(entry)
        self._selector.unregister(entry.fd)
        self.handlers.pop(id(driver), None)

    def spawn(self, body: TaskBody, name: str | None = None) -> Task:
        """Run the generator ``body`` as a task; it first runs in the next round."""
        task = Task(body, name or str(getattr(body, "__name__", "task")))
        self.tasks.append(task)
        return task

    def stop(self) -> None:
        """Make ``run_until`` / ``run_forever`` return after the current round."""
        self.stopped = True

    # == one round =========================================================

    def _timers(self) -> float | None:
        """Ask every stack for its timer (kept for the round); the earliest deadline of
        stacks and tasks, or None."""
        earliest: float | None = None
        for entry in self._swept:
            timer = entry.timer = entry.stack.get_timer()
            if timer is not None and (earliest is None or timer < earliest):
                earliest = timer
        if self._alone:
            visits = self._visits
            visits.file()
            timer = visits.earliest()
            if timer is not None and (earliest is None or timer < earliest):
                earliest = timer
        for task in self.tasks:
            wake = task.wake_time()
            if wake is not None and (earliest is None or wake < earliest):
                earliest = wake
        return earliest

    def _data(self, entry: _Entry) -> Any:
        """What the selector keeps for a driver: the loop's entry for its own epoll
        selector, the driver itself for any other (as :mod:`selectors` users expect)."""
        return entry if self._epoll is not None else entry.driver

    def _flush(self, now: float) -> None:
        for entry in self._swept:
            entry.driver.send(now)
        if self._alone:
            visits = self._visits
            flushed = visits.take_to_send()
            for entry in flushed:
                entry.driver.send(now)
                if entry.handler is not None:  # sending may raise events (a message expired
                    visits.flushed(entry)  # as the outbox filled a window)
            self._flushed.extend(flushed)

    def _watch(self) -> None:
        """Ask the selector for writability only for drivers with datagrams the kernel
        refused, and only when that changed (alone drivers: those flushed since)."""
        watched: Iterable[_Entry] = self._swept
        if self._flushed:
            watched = [*self._swept, *self._flushed]
            self._flushed = []
        for entry in watched:
            if entry.driver.wants_write is not entry.writing:
                entry.writing = not entry.writing
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if entry.writing else 0)
                self._selector.modify(entry.fd, events, self._data(entry))

    def run_once(self, max_wait: float = IDLE_WAIT) -> None:
        """Wait for sockets, the next timer or task (at most ``max_wait``), then service all."""
        self._round(max_wait, flush=True)

    def _round(self, max_wait: float, *, flush: bool) -> None:
        """One round; ``flush`` first sends what commands given since the last round queued."""
        self.rounds += 1
        clock = self.clock
        now = clock()
        if flush:
            self._flush(now)
        deadline = self._timers()
        wait = max_wait if deadline is None else min(max_wait, max(0.0, deadline - now))
        if self.tasks and any(task.ready(now) for task in self.tasks):
            wait = 0.0
        self._watch()
        if self._epoll is not None:
            ready = self._epoll.ready(wait)
        else:
            ready = [self._entry_of(key.data) for key, _ in self._selector.select(wait)]
        now = clock()
        visits = self._visits
        for entry in ready:
            if entry is None:
                self._drain_wakeup()
            else:
                entry.driver.receive(now)
                if entry.alone:
                    visits.touch(entry)  # (re-timed in _service)
                else:
                    entry.timer = entry.stack.get_timer()  # what it read may have set a timer
        self._service(now)

    def _entry_of(self, driver: Driver | None) -> _Entry | None:
        for entry in self._entries:
            if entry.driver is driver:
                return entry
        return None

    def _service(self, now: float) -> None:
        """The selector-free part of a round: stack timers, events, tasks, flush."""
        for entry in self._swept:
            timer = entry.timer
            if timer is not None and timer <= now and not (entry.holds and entry.holds(now)):
                entry.stack.handle_timer(now)
        if self._alone:
            visits = self._visits
            visits.file()  # (those read this round)
            for entry in visits.due(now):
                entry.stack.handle_timer(now)
        handled = self._dispatch()
        if self.tasks:
            self._run_tasks(now)
            handled = True
        if handled:  # handlers and tasks may have given stacks events
            self._dispatch()
        self._flush(now)
        # what that flush raised goes to its handler now, not at the stack's next visit
        # (which may never come); a handler's commands are flushed in turn
        while self._visits.to_dispatch and self._dispatch():
            self._flush(now)

    def _dispatch(self) -> bool:
        """Hand every stack's events to its handler; True when there was any."""
        any_event = False
        for entry in self._handled:
            next_event = entry.stack.next_event
            handler = entry.handler
            if handler is None:  # pragma: no cover - only entries with a handler are here
                continue
            while (event := next_event()) is not None:
                any_event = True
                handler(event)
        visits = self._visits
        while visits.to_dispatch:  # only a touched stack has events; a handler may touch more
            touched = list(visits.to_dispatch.values())
            visits.to_dispatch.clear()
            for entry in touched:
                handler = entry.handler
                if handler is not None:
                    next_event = entry.stack.next_event
                    while (event := next_event()) is not None:
                        any_event = True
                        handler(event)
        return any_event

    def _run_tasks(self, now: float) -> None:
        """Resume every ready task, each at most once a round; a task that ends or sets a
        Signal can make others ready in the same round."""
        stepped: set[int] = set()
        progress = True
        while progress:
            progress = False
            for task in list(self.tasks):
                if id(task) in stepped or task.done or not task.ready(now):
                    continue
                stepped.add(id(task))
                task.step(now)
                progress = True
            if any(task.done for task in self.tasks):
                for task in [t for t in self.tasks if t.done]:
                    if task.exception is not None:
                        log.warning("task %s failed: %r", task.name, task.exception)
                self.tasks = [task for task in self.tasks if not task.done]

    # == running ===========================================================

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
            self.run_once(max_wait=min(remaining, CONDITION_STEP))
        return condition()

    def run_forever(self) -> None:
        """Service until :meth:`stop` (or a shutdown signal, when handled)."""
        self.stopped = False
        # without the wakeup fd, a stop() from a signal handler is seen within STOP_STEP
        wait = IDLE_WAIT if self._wakeup is not None else STOP_STEP
        flush = True  # only the first round: the caller may have given commands before
        while not self.stopped:
            self._round(wait, flush=flush)
            flush = False

    def run_task(self, body: TaskBody, timeout: float = math.inf) -> Any:
        """Spawn ``body``, service until it ends and return its result (or raise its error).

        Raises :class:`TimeoutError` when it has not ended after ``timeout`` seconds.
        """
        task = self.spawn(body)
        end = self.clock() + timeout
        flush = True  # only the first round: no code of ours runs between rounds
        while not task.done:  # the task changes only inside the loop: no need to look often
            remaining = end - self.clock()
            if remaining <= 0:
                raise TimeoutError(f"task {task.name} still running after {timeout} s")
            self._round(min(remaining, IDLE_WAIT), flush=flush)
            flush = False
        if task.exception is not None:
            raise task.exception
        return task.result

    # == signals and shutdown ==============================================

    def handle_signals(self, signals: Iterable[int] = SHUTDOWN_SIGNALS) -> None:
        """Stop the loop on ``signals``; the selector wakes at once (``set_wakeup_fd``).

        Main thread only.  :meth:`restore_signals` puts the old handlers back.
        """
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._wakeup = (reader, writer)
        self._selector.register(reader.fileno(), selectors.EVENT_READ, None)
        self._previous_wakeup_fd = signal.set_wakeup_fd(writer.fileno(),
                                                        warn_on_full_buffer=False)
        for number in signals:
            self._previous[number] = signal.signal(number, self._on_signal)

    def _on_signal(self, number: int, _frame: FrameType | None) -> None:
        self.signal = number
        self.stopped = True

    def _drain_wakeup(self) -> None:
        if self._wakeup is None:
            return
        with contextlib.suppress(BlockingIOError):
            while self._wakeup[0].recv(4096):
                pass

    def restore_signals(self) -> None:
        """Put back the signal handlers and wakeup fd that were there before."""
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous.clear()
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd)
            reader, writer = self._wakeup
            self._selector.unregister(reader.fileno())
            reader.close()
            writer.close()
            self._wakeup = None

    def serve(self) -> Shutdown:
        """Run until SIGINT or SIGTERM (or :meth:`stop`), then :meth:`shutdown`."""
        self.handle_signals()
        try:
            self.run_forever()
        finally:
            self.restore_signals()
        return self.shutdown()

    def shutdown(self) -> Shutdown:
        """Close every stack and driver (socket files go) and report what was undelivered.

        Every event the closing stacks report also goes to their handlers.
        """
        now = self.clock()
        self._dispatch()
        closing: list[Any] = []
        for driver in self.drivers:
            stack = driver.stack
            stack.close(now=now)
            driver.send(now)
            handler = self.handlers.get(id(driver))
            while (event := stack.next_event()) is not None:
                closing.append(event)
                if handler is not None:
                    handler(event)
        unfinished = tuple(task.name for task in self.tasks if not task.done)
        for task in self.tasks:
            task.body.close()  # runs the task's finally blocks
        self.tasks.clear()
        self.close()
        undelivered = tuple(e for e in closing if type(e).__name__ in UNDELIVERED_EVENTS)
        for event in undelivered:
            log.warning("undelivered at shutdown: %s", _describe(event))
        return Shutdown(self.signal, undelivered, tuple(closing), unfinished)

    def close(self) -> None:
        """Close every driver (without closing stacks) and the selector."""
        for driver in list(self.drivers):
            self.remove(driver)
            driver.close()
        if self._wakeup is not None:
            self.restore_signals()
        self._selector.close()


def _describe(event: Any) -> str:
    """An event in one line, without the message bodies."""
    shown: Mapping[str, Any] = {field.name: getattr(event, field.name)
                                for field in dataclasses.fields(event)
                                if field.name not in {"body", "messages"}}
    return f"{type(event).__name__}({shown})"
