"""A simulated lane for the LaneStack tests: yards exchanging pages by path, virtual time.

``LaneNet`` plays the kernel: a datagram to a path with no live stack is
refused with ECONNREFUSED (ENOENT when the path was never bound), and a yard
whose queue holds ``capacity`` undrained pages refuses more with EAGAIN.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lane import LaneConfig, LaneStack, LocalYard, events

DIRECTORY = "/lanes"


@dataclass
class LaneNet:
    """Stacks by socket path, a queue per path, and a virtual clock."""

    now: float = 0.0
    stacks: dict[str, LaneStack] = field(default_factory=dict)
    queues: dict[str, deque[tuple[bytes, str]]] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)
    seen: dict[str, list[events.Event]] = field(default_factory=dict)
    wire: list[tuple[bytes, str, str]] = field(default_factory=list)
    refusals: list[tuple[str, int]] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)

    def yard(self, name: str, *, lane: str = "lane", main: bool = False,
             config: LaneConfig | None = None, yard_session: str | None = None) -> LaneStack:
        """Start a yard (a fresh session unless given) at its lane path."""
        local = LocalYard(name, lane, DIRECTORY, main=main) if yard_session is None \
            else LocalYard(name, lane, DIRECTORY, main=main, yard_session=yard_session)
        stack = LaneStack(local, config, now=self.now)
        self.stacks[stack.path] = stack
        self.queues[stack.path] = deque()
        self.seen[stack.path] = []
        self.bound.add(stack.path)
        return stack

    def kill(self, stack: LaneStack) -> None:
        """The yard's process dies: its socket file stays but nobody listens."""
        del self.stacks[stack.path]
        self.queues.pop(stack.path, None)

    def flush(self) -> None:
        """Every stack sends what it has; the kernel takes or refuses each page."""
        for path, stack in list(self.stacks.items()):
            refused: dict[str, int] = {}
            for data, address in stack.datagrams_to_send(self.now):
                error = refused.get(address) or self._refusal(address)
                if error:
                    refused[address] = error
                    self.refusals.append((address, error))
                    stack.send_failed(address, data, error, self.now)
                    continue
                self.queues[address].append((data, path))
                self.wire.append((data, path, address))

    def _refusal(self, address: str) -> int:
        if address not in self.stacks:
            return errno.ECONNREFUSED if address in self.bound else errno.ENOENT
        if len(self.queues[address]) >= self.capacity.get(address, 1 << 30):
            return errno.EAGAIN
        return 0

    def drain(self) -> bool:
        """Deliver every queued page; True if any moved."""
        moved = False
        for path, stack in list(self.stacks.items()):
            queue = self.queues[path]
            while queue:
                data, source = queue.popleft()
                stack.receive_datagram(data, source, self.now)
                moved = True
            while (event := stack.next_event()) is not None:
                self.seen[path].append(event)
        return moved

    def step(self, dt: float = 0.001) -> None:
        """Flush, deliver, then advance virtual time to the next timer (at most ``dt``)."""
        self.flush()
        self.drain()
        timers = [t for s in self.stacks.values() if (t := s.get_timer()) is not None]
        due = min(timers, default=self.now + dt)
        self.now = max(self.now, min(due, self.now + dt))
        for stack in self.stacks.values():
            timer = stack.get_timer()
            if timer is not None and timer <= self.now:
                stack.handle_timer(self.now)

    def run_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        end = self.now + timeout
        while not condition():
            assert self.now < end, f"condition not met by t={self.now:.3f}"
            self.step(0.01)

    def settle(self, rounds: int = 20) -> None:
        """A few rounds with no time passing, so everything in flight lands."""
        for _ in range(rounds):
            self.flush()
            if not self.drain():
                break

    def of_type(self, stack: LaneStack, kind: type) -> list[Any]:
        self.drain()
        return [e for e in self.seen[stack.path] if isinstance(e, kind)]

    def received(self, stack: LaneStack) -> list[events.MessageReceived]:
        return self.of_type(stack, events.MessageReceived)
