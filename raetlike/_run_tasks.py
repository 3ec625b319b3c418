"""The cooperative loop's micro-threads: tasks and what they wait for."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

__all__ = ["TaskBody", "Signal", "Until", "Task"]

log = logging.getLogger(__name__)

TaskBody = Generator[Any, Any, Any]
"""A micro-thread: a generator that yields what it waits for."""


class Signal:
    """A flag tasks wait on: ``yield signal`` resumes once it is set, with its value."""

    __slots__ = ("is_set", "value")

    def __init__(self) -> None:
        self.is_set = False
        self.value: Any = None

    def set(self, value: Any = None) -> None:
        """Set the flag: every task waiting on it resumes in this round."""
        self.is_set = True
        self.value = value

    def clear(self) -> None:
        """Unset the flag, so later waiters wait again."""
        self.is_set = False
        self.value = None


@dataclass(frozen=True, slots=True)
class Until:
    """Wait until ``predicate()`` holds (resumed with True) or ``timeout`` seconds pass (False).

    The predicate is looked at after every round, never polled: a round
    happens only when a socket, a timer or another task makes one.
    """

    predicate: Callable[[], bool]
    """What to wait for."""
    timeout: float | None = None
    """Seconds to wait at most; None waits for ever."""


class Task:
    """A micro-thread the loop runs; other tasks may ``yield`` it to wait for its end."""

    __slots__ = ("_deadline", "_send", "_throw", "_waiting",
                 "body", "done", "exception", "name", "result")

    def __init__(self, body: TaskBody, name: str) -> None:
        self.name = name
        self.body = body
        self._waiting: Any = None
        self._deadline: float | None = None
        self._send: Any = None
        self._throw: BaseException | None = None
        self.done = False
        """True once the generator returned or raised."""
        self.result: Any = None
        """What the generator returned."""
        self.exception: BaseException | None = None
        """What the generator raised, if it did."""

    def __repr__(self) -> str:
        state = "done" if self.done else "waiting"
        return f"<Task {self.name} {state}>"

    def ready(self, now: float) -> bool:
        """Whether what the task waits for has happened; prepares the value it resumes with."""
        waiting = self._waiting
        if waiting is None:
            self._send = None
            return True
        if isinstance(waiting, Signal):
            self._send = waiting.value
            return waiting.is_set
        if isinstance(waiting, Task):
            if not waiting.done:
                return False
            self._send, self._throw = waiting.result, waiting.exception
            return True
        if isinstance(waiting, Until):
            if waiting.predicate():
                self._send = True
                return True
            if self._deadline is not None and self._deadline <= now:
                self._send = False
                return True
            return False
        # a delay
        self._send = now
        return self._deadline is not None and self._deadline <= now

    def _wait_for(self, waited: Any, now: float) -> None:
        """Record what the task yielded."""
        self._waiting = waited
        self._deadline = None
        if isinstance(waited, bool):
            raise TypeError(f"task {self.name} yielded a bool; yield a delay or a wait object")
        if isinstance(waited, int | float):
            self._deadline = now + max(0.0, float(waited))
        elif isinstance(waited, Until):
            if waited.timeout is not None:
                self._deadline = now + waited.timeout
        elif waited is not None and not isinstance(waited, Signal | Task):
            raise TypeError(f"task {self.name} yielded {waited!r}; "
                            "yield a delay, None, a Signal, an Until or a Task")

    def step(self, now: float) -> None:
        """Resume the generator once."""
        throw, self._throw = self._throw, None
        try:
            waited = self.body.throw(throw) if throw is not None else self.body.send(self._send)
            self._wait_for(waited, now)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
        except Exception as exc:  # noqa: BLE001 - a failing task ends; its waiters get the error
            log.debug("task %s raised %r", self.name, exc)
            self.done, self.exception = True, exc
            self.body.close()

    def wake_time(self) -> float | None:
        """When a delay or an Until timeout resumes the task, if it waits for one."""
        return self._deadline
