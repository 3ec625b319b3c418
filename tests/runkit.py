"""A virtual clock, a selector that jumps it, and in-memory drivers for loop tests.

The selector reports a memory socket readable when datagrams wait in it;
otherwise it advances the clock by the whole timeout it was given (a loop
that polled would show as many short waits).
"""

from __future__ import annotations

import itertools
import selectors
from collections import deque
from dataclasses import dataclass, field
from typing import Any

Address = tuple[str, int]
_fds = itertools.count(10_000)


class VirtualClock:
    """Seconds that move only when the selector sleeps."""

    def __init__(self, start: float = 100.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@dataclass
class Key:
    """What ``select`` hands back (the loop reads ``data`` only)."""

    fd: int
    events: int
    data: Any


@dataclass
class VirtualSelector:
    """Ready when a memory driver holds datagrams; else sleep by jumping the clock."""

    clock: VirtualClock
    keys: dict[int, Key] = field(default_factory=dict)
    waits: list[float] = field(default_factory=list)
    modified: list[tuple[int, int]] = field(default_factory=list)
    """Every ``modify`` call as (descriptor, events)."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> Key:
        self.keys[fileobj] = Key(fileobj, events, data)
        return self.keys[fileobj]

    def unregister(self, fileobj: Any) -> Key:
        return self.keys.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> Key:
        self.modified.append((fileobj, events))
        return self.register(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[Key, int]]:
        ready = [(key, selectors.EVENT_READ) for key in self.keys.values()
                 if isinstance(key.data, MemoryDriver) and key.data.inbox]
        if not ready:
            wait = 0.0 if timeout is None else timeout
            self.waits.append(wait)
            self.clock.now += wait
        return ready

    def close(self) -> None:
        self.keys.clear()


class MemoryNet:
    """Addresses to drivers; a datagram lands in the destination's inbox at once."""

    def __init__(self) -> None:
        self.drivers: dict[Address, MemoryDriver] = {}
        self.delivered = 0


class MemoryDriver:
    """A driver whose socket is a deque on a :class:`MemoryNet`."""

    def __init__(self, net: MemoryNet, stack: Any, address: Address) -> None:
        self.net = net
        self.stack = stack
        self.address = address
        self.inbox: deque[tuple[bytes, Address]] = deque()
        self._fd = next(_fds)
        self.closed = False
        self.sends = 0
        """Calls of :meth:`send` (flushes the loop asked for)."""
        self.writes_pending = False
        """What ``wants_write`` says (as if the kernel refused datagrams)."""
        net.drivers[address] = self

    @property
    def wants_write(self) -> bool:
        return self.writes_pending

    def fileno(self) -> int:
        return self._fd

    def receive(self, now: float) -> int:
        count = len(self.inbox)
        while self.inbox:
            data, source = self.inbox.popleft()
            self.stack.receive_datagram(data, source, now)
        return count

    def send(self, now: float) -> int:
        self.sends += 1
        out = self.stack.datagrams_to_send(now)
        for data, destination in out:
            target = self.net.drivers.get(destination)
            if target is not None and not target.closed:
                target.inbox.append((data, self.address))
                self.net.delivered += 1
        return len(out)

    def close(self) -> None:
        self.closed = True
