"""Ping an estate that echoes: join it, allow, send numbered messages, time the echoes.

:func:`ping` runs a temporary estate (a fresh name, an in-memory keep) over a
real UDP socket, keeps up to ``window`` messages in flight, and measures each
message's round trip from ``transmit`` to the arrival of its echo.
:func:`ping_yard` does the same with a yard on a lane (``raetlike yard NAME
--echo``): a temporary yard ``ping-<hex>`` in the lane's directory sends
straight to that yard's socket (no join).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lane import LaneConfig, LaneStack, LocalYard
from lane import events as lane_events
from raetlike.errors import BackpressureError, RaetError
from raetlike.run import Loop
from raetlike.udp import Address, UdpDriver, format_address, resolve
from raetlike.uxd import UxdDriver, socket_is_live
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = ["PingError", "PingResult", "ping", "ping_yard", "percentile"]

log = logging.getLogger(__name__)

DEFAULT_COUNT = 1000
DEFAULT_SIZE = 100
DEFAULT_TIMEOUT = 10.0
DEFAULT_WINDOW = 16
STEP = 0.05  # longest sleep in the selector between looks at the clock

Progress = Callable[[int, int], None]
"""Called now and then with (echoes back, messages to send)."""


class PingError(RaetError):
    """A ping that did not get every echo back; the message is the one-line reason."""


@dataclass(frozen=True, slots=True)
class PingResult:
    """What a completed ping measured."""

    target: Address | str
    """The address pinged (a yard's socket path for :func:`ping_yard`)."""
    remote: str
    """The name the pinged estate gave in its join (the yard's name)."""
    count: int
    """Messages sent, all echoed."""
    size: int
    """Payload bytes per message."""
    join_seconds: float
    """From the first join request to the completed allow (0 for a yard)."""
    seconds: float
    """From the first transmit to the last echo."""
    round_trips: tuple[float, ...]
    """Each message's round trip in seconds, in sequence order."""

    @property
    def messages_per_second(self) -> float:
        """Echoed messages per second over the whole run."""
        return self.count / self.seconds if self.seconds > 0 else math.inf

    @property
    def rtt_p50(self) -> float:
        """Median round trip, seconds."""
        return percentile(self.round_trips, 50)

    @property
    def rtt_p99(self) -> float:
        """99th percentile round trip, seconds."""
        return percentile(self.round_trips, 99)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (times in milliseconds)."""
        return {
            "ok": True,
            "target": (self.target if isinstance(self.target, str)
                       else format_address(self.target)),
            "remote": self.remote,
            "count": self.count,
            "echoed": len(self.round_trips),
            "size": self.size,
            "join_ms": round(self.join_seconds * 1000, 3),
            "seconds": round(self.seconds, 6),
            "messages_per_second": round(self.messages_per_second, 1),
            "rtt_p50_ms": round(self.rtt_p50 * 1000, 3),
            "rtt_p99_ms": round(self.rtt_p99 * 1000, 3),
            "rtt_max_ms": round(max(self.round_trips, default=0.0) * 1000, 3),
        }


def percentile(values: tuple[float, ...] | list[float], rank: float) -> float:
    """The nearest-rank ``rank``-th percentile of ``values`` (0.0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = max(0, math.ceil(rank / 100 * len(ordered)) - 1)
    return ordered[min(index, len(ordered) - 1)]


class _EchoRun:
    """What both kinds of ping run keep: the numbered messages sent, when, and their echoes."""

    stack: RoadStack | LaneStack

    def __init__(self, count: int, size: int, window: int, clock: Callable[[], float]) -> None:
        self.count = count
        self.window = window
        self.clock = clock
        self.payload = "x" * size
        self.failure = ""
        self.next_seq = 0
        self.sent_at: dict[int, float] = {}
        self.round_trips: dict[int, float] = {}

    def echoed(self, body: Any) -> None:
        """Time the echo ``body``; anything that is no echo of ours is ignored (logged)."""
        now = self.clock()
        seq = body.get("seq") if isinstance(body, dict) else None
        if not isinstance(seq, int) or seq not in self.sent_at or seq in self.round_trips:
            log.debug("%s: ignoring a message that is no echo of ours", self.stack.name)
            return
        if body.get("payload") != self.payload:
            self.failure = f"echo of message {seq} came back changed"
            return
        self.round_trips[seq] = now - self.sent_at[seq]

    def send_window(self, to: str) -> None:
        """Send the next messages to ``to`` until ``window`` are in flight or the stack is full."""
        while (self.next_seq < self.count
               and self.next_seq - len(self.round_trips) < self.window):
            seq = self.next_seq
            try:
                self.stack.transmit({"seq": seq, "payload": self.payload}, to=to,
                                    now=self.clock())
            except BackpressureError:
                return
            self.sent_at[seq] = self.clock()
            self.next_seq += 1

    def progress_tick(self, progress: Progress | None, since: float) -> Callable[[], None]:
        """A tick that reports progress (if asked for) at most every 0.2 s after ``since``."""
        last_report = since

        def tick() -> None:
            nonlocal last_report
            if progress is not None and self.clock() - last_report >= 0.2:
                last_report = self.clock()
                progress(len(self.round_trips), self.count)

        return tick


class _Pinger(_EchoRun):
    """One ping run: the stack, its socket and the bookkeeping of sequence numbers."""

    stack: RoadStack

    def __init__(self, target: Address, count: int, size: int, window: int,
                 clock: Callable[[], float], *, raet_mode: bool = False) -> None:
        super().__init__(count, size, window, clock)
        self.target = target
        name = f"ping-{secrets.token_hex(4)}"
        config = RoadConfig(auto=AutoMode.ONCE, fast=not raet_mode)
        self.stack = RoadStack(LocalEstate(name), config,
                               keep=MemoryKeep(AutoMode.ONCE), now=clock())
        self.loop = Loop(clock)
        bind_host = "::" if ":" in target[0] else "0.0.0.0"  # noqa: S104 - any local interface
        self.driver = UdpDriver(self.stack, bind_host, 0)
        self.loop.add(self.driver)
        self.remote = ""
        self.allowed = False
        self.pended = False

    def close(self) -> None:
        self.stack.close(now=self.clock())
        self.loop.close()

    def run_until(self, done: Callable[[], bool], deadline: float,
                  tick: Callable[[], None] | None = None) -> bool:
        while not done() and not self.failure:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            self.loop.run_once(max_wait=min(remaining, STEP))
            self.handle_events()
            if tick is not None:
                tick()
            self.driver.send(self.clock())
        return done()

    def handle_events(self) -> None:
        while (event := self.stack.next_event()) is not None:
            self.handle(event)
        self.fill_window()

    def handle(self, event: events.Event) -> None:
        if isinstance(event, events.Joined):
            self.remote = event.remote
            log.debug("%s: joined %s (uid %d)", self.stack.name, event.remote, event.uid)
        elif isinstance(event, events.Allowed):
            self.remote = event.remote
            self.allowed = True
            log.debug("%s: allowed %s", self.stack.name, event.remote)
        elif isinstance(event, events.JoinPending):
            self.pended = True
            log.info("%s: join pending: %s must accept role %r", self.stack.name,
                     format_address(self.target), self.stack.local.role)
        elif isinstance(event, events.JoinRejected):
            self.failure = f"join rejected by {format_address(self.target)}: {event.reason}"
        elif isinstance(event, events.RemoteRemoved):
            self.failure = f"{format_address(self.target)} removed us: {event.reason}"
        elif isinstance(event, events.MessageReceived):
            self.echoed(event.body)
        elif isinstance(event, events.MessageExpired):
            self.failure = f"message {event.message_id} expired: {event.reason}"
        elif isinstance(event, events.JoinFailed | events.AllowFailed):
            log.debug("%s: %s with %s; retrying", self.stack.name, event.reason, event.remote)

    def fill_window(self) -> None:
        if self.allowed:
            self.send_window(self.remote)


def ping(
    target: Address,
    *,
    count: int = DEFAULT_COUNT,
    size: int = DEFAULT_SIZE,
    timeout: float = DEFAULT_TIMEOUT,
    window: int = DEFAULT_WINDOW,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    raet_mode: bool = False,
) -> PingResult:
    """Join the echoing estate at ``target``, send ``count`` messages, wait for every echo.

    Raises :class:`PingError` with a one-line reason when the join is
    rejected or not every echo is back within ``timeout`` seconds (counted
    from the start, join included).
    """
    if count < 1 or size < 0 or window < 1 or timeout <= 0:
        raise ValueError("count and window must be at least 1, size at least 0, timeout > 0")
    target = resolve(target)  # a name is looked up once (AddressError if it does not resolve)
    started = clock()
    deadline = started + timeout
    pinger = _Pinger(target, count, size, window, clock, raet_mode=raet_mode)
    try:
        pinger.stack.join(target, now=clock())
        if not pinger.run_until(lambda: pinger.allowed, deadline):
            raise PingError(pinger.failure or _no_join(target, pinger, timeout))
        allowed_at = clock()
        pinger.fill_window()
        first = clock()
        tick = pinger.progress_tick(progress, since=first)
        if not pinger.run_until(lambda: len(pinger.round_trips) == count, deadline, tick):
            raise PingError(pinger.failure or (
                f"timed out after {timeout:g} s: {len(pinger.round_trips)} of {count} "
                f"echoes back from {format_address(target)}"))
        end = clock()
        if progress is not None:
            progress(count, count)
    finally:
        pinger.close()
    return PingResult(
        target=target, remote=pinger.remote, count=count, size=size,
        join_seconds=allowed_at - started, seconds=end - first,
        round_trips=tuple(pinger.round_trips[seq] for seq in range(count)),
    )


def _no_join(target: Address, pinger: _Pinger, timeout: float) -> str:
    where = format_address(target)
    if pinger.remote:
        return f"timed out after {timeout:g} s: joined {where} but the allow did not complete"
    if pinger.pended:
        role = pinger.stack.local.role
        return (f"timed out after {timeout:g} s: join still pending at {where} "
                f"(accept role {role} there: raetlike keys accept {role})")
    if pinger.stack.stats.datagrams_received == 0:
        return f"timed out after {timeout:g} s: no answer from {where}"
    return f"timed out after {timeout:g} s waiting to join {where}"


class _YardPinger(_EchoRun):
    """One yard ping run: a temporary yard, its socket and the sequence bookkeeping."""

    stack: LaneStack

    def __init__(self, target: str, stack: LaneStack, count: int, size: int, window: int, *,
                 clock: Callable[[], float]) -> None:
        super().__init__(count, size, window, clock)
        self.target = target
        self.stack = stack
        self.loop = Loop(clock)
        self.driver = UxdDriver(stack)
        self.loop.add(self.driver)

    def handle_events(self) -> bool:
        """Take the stack's events, top up the window; True once every echo is back."""
        while (event := self.stack.next_event()) is not None:
            if isinstance(event, lane_events.MessageReceived) and event.yard == self.target:
                self.echoed(event.body)
            elif isinstance(event, lane_events.YardUnreachable):
                self.failure = f"yard {event.yard} unreachable: {event.reason}"
        self.fill_window()
        return bool(self.failure) or len(self.round_trips) == self.count

    def fill_window(self) -> None:
        if not self.failure:
            self.send_window(self.target)


def ping_yard(
    yard: str,
    *,
    lane: str,
    directory: str | None = None,
    count: int = DEFAULT_COUNT,
    size: int = DEFAULT_SIZE,
    timeout: float = DEFAULT_TIMEOUT,
    window: int = DEFAULT_WINDOW,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PingResult:
    """Send ``count`` messages to the echoing ``yard`` on ``lane`` and wait for every echo.

    A temporary yard ``ping-<hex>`` binds a socket in ``directory`` (the
    lane default when None) and sends straight to the yard's socket there.
    Raises :class:`PingError` with a one-line reason when nothing listens at
    the yard's path, the yard becomes unreachable, or not every echo is back
    within ``timeout`` seconds.
    """
    if count < 1 or size < 0 or window < 1 or timeout <= 0:
        raise ValueError("count and window must be at least 1, size at least 0, timeout > 0")
    name = f"ping-{secrets.token_hex(4)}"
    local = (LocalYard(name, lane) if directory is None else LocalYard(name, lane, directory))
    stack = LaneStack(local, LaneConfig(unreachable_after=min(timeout, 10.0)), now=clock())
    path = stack.add_yard(yard).path
    if not socket_is_live(path):
        raise PingError(f"no yard {yard} listening at {path}")
    pinger = _YardPinger(yard, stack, count, size, window, clock=clock)
    first = clock()
    tick = pinger.progress_tick(progress, since=first)

    def done() -> bool:
        tick()
        return pinger.handle_events()

    try:
        pinger.fill_window()
        finished = pinger.loop.run_until(done, timeout=timeout)
        end = clock()
    finally:
        stack.close(now=clock())
        pinger.loop.close()
    if pinger.failure:
        raise PingError(pinger.failure)
    if not finished:
        raise PingError(f"timed out after {timeout:g} s: {len(pinger.round_trips)} of {count} "
                        f"echoes back from yard {yard} at {path}")
    if progress is not None:
        progress(count, count)
    return PingResult(
        target=path, remote=yard, count=count, size=size, join_seconds=0.0,
        seconds=end - first,
        round_trips=tuple(pinger.round_trips[seq] for seq in range(count)),
    )
