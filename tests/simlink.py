"""A simulated network with a virtual clock for sans-IO stacks.

Datagrams between stacks can be dropped, duplicated, reordered (by jitter),
delayed and corrupted, all from one seeded RNG, so every run is repeatable.
No sockets, no sleeps: the clock jumps to the next arrival or timer.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Address = tuple[str, int]


class SansIO(Protocol):
    def receive_datagram(self, data: bytes, source: Address, now: float) -> None: ...
    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]: ...
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...
    def next_event(self) -> Any: ...


@dataclass
class Impairment:
    """What the link does to each datagram (probabilities 0..1, times in seconds)."""

    loss: float = 0.0
    duplicate: float = 0.0
    corrupt: float = 0.0
    delay: float = 0.0005
    jitter: float = 0.0  # uniform extra delay: reorders datagrams


@dataclass
class LinkCounters:
    sent: int = 0
    dropped: int = 0
    duplicated: int = 0
    corrupted: int = 0
    delivered: int = 0


@dataclass
class SimNet:
    """Stacks by address, a virtual clock, and impaired delivery between them."""

    seed: int = 0
    impairment: Impairment = field(default_factory=Impairment)
    now: float = 0.0
    stacks: dict[Address, SansIO] = field(default_factory=dict)
    events: dict[Address, list[Any]] = field(default_factory=dict)
    counters: LinkCounters = field(default_factory=LinkCounters)
    blocked: set[Address] = field(default_factory=set)
    tap: Callable[[bytes, Address, Address], None] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._queue: list[tuple[float, int, bytes, Address, Address]] = []
        self._seq = 0

    def add(self, address: Address, stack: SansIO) -> SansIO:
        self.stacks[address] = stack
        self.events[address] = []
        return stack

    def inject(self, data: bytes, source: Address, destination: Address) -> None:
        """Put a datagram on the wire by hand (replays, forgeries)."""
        self._schedule(data, source, destination, self.now)

    def _schedule(self, data: bytes, source: Address, destination: Address, at: float) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, data, source, destination))

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        imp, rng = self.impairment, self.rng
        self.counters.sent += 1
        if self.tap is not None:
            self.tap(data, source, destination)
        if source in self.blocked or destination in self.blocked or rng.random() < imp.loss:
            self.counters.dropped += 1
            return
        copies = 2 if rng.random() < imp.duplicate else 1
        self.counters.duplicated += copies - 1
        for _ in range(copies):
            payload = data
            if rng.random() < imp.corrupt and data:
                buf = bytearray(data)
                spot = rng.randrange(len(buf))
                buf[spot] ^= 1 << rng.randrange(8)
                payload = bytes(buf)
                self.counters.corrupted += 1
            at = self.now + imp.delay + rng.random() * imp.jitter
            self._schedule(payload, source, destination, at)

    def _flush(self) -> None:
        for address, stack in self.stacks.items():
            for data, destination in stack.datagrams_to_send(self.now):
                self._transmit(data, address, destination)
            while (event := stack.next_event()) is not None:
                self.events[address].append(event)

    def step(self) -> bool:
        """Advance to the next arrival or timer and process it; False when idle."""
        self._flush()
        times = [t for t in (s.get_timer() for s in self.stacks.values()) if t is not None]
        if self._queue:
            times.append(self._queue[0][0])
        if not times:
            return False
        self.now = max(self.now, min(times))
        while self._queue and self._queue[0][0] <= self.now:
            _, _, data, source, destination = heapq.heappop(self._queue)
            stack = self.stacks.get(destination)
            if stack is not None:
                self.counters.delivered += 1
                stack.receive_datagram(data, source, self.now)
        for stack in self.stacks.values():
            timer = stack.get_timer()
            if timer is not None and timer <= self.now:
                stack.handle_timer(self.now)
        self._flush()
        return True

    def run_until(self, condition: Callable[[], bool], timeout: float = 60.0,
                  max_steps: int = 2_000_000) -> bool:
        """Step until ``condition()`` holds or ``timeout`` virtual seconds pass."""
        deadline = self.now + timeout
        for _ in range(max_steps):
            self._flush()
            if condition():
                return True
            if self.now > deadline or not self.step():
                return condition()
        return condition()

    def run_to(self, moment: float) -> None:
        """Step through everything due before ``moment``, then set the clock to it (a
        moment between two arrivals, which ``run_for`` would step past)."""
        while True:
            self._flush()
            times = [t for t in (s.get_timer() for s in self.stacks.values()) if t is not None]
            if self._queue:
                times.append(self._queue[0][0])
            if not times or min(times) >= moment:
                break
            self.step()
        self.now = max(self.now, moment)

    def run_for(self, seconds: float) -> None:
        """Step for ``seconds`` of virtual time."""
        end = self.now + seconds
        self.run_until(lambda: self.now >= end, timeout=seconds + 1)

    def of_type(self, address: Address, kind: type) -> list[Any]:
        """The events of one type a stack produced so far."""
        return [e for e in self.events[address] if isinstance(e, kind)]
