"""A lossy UDP relay between two estates: the body of ``raetlike chaos``.

:class:`Impairer` is the sans-IO core: it takes datagrams with the time they
arrived and decides, from one seeded RNG, whether each is lost, duplicated,
corrupted (bits flipped), held back behind the next datagram of its flow
(reordered) and how long it is delayed; :meth:`Impairer.due` hands back what
must go out by then.  :class:`ChaosRelay` is the socket driver: one socket
listens for clients, and each client gets its own upstream socket towards the
forward address, so the answers of the forward address go back to the client
that caused them.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import heapq
import json
import logging
import random
import selectors
import signal
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TextIO

from raetlike.udp import Address, format_address

__all__ = [
    "ChaosCounters",
    "ChaosRelay",
    "Direction",
    "Flow",
    "Impairer",
    "Impairment",
    "run_chaos",
]

log = logging.getLogger(__name__)

MAX_DATAGRAM = 65535
MAX_CLIENTS = 1024  # upstream sockets kept; the least recently heard client is forgotten
REORDER_HOLD = 0.05  # seconds a held-back datagram waits for a datagram to overtake it
IDLE_WAIT = 3600.0
SOCKET_BUFFER = 4 * 1024 * 1024


class Direction(enum.Enum):
    """Which way a datagram travels through the relay."""

    UPSTREAM = "upstream"  # client -> forward address
    DOWNSTREAM = "downstream"  # forward address -> client


@dataclass(frozen=True, slots=True)
class Impairment:
    """What the relay does to each datagram (probabilities 0..1, times in seconds)."""

    loss: float = 0.0
    """Chance a datagram is dropped."""
    duplicate: float = 0.0
    """Chance a datagram is sent twice."""
    reorder: float = 0.0
    """Chance a datagram is held back until the next one of its flow has gone out."""
    corrupt: float = 0.0
    """Chance one to three bits of a copy are flipped."""
    delay: float = 0.0
    """Fixed delay of every datagram."""
    jitter: float = 0.0
    """Uniform extra delay, 0..jitter (reorders datagrams too)."""

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder", "corrupt"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a probability between 0 and 1")
        if self.delay < 0 or self.jitter < 0:
            raise ValueError("delay and jitter must not be negative")


@dataclass(slots=True)
class ChaosCounters:
    """What happened to the datagrams of one direction."""

    received: int = 0
    """Datagrams that reached the relay."""
    forwarded: int = 0
    """Datagrams sent on (copies included)."""
    lost: int = 0
    """Datagrams dropped on purpose."""
    duplicated: int = 0
    """Extra copies made."""
    reordered: int = 0
    """Datagrams held back behind a later one."""
    corrupted: int = 0
    """Copies with flipped bits."""
    send_errors: int = 0
    """Datagrams the kernel refused to send."""

    def as_dict(self) -> dict[str, int]:
        """A JSON-ready snapshot."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


Flow = tuple[Direction, Address]
"""A direction and the client it belongs to."""


@dataclass(slots=True)
class _Held:
    data: bytes
    deadline: float


@dataclass(slots=True)
class Impairer:
    """Seeded impairment decisions and a schedule of datagrams to release; no I/O."""

    impairment: Impairment = field(default_factory=Impairment)
    """What to do to the datagrams."""
    seed: int | None = None
    """RNG seed; the same seed and inputs give the same decisions."""
    counters: dict[Direction, ChaosCounters] = field(
        default_factory=lambda: {d: ChaosCounters() for d in Direction})
    """Counters per direction."""
    _rng: random.Random = field(init=False, repr=False)
    _queue: list[tuple[float, int, bytes, Flow]] = field(default_factory=list, init=False,
                                                          repr=False)
    _held: dict[Flow, _Held] = field(default_factory=dict, init=False, repr=False)
    _order: int = field(default=0, init=False, repr=False)
    partitioned: bool = False
    """While True every datagram is lost (a partition; ``raetlike chaos`` toggles it on SIGUSR1)."""

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def receive(self, data: bytes, flow: Flow, now: float) -> None:
        """Take one datagram of ``flow`` that arrived at ``now``."""
        imp, rng = self.impairment, self._rng
        counters = self.counters[flow[0]]
        counters.received += 1
        if self.partitioned:
            counters.lost += 1
            return
        if rng.random() < imp.loss:
            counters.lost += 1
            return
        copies = 2 if rng.random() < imp.duplicate else 1
        counters.duplicated += copies - 1
        for _ in range(copies):
            payload = data
            if data and rng.random() < imp.corrupt:
                payload = self._corrupt(data)
                counters.corrupted += 1
            at = now + imp.delay + rng.random() * imp.jitter
            if flow not in self._held and rng.random() < imp.reorder:
                self._held[flow] = _Held(payload, at + REORDER_HOLD)
                counters.reordered += 1
                continue
            self._schedule(payload, flow, at)
            held = self._held.pop(flow, None)
            if held is not None:  # it goes right after the datagram that overtook it
                self._schedule(held.data, flow, at)

    def _corrupt(self, data: bytes) -> bytes:
        buffer = bytearray(data)
        for _ in range(self._rng.randint(1, 3)):
            buffer[self._rng.randrange(len(buffer))] ^= 1 << self._rng.randrange(8)
        return bytes(buffer)

    def _schedule(self, data: bytes, flow: Flow, at: float) -> None:
        self._order += 1
        heapq.heappush(self._queue, (at, self._order, data, flow))

    def get_timer(self) -> float | None:
        """When the next datagram is due, or None when nothing waits."""
        times = [held.deadline for held in self._held.values()]
        if self._queue:
            times.append(self._queue[0][0])
        return min(times) if times else None

    def due(self, now: float) -> list[tuple[bytes, Flow]]:
        """The datagrams to send by ``now``, in order; held ones whose wait ran out too."""
        for flow, held in list(self._held.items()):
            if held.deadline <= now:
                del self._held[flow]
                self._schedule(held.data, flow, held.deadline)
        out: list[tuple[bytes, Flow]] = []
        while self._queue and self._queue[0][0] <= now:
            _, _, data, flow = heapq.heappop(self._queue)
            out.append((data, flow))
        for _, flow in out:
            self.counters[flow[0]].forwarded += 1
        return out

    def forget(self, client: Address) -> None:
        """Drop what waits for or from ``client`` (its upstream socket is gone)."""
        self._queue = [item for item in self._queue if item[3][1] != client]
        heapq.heapify(self._queue)
        for direction in Direction:
            self._held.pop((direction, client), None)


def _udp_socket(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:  # pragma: no cover - capped by the kernel; the default still works
            log.debug("could not set socket buffer option %s", option)
    return sock


@dataclass(frozen=True, slots=True)
class _Entry:
    """What a readable socket is: the listener, a client's upstream socket or a wakeup."""

    sock: socket.socket
    client: Address | None
    wakeup: bool = False


class ChaosRelay:
    """The socket driver: a listening socket, one upstream socket per client, a selector."""

    def __init__(self, listen: Address, forward: Address, impairer: Impairer,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.forward = forward
        self.impairer = impairer
        self.clock = clock
        self.listener = _udp_socket(listen[0])
        try:
            self.listener.bind(listen)
        except OSError as exc:
            self.listener.close()
            raise OSError(exc.errno, f"cannot bind UDP {format_address(listen)}: "
                                     f"{exc.strerror}") from None
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ, _Entry(self.listener, None))
        self._upstream: OrderedDict[Address, socket.socket] = OrderedDict()
        self.stopped = False

    @property
    def address(self) -> Address:
        """The bound listening (host, port)."""
        host, port = self.listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def counters(self) -> dict[Direction, ChaosCounters]:
        """The impairer's counters per direction."""
        return self.impairer.counters

    def add_wakeup(self, sock: socket.socket) -> None:
        """Also wake up when ``sock`` is readable (a signal's wakeup fd); drained and ignored."""
        self._selector.register(sock, selectors.EVENT_READ, _Entry(sock, None, wakeup=True))

    def _client_socket(self, client: Address) -> socket.socket:
        sock = self._upstream.get(client)
        if sock is not None:
            self._upstream.move_to_end(client)
            return sock
        if len(self._upstream) >= MAX_CLIENTS:
            old, old_sock = self._upstream.popitem(last=False)
            self._selector.unregister(old_sock)
            old_sock.close()
            self.impairer.forget(old)
        sock = _udp_socket(self.forward[0])
        self._selector.register(sock, selectors.EVENT_READ, _Entry(sock, client))
        self._upstream[client] = sock
        return sock

    def _drain(self, sock: socket.socket, flow: Flow, now: float) -> None:
        for _ in range(256):
            try:
                data, source = sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                return
            except OSError as exc:  # e.g. ICMP port unreachable from the far side
                log.debug("recvfrom: %s", exc)
                return
            if flow[0] is Direction.UPSTREAM:
                client = (str(source[0]), int(source[1]))
                self._client_socket(client)
                self.impairer.receive(data, (Direction.UPSTREAM, client), now)
            else:
                self.impairer.receive(data, flow, now)

    def _send(self, now: float) -> None:
        for data, (direction, client) in self.impairer.due(now):
            try:
                if direction is Direction.UPSTREAM:
                    sock = self._upstream.get(client)
                    if sock is None:
                        continue
                    sock.sendto(data, self.forward)
                else:
                    self.listener.sendto(data, client)
            except OSError as exc:
                self.counters[direction].send_errors += 1
                if exc.errno not in {errno.EAGAIN, errno.ENOBUFS, errno.ECONNREFUSED}:
                    log.debug("sendto: %s", exc)

    def run_once(self, max_wait: float = IDLE_WAIT) -> None:
        """Wait for a datagram or the next due time, then relay what is due."""
        now = self.clock()
        deadline = self.impairer.get_timer()
        wait = max_wait if deadline is None else min(max_wait, max(0.0, deadline - now))
        ready = self._selector.select(wait)
        now = self.clock()
        for key, _ in ready:
            entry: _Entry = key.data
            if entry.wakeup:
                with contextlib.suppress(OSError):
                    entry.sock.recv(64)
            elif entry.client is None:
                self._drain(entry.sock, (Direction.UPSTREAM, ("", 0)), now)
            else:
                self._drain(entry.sock, (Direction.DOWNSTREAM, entry.client), now)
        self._send(now)

    def run_forever(self) -> None:
        """Relay until :meth:`stop`."""
        while not self.stopped:
            self.run_once()

    def stop(self) -> None:
        """Make :meth:`run_forever` return after the current round."""
        self.stopped = True

    def close(self) -> None:
        for sock in self._upstream.values():
            sock.close()
        self._upstream.clear()
        self._selector.close()
        self.listener.close()


def run_chaos(listen: Address, forward: Address, impairment: Impairment,
              seed: int | None, out: TextIO) -> int:
    """Relay until SIGINT/SIGTERM; the first line on ``out`` names the bound address.

    On exit the counters go to ``out``: one line per direction, then one JSON
    object.  Returns the exit status (0).
    """
    relay = ChaosRelay(listen, forward, Impairer(impairment, seed))
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    relay.add_wakeup(wake_read)

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("chaos: %s, stopping", signal.Signals(signum).name)
        relay.stop()

    def toggle_partition(_signum: int, _frame: FrameType | None) -> None:
        relay.impairer.partitioned = not relay.impairer.partitioned
        log.info("chaos: partition %s", "on" if relay.impairer.partitioned else "off")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, toggle_partition)
    previous_fd = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
    try:
        out.write(f"chaos listening on {format_address(relay.address)} "
                  f"forwarding to {format_address(forward)}\n")
        out.flush()
        relay.run_forever()
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        relay.close()
        wake_read.close()
        wake_write.close()
    for direction, counters in relay.counters.items():
        figures = " ".join(f"{k} {v}" for k, v in counters.as_dict().items())
        out.write(f"{direction.value}: {figures}\n")
    out.write(json.dumps({d.value: c.as_dict() for d, c in relay.counters.items()}) + "\n")
    out.flush()
    return 0
