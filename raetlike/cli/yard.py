"""Run one yard on a lane until told to stop: the body of ``raetlike yard``.

Every message received is logged as one line naming the yard.  With
``echo`` each one goes back to where it came from: a routed message
(``{"route": {"src": ..., "dst": ...}}``) with its route reversed, through
the lane's main yard (a manor routes it on, across the road if need be); a
message without a route straight back to the yard that sent it.  Error
messages are logged, never echoed.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TextIO

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.bus import BusAttachment, BusNode
from raetlike.channels import LaneChannel
from raetlike.errors import RaetError
from raetlike.hosting import ECHO_PREFIX, echo, timer_task
from raetlike.manor import MANOR_YARD, RouteError, is_error, parse_route, with_route
from raetlike.metrics import StatsLines, Watch, serve_metrics
from raetlike.names import safe_name
from raetlike.run import Loop
from raetlike.udp import format_address
from raetlike.uxd import UxdDriver

__all__ = ["YardOptions", "echo_of", "run_yard"]

log = logging.getLogger(__name__)

IDLE_STEP = 0.5  # longest sleep in the selector, so a stop request is seen promptly


@dataclass(frozen=True, slots=True)
class YardOptions:
    """What ``raetlike yard`` was asked to run."""

    name: str
    """The yard's name."""
    lane: str
    """The lane's name."""
    directory: str | None = None
    """The lane's socket directory; None means the lane default."""
    main: bool = False
    """Be the lane's main yard (routes pages between the other yards)."""
    main_yard: str = MANOR_YARD
    """The main yard's name, for a yard that is not main."""
    echo: bool = False
    """Send every message back to where it came from."""
    bus: bool = False
    """Run a bus node serving ``echo.``, its upstream the main yard (docs/bus.md)."""
    metrics: tuple[str, int] | None = None
    """Serve Prometheus metrics at ``http://HOST:PORT/metrics`` (docs/operations.md)."""
    stats_every: float | None = None
    """Write a JSON stats line to stderr every so many seconds (and on SIGUSR1 anyway)."""


def echo_of(body: dict[str, Any], sender: str, main_yard: str | None) -> tuple[dict[str, Any], str]:
    """The echo of ``body`` from the yard ``sender`` and the yard to send it to.

    A routed body goes back with its route reversed through ``main_yard``
    (when there is one); anything else goes straight back to ``sender``.
    """
    try:
        route = parse_route(body)
    except RouteError:
        route = None
    if route is None:
        return body, sender
    return with_route(body, route.reversed()), main_yard or sender


def run_yard(options: YardOptions, out: TextIO,
             clock: Callable[[], float] = time.monotonic) -> int:
    """Run until SIGINT or SIGTERM; the first line on ``out`` is the socket path.

    Raises :class:`~raetlike.uxd.YardRunningError` when a live yard holds the
    socket, :class:`OSError` when it cannot be bound.
    """
    local = (LocalYard(options.name, options.lane, main=options.main)
             if options.directory is None
             else LocalYard(options.name, options.lane, options.directory, main=options.main))
    main_yard = None if options.main or options.main_yard == options.name else options.main_yard
    stack = LaneStack(local, LaneConfig(main_yard=main_yard), now=clock())
    watch = Watch(lane=stack)
    server, bound = (None, None) if options.metrics is None else serve_metrics(options.metrics,
                                                                               watch)
    try:
        loop = Loop(clock)
        loop.add(UxdDriver(stack))
    except BaseException:
        if server is not None:
            server.shutdown()
            server.server_close()
        raise
    lines = StatsLines(watch, sys.stderr, options.stats_every, clock)
    bus = _bus(stack, loop, main_yard, clock) if options.bus else None
    stopping = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        log.info("yard %s: %s, stopping", stack.name, signal.Signals(signum).name)
        stopping = True
        loop.stop()

    def handle() -> bool:
        lines.tick()
        while (event := stack.next_event()) is not None:
            if bus is not None and bus.handle_event(event, clock()):
                continue
            if isinstance(event, events.MessageReceived):
                _received(stack, event, main_yard, echo=options.echo, now=clock())
            elif isinstance(event, events.YardUnreachable):
                log.warning("yard %s: %d message(s) to %s undelivered: %s", stack.name,
                            len(event.messages), event.yard, event.reason)
        return stopping

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lines.request)
    try:
        # only now: a SIGTERM sent as soon as this line is read must stop us cleanly
        out.write(f"yard {stack.name} listening on {stack.path}\n")
        if bound is not None:
            out.write(f"metrics on http://{format_address(bound)}/metrics\n")
        out.flush()
        while not stopping:
            wait = lines.timeout()
            loop.run_until(handle, timeout=IDLE_STEP if wait is None else min(wait, IDLE_STEP))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.shutdown()
            server.server_close()
        stack.close(now=clock())
        loop.close()
    log.info("yard %s: stopped", stack.name)
    return 0


def _bus(stack: LaneStack, loop: Loop, main_yard: str | None,
         clock: Callable[[], float]) -> BusAttachment | None:
    """A bus node serving ``echo.`` with the main yard upstream (none for a main yard)."""
    if main_yard is None:
        return None
    node = BusNode(stack.name, now=clock())
    node.serve(ECHO_PREFIX, echo)
    node.add_link(LaneChannel(stack, main_yard), upstream=True)
    loop.spawn(timer_task(node, clock), name="bus timers")
    return BusAttachment(node)


def _received(stack: LaneStack, event: events.MessageReceived, main_yard: str | None, *,
              echo: bool, now: float) -> None:
    if is_error(event.body):
        log.warning("yard %s: error from %s: %s", stack.name, event.yard,
                    safe_name(event.body["error"]))
        return
    log.debug("yard %s: message from %s (%d pages)", stack.name, event.yard, event.pages)
    if not echo:
        return
    body, to = echo_of(event.body, event.yard, main_yard)
    try:
        stack.transmit(body, to=to, now=now)
    except RaetError as exc:
        log.warning("yard %s: cannot echo to %s: %s", stack.name, to, exc)
