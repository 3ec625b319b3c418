"""In-memory channels and a network of them, for tests and single-process setups.

Nothing moves by itself: :meth:`MemoryNetwork.run` flushes endpoints, pumps
devices and delivers queued payloads until everything is quiet, and a test can
instead pick single payloads off a channel's queue to reorder, drop or
duplicate them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from raetlike.sp._channel import Channel, Outgoing, Payload, flush
from raetlike.sp._device import Device

__all__ = ["MemoryChannel", "Endpoint", "MemoryNetwork"]


@dataclass(eq=False, slots=True)
class MemoryChannel:
    """A channel whose sends wait in ``queue`` until the network delivers them."""

    name: str
    """The channel's name at its endpoint (by default the far endpoint's name)."""
    priority: int = 0
    """Lower numbers are tried first."""
    alive: bool = True
    """False refuses every send."""
    capacity: int | None = None
    """Most payloads ``queue`` holds; None for no limit."""
    queue: deque[Payload] = field(default_factory=deque)
    """Sent, not yet delivered."""

    def send(self, payload: Payload) -> bool:
        """Queue ``payload``; False when dead or full."""
        if not self.alive or (self.capacity is not None and len(self.queue) >= self.capacity):
            return False
        self.queue.append(payload)
        return True


class Endpoint(Protocol):
    """What the network needs of an SP endpoint."""

    @property
    def name(self) -> str:
        """The endpoint's name."""
        ...

    def add_channel(self, channel: Channel) -> object:
        """Take a channel in."""
        ...

    def receive(self, channel: Channel, payload: Payload, now: float) -> None:
        """Take one payload in."""
        ...

    def messages_to_send(self) -> list[Outgoing]:
        """Take the queued outgoing payloads."""
        ...

    def refused(self, outgoing: Outgoing, now: float) -> None:
        """A send was refused."""
        ...


class MemoryNetwork:
    """Endpoints joined pairwise by in-memory channels."""

    __slots__ = ("_endpoints", "_far_end")

    def __init__(self) -> None:
        """An empty network."""
        self._endpoints: list[Endpoint] = []
        self._far_end: dict[int, tuple[Endpoint, MemoryChannel]] = {}

    def connect(
        self, near: Endpoint, far: Endpoint, *, priority: int = 0, name: str | None = None
    ) -> tuple[MemoryChannel, MemoryChannel]:
        """Join ``near`` and ``far``; returns (near's channel to far, far's channel to near).

        ``priority`` is the near channel's; ``name`` names it (default: far's name).
        """
        forward = MemoryChannel(name or far.name, priority)
        backward = MemoryChannel(near.name)
        for endpoint in (near, far):
            if all(endpoint is not known for known in self._endpoints):
                self._endpoints.append(endpoint)
        self._far_end[id(forward)] = (far, backward)
        self._far_end[id(backward)] = (near, forward)
        near.add_channel(forward)
        far.add_channel(backward)
        return forward, backward

    def channels(self) -> list[MemoryChannel]:
        """Every channel, both directions."""
        return [pair[1] for pair in self._far_end.values()]

    def deliver(self, channel: MemoryChannel, now: float, index: int = 0) -> bool:
        """Hand the payload at ``index`` of ``channel``'s queue to the far end."""
        if index >= len(channel.queue):
            return False
        payload = channel.queue[index]
        del channel.queue[index]
        far, back = self._far_end[id(channel)]
        far.receive(back, payload, now)
        return True

    def flush(self, now: float) -> int:
        """Send what every endpoint has queued; returns how many sends went through."""
        return sum(flush(endpoint, now) for endpoint in self._endpoints)

    def run(self, now: float, devices: Iterable[Device] = (), limit: int = 100_000) -> int:
        """Flush, pump and deliver until quiet (or ``limit`` deliveries); returns deliveries."""
        devices = list(devices)
        delivered = 0
        while delivered < limit:
            self.flush(now)
            moved = sum(device.pump(now) for device in devices)
            busy = [channel for channel in self.channels() if channel.queue]
            if not busy and not moved:
                self.flush(now)
                if not any(channel.queue for channel in self.channels()):
                    return delivered
                continue
            for channel in busy:
                while channel.queue and delivered < limit:
                    self.deliver(channel, now)
                    delivered += 1
        return delivered
