"""Run one estate over UDP until told to stop: the body of ``raetlike estate``.

The estate's identity and keys come from its keep (created on first use),
kept remotes are restored, and every join, allow, presence change and
message is logged as one line naming the estate.  With ``echo`` every
message received goes back to its sender unchanged.

A main estate accepts keys it has never seen only when told to (``auto``
defaults to never for a main estate, as RAET 0.6.8 and Salt do, and to once
for the others).  A join left pending is logged once, at WARNING, with the
command that accepts it.  Names from the network are escaped in log lines
(:func:`raetlike.names.safe_name`).
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from lane.yard import LocalYard, yard_path
from raetlike.bus import BusConfig, BusNode, follows_failover
from raetlike.durable import DurableConfig, DurableMessageReceived, DurableRoad
from raetlike.errors import BackpressureError, LocalProtocolError
from raetlike.hosting import ECHO_PREFIX, EstateBus, echo, timer_task
from raetlike.journal import JournalWriter
from raetlike.keep import default_auto
from raetlike.manor import MANOR_YARD, ManorHouse
from raetlike.metrics import StatsLines, Watch, serve_metrics
from raetlike.multimain import MainActive, MultiConfig, MultiMain
from raetlike.names import quoted_name, safe_name
from raetlike.run import Loop
from raetlike.udp import Address, UdpDriver, bind_udp, format_address
from raetlike.uxd import check_socket_path
from raetlike.wire.kinds import AutoMode
from road import events
from road.config import MAX_PENDING_SAVES
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack

__all__ = ["EstateOptions", "default_auto", "default_keep_dir", "run_estate"]

log = logging.getLogger(__name__)

DEFAULT_DURABLE = DurableConfig()
IDLE_STEP = 0.5  # longest sleep in the selector, so a stop request is seen promptly


def default_keep_dir() -> Path:
    """The per-user keep directory: ``$XDG_DATA_HOME/raetlike/keep`` or ``~/.local/share/...``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "raetlike" / "keep"


@dataclass(frozen=True, slots=True)
class EstateOptions:
    """What ``raetlike estate`` was asked to run."""

    name: str
    """The estate's name (also its keep's stack name)."""
    host: str
    """Host to bind."""
    port: int
    """UDP port to bind (0: any free port)."""
    main: bool = False
    """Whether this is the road's main estate (admits joiners)."""
    join: Address | None = None
    """A main estate to join at start."""
    mains: tuple[Address, ...] = ()
    """Several main estates to join at start, in order of preference (with ``multi``)."""
    multi: MultiConfig | None = None
    """How to use ``mains`` (docs/multi-main.md); None with one main or none."""
    auto: AutoMode | None = None
    """Acceptance of keys never seen before; None means :func:`default_auto`."""
    keep_dir: Path | None = None
    """Base directory of keeps; None means :func:`default_keep_dir`."""
    echo: bool = False
    """Send every message received back to its sender."""
    raet_mode: bool = False
    """Never negotiate the fast mode: speak RAET 0.6.8's protocol with every remote."""
    presence_period: float | None = None
    """Seconds between presence checks of a remote (``RoadConfig.period``); None: its default."""
    bus_keepalive: float | None = None
    """With ``bus``: seconds between keepalives to every link (``BusConfig.keepalive_interval``;
    a link silent three times that is lost); None: the bus defaults."""
    lane: str | None = None
    """Also run the main yard of this lane: the estate becomes a manor (docs/manor.md)."""
    lane_dir: Path | None = None
    """The lane's socket directory; None means the lane default."""
    journal_dir: Path | None = None
    """Journal every delivered message under this directory (docs/journal.md)."""
    bus: bool = False
    """Run a bus node serving ``echo.`` (docs/bus.md): remotes and yards become its links."""
    metrics: Address | None = None
    """Serve Prometheus metrics at ``http://HOST:PORT/metrics`` (docs/operations.md)."""
    stats_every: float | None = None
    """Write a JSON stats line to stderr every so many seconds (and on SIGUSR1 anyway)."""
    durable: Path | None = None
    """Keep the outbox and the receive dedup on disk here (docs/reliability.md)."""
    durable_config: DurableConfig = DEFAULT_DURABLE
    """The durable store's fsync policy and bounds (with ``durable``)."""
    relays: tuple[str, ...] = ()
    """Roles of relay estates below us whose bus stamps and routes we trust (docs/relay.md)."""


def _journal(options: EstateOptions) -> JournalWriter:
    """The estate's journal; OSError names ``--journal`` and the path."""
    assert options.journal_dir is not None  # noqa: S101 - only called with one
    try:
        return JournalWriter(options.journal_dir, options.name)
    except OSError as exc:
        raise OSError(exc.errno, f"--journal {options.journal_dir}: {exc.strerror}") from None


class _Estate:
    """A running estate: stack, socket, loop and the event log."""

    def __init__(self, options: EstateOptions, clock: Callable[[], float]) -> None:
        self.options = options
        self.clock = clock
        # every address first: nothing (keys, keep) is made for an estate that cannot run
        if options.lane is not None:
            check_socket_path(LocalYard(MANOR_YARD, options.lane, main=True).path
                              if options.lane_dir is None else
                              yard_path(str(options.lane_dir), options.lane, MANOR_YARD))
        sock = bind_udp(options.host, options.port)
        self.metrics_server: Any = None
        self.metrics_address: Address | None = None
        self.watch = Watch()
        try:
            journal = None if options.journal_dir is None else _journal(options)
            if options.metrics is not None:
                self.metrics_server, self.metrics_address = serve_metrics(options.metrics,
                                                                          self.watch)
            self._start(options, clock, sock, journal)
        except BaseException:
            sock.close()
            self._stop_metrics()
            raise

    def _start(self, options: EstateOptions, clock: Callable[[], float],
               sock: socket.socket, journal: JournalWriter | None) -> None:
        keep_dir = options.keep_dir or default_keep_dir()
        auto = default_auto(options.main) if options.auto is None else options.auto
        # remote records written off the loop: a main in a join storm blocked in fsync
        config = RoadConfig(auto=auto, fast=not options.raet_mode,
                            max_pending_saves=MAX_PENDING_SAVES)
        local, self.keep = open_estate(keep_dir, options.name, main=options.main,
                                       host_address=(options.host, options.port),
                                       auto=auto, max_pending_saves=config.max_pending_saves)
        if options.presence_period is not None:
            config.period = options.presence_period
        self.stack = RoadStack(local, config, keep=self.keep, now=clock())
        self.keep.restore_remotes(self.stack)
        self.durable = None if options.durable is None else DurableRoad(
            self.stack, options.durable, options.durable_config, journal=journal)
        self.mains = None if options.multi is None else MultiMain(
            self.stack, options.mains, options.multi, movable=follows_failover)
        self.road: RoadStack | DurableRoad | MultiMain = (
            self.durable if self.durable is not None else
            self.mains if self.mains is not None else self.stack)
        self.loop = Loop(clock)
        self.driver = UdpDriver(self.road, sock=sock)
        self.loop.add(self.driver)
        self.keep.record_address(self.driver.address)
        self.house = None if options.lane is None else ManorHouse(
            self.road, self.loop, options.lane,
            None if options.lane_dir is None else str(options.lane_dir),
            echo=options.echo, clock=clock)
        self.stopping = False
        self.undelivered = 0
        self.internal_errors = 0  # handlers that raised (internal_error)
        self.rejections = 0  # JoinRejected events (logged loudly now and then)
        self.journal = journal
        self.resend_requests = 0  # stack.stats.resend_requests_sent at the last journal record
        self.round_wall = time.time()  # the wall time journaled for this round's deliveries
        self.pending: dict[str, str] = {}  # remote name -> role of a pending join, logged once
        # durable: the road delivers each bus message once across restarts, so the bus
        # resends nothing (a resend is a new message, which a restarted peer would run again)
        bus_config = BusConfig()
        if self.durable is not None:
            bus_config.retry_interval = math.inf
        if options.bus_keepalive is not None:
            bus_config.keepalive_interval = options.bus_keepalive
            bus_config.keepalive_timeout = 3 * options.bus_keepalive
        self.bus = None if not options.bus else EstateBus(
            BusNode(self.stack.name, config=bus_config, now=clock()), self.road,
            None if self.house is None else self.house.lane, relays=options.relays)
        if self.bus is not None:
            self.bus.node.serve(ECHO_PREFIX, echo)
            self.loop.spawn(timer_task(self.bus.node, clock), name="bus timers")
        self.watch.watch(road=self.stack,
                         lane=None if self.house is None else self.house.lane,
                         manor=None if self.house is None else self.house.manor,
                         mains=self.mains, journal=self.journal, durable=self.durable)
        self.stats_lines = StatsLines(self.watch, sys.stderr, options.stats_every, clock)
        # what deliver() reads for every message, looked up once
        self.local_name = self.stack.name
        self.road_stats = self.stack.stats
        self.echoing = options.echo
        self.debug = log.isEnabledFor(logging.DEBUG)  # handle_events() reads it every round

    @property
    def name(self) -> str:
        return self.stack.name

    def run(self) -> None:
        if self.options.join is not None:
            self.stack.join(self.options.join, now=self.clock())
        if self.mains is not None:
            self.mains.start(self.clock())
        while not self.stopping:
            wait = self.stats_lines.timeout()
            self.loop.run_once(max_wait=IDLE_STEP if wait is None else min(wait, IDLE_STEP))
            self.stats_lines.tick()
            self.handle_events()
            if self.house is not None:
                try:
                    if self.bus is not None:
                        self.bus.take_lane_events(self.house.manor, self.clock())
                    self.house.service()
                except Exception as exc:  # noqa: BLE001 - the backstop: see internal_error
                    self.internal_error("serving the lane", exc)
            self.driver.send(self.clock())
            if self.journal is not None:
                self.journal.tick(time.time())

    def _stop_metrics(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
            self.metrics_server = None

    def close(self) -> None:
        self._stop_metrics()
        self.road.close(now=self.clock())
        self.handle_events()
        self.loop.close()
        if self.journal is not None:
            # the journal's write failures never stop the estate (counted in its stats);
            # the last seal's is told here, and the shutdown goes on
            try:
                self.journal.close()
            except OSError as exc:
                log.error("estate %s: the journal could not be sealed: %s", self.name, exc)
            if self.journal.records_lost or self.journal.write_errors:
                log.warning("estate %s: the journal lost %d record(s) (%d write error(s), "
                            "the last: %s)", self.name, self.journal.records_lost,
                            self.journal.write_errors, self.journal.last_error)

    def handle_events(self) -> None:
        # one journal time for the round's deliveries: they are already received, and the
        # journal formats one time once (JournalWriter.record_delivery's docstring)
        self.round_wall = time.time()
        # read once a round, not once a message: a log level set meanwhile counts from the
        # next round (the name and the stats object never change)
        self.debug = log.isEnabledFor(logging.DEBUG)
        deliver = self.deliver if self.bus is None and self.house is None else None
        while (event := self.road.next_event()) is not None:
            try:
                if deliver is not None and type(event) is events.MessageReceived:
                    deliver(event)
                else:
                    self.handle(event)
            except Exception as exc:  # noqa: BLE001 - the backstop: see internal_error
                self.internal_error(f"handling {type(event).__name__}", exc)

    def internal_error(self, what: str, error: Exception) -> None:
        """A bug of ours that a peer's message tripped (a handler raised): counted and logged
        with its traceback the first time and every 1000th, never the estate's end, as the
        road and lane stacks do for a datagram (``Drop.INTERNAL_ERROR``)."""
        self.internal_errors += 1
        if self.internal_errors % 1000 == 1:
            log.error("estate %s: internal error %s (%d so far); going on", self.name, what,
                      self.internal_errors, exc_info=error)

    def deliver(self, event: events.MessageReceived) -> None:
        """A message when neither a bus nor a manor may take it: :meth:`handle`'s commonest
        case on a path of its own (what it reads for each message looked up once).
        ``tools/bench_journal.py --handle 5`` (CPU a raw delivery in :meth:`handle_events`,
        medians, alternated with the old code): 0.87 µs plain and 1.73 journaling
        through :meth:`handle`'s chain, 0.20 and 0.62-0.68 here."""
        if self.debug:
            log.debug("estate %s: message from %s (transaction %d, %d segments)",
                      self.local_name, safe_name(event.remote), event.transaction_id,
                      event.segments)
        journal = self.journal
        if journal is not None:
            # record(), inline: the resend requests we sent since the last record
            requested = self.road_stats.resend_requests_sent
            journal.record_delivery(self.local_name, event, self.round_wall,
                                    resends=requested - self.resend_requests)
            self.resend_requests = requested
        if self.echoing:
            self.echo(event)

    def handle(self, event: events.Event) -> None:  # noqa: PLR0912 - one branch per event kind
        if type(event) is events.MessageReceived and self.bus is None and self.house is None:
            self.debug = log.isEnabledFor(logging.DEBUG)  # (called outside a round too)
            self.deliver(event)
            return
        name, remote = self.name, safe_name(event.remote)
        if self.bus is not None and self.bus.handle_road_event(event, self.clock()):
            return
        routed = self.house is not None and self.house.handle_road_event(event)
        if isinstance(event, events.MessageReceived):
            log.debug("estate %s: message from %s (transaction %d, %d segments)",
                     name, remote, event.transaction_id, event.segments)
            if self.journal is not None and not (self.durable is not None
                                                 and isinstance(event, DurableMessageReceived)):
                self.record(event)  # (a durable road journals its deliveries itself)
            if self.options.echo and not routed:
                self.echo(event)
        elif isinstance(event, events.MessageSent):
            log.debug("estate %s: message %d delivered to %s", name, event.message_id, remote)
        elif isinstance(event, events.MessageExpired):
            self.undelivered += 1
            log.warning("estate %s: message %d to %s undelivered: %s",
                        name, event.message_id, remote, safe_name(event.reason))
        elif isinstance(event, events.Joined):
            self.pending.pop(event.remote, None)
            log.info("estate %s: joined %s (uid %d%s, %s)", name, remote, event.uid,
                     ", main" if event.main else "",
                     "we asked" if event.initiator else "it asked")
        elif isinstance(event, events.JoinPending):
            self.log_pending(event)
        elif isinstance(event, events.JoinRejected):
            self.pending.pop(event.remote, None)
            # a wanted join is retried every rejoin interval, and a REJECT is unsigned (any
            # peer can send one): the first and every 100th are warnings
            self.rejections += 1
            log.log(logging.WARNING if self.rejections % 100 == 1 else logging.DEBUG,
                    "estate %s: join with %s rejected: %s (%d so far)", name, remote,
                    safe_name(event.reason), self.rejections)
        elif isinstance(event, events.Allowed):
            log.info("estate %s: allowed %s (session %d)", name, remote, event.session_id)
        elif isinstance(event, events.Alive):
            log.info("estate %s: %s is alive", name, remote)
        elif isinstance(event, events.RemoteLost):
            log.info("estate %s: %s lost: %s", name, remote, safe_name(event.reason))
        elif isinstance(event, events.RemoteReaped):
            self.pending.pop(event.remote, None)
            log.info("estate %s: %s reaped", name, remote)
        elif isinstance(event, events.RemoteRemoved):
            self.pending.pop(event.remote, None)
            log.info("estate %s: %s removed: %s", name, remote, safe_name(event.reason))
        elif isinstance(event, events.RemoteMoved):
            log.info("estate %s: %s moved from %s to %s", name, remote,
                     format_address(event.old), format_address(event.new))
        elif isinstance(event, MainActive):
            log.info("estate %s: main %s active (%s%s, %d message(s) moved)", name, remote,
                     event.reason, f", was {safe_name(event.previous)}" if event.previous else "",
                     event.moved)
        elif isinstance(event, events.JoinFailed | events.AllowFailed):
            log.debug("estate %s: %s with %s: %s", name, type(event).__name__, remote,
                      safe_name(event.reason))

    def log_pending(self, event: events.JoinPending) -> None:
        """One WARNING per pending join, with the command that accepts it; repeats at DEBUG.

        The joiner retries while it waits, and each attempt is pending again:
        the operator hears of it once (again only after the remote joined, was
        rejected or removed, or its role changed).
        """
        name, remote = self.name, quoted_name(event.remote)
        if not event.local:
            log.warning("estate %s: our join to %s is pending its operator", name, remote)
            return
        if self.pending.get(event.remote) == event.role:
            log.debug("estate %s: join from %s still pending", name, remote)
            return
        self.pending[event.remote] = event.role
        known = self.stack.names.get(event.remote)
        where = "" if known is None else f", {safe_name(format_address(known.host_address))}"
        role = event.role
        command = shlex.quote(role) if role.isprintable() else quoted_name(role)
        log.warning("estate %s: join from %s (role %s%s) is pending; accept it with: "
                    "raetlike keys accept %s --keep %s", name, remote, quoted_name(role), where,
                    command, shlex.quote(str(self.keep.keep.directory)))

    def record(self, event: events.MessageReceived) -> None:
        """Journal a delivery, with the resend requests we sent since the last one."""
        assert self.journal is not None  # noqa: S101 - the caller checks
        requested = self.road_stats.resend_requests_sent
        self.journal.record_delivery(self.local_name, event, self.round_wall,
                                     resends=requested - self.resend_requests)
        self.resend_requests = requested

    def echo(self, event: events.MessageReceived) -> None:
        try:
            self.road.transmit(event.body, to=event.remote, now=self.clock())
        except (BackpressureError, LocalProtocolError) as exc:
            log.warning("estate %s: cannot echo to %s: %s", self.name, event.remote, exc)


def run_estate(options: EstateOptions, out: TextIO,
               clock: Callable[[], float] = time.monotonic) -> int:
    """Run until SIGINT or SIGTERM; the first line on ``out`` is where it listens.

    Returns 0 after a clean shutdown (undelivered messages are logged).
    Raises :class:`~raetlike.errors.KeepError` for an unusable keep and
    :class:`OSError` when the address cannot be bound.
    """
    estate = _Estate(options, clock)

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("estate %s: %s, stopping", estate.name, signal.Signals(signum).name)
        estate.stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, estate.stats_lines.request)
    try:
        # only now: a SIGTERM sent as soon as this line is read must stop us cleanly
        out.write(f"estate {estate.name} listening on {format_address(estate.driver.address)}\n")
        if estate.metrics_address is not None:
            out.write(f"metrics on http://{format_address(estate.metrics_address)}/metrics\n")
        out.flush()
        estate.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        estate.close()
    log.info("estate %s: stopped; %d undelivered message(s)", estate.name, estate.undelivered)
    return 0
