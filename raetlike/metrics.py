"""What a running estate, yard or manor exposes while it runs: Prometheus
metrics and JSON stats lines.

Nothing here is on the hot path.  The stacks keep plain integer counters as
they go (:class:`road.stats.RoadStats`, each remote's
:class:`road.stats.RemoteTraffic`, :class:`lane.stats.LaneStats`, the manor's
:class:`~raetlike.manor.ManorStats`); a :class:`Watch` reads them only when
asked: when Prometheus scrapes (``--metrics HOST:PORT``), every ``--stats-every
S`` seconds, or on SIGUSR1.

The metrics are served by prometheus_client's WSGI app on a bounded server
of our own (:class:`MetricsServer`), in its thread: at most
:data:`METRICS_MAX_CONNECTIONS` connections are handled at once, each in its
own thread, :data:`METRICS_PER_ADDRESS` of them from one client address (more
are closed at once and counted), and each must send its
whole request within :data:`METRICS_TIMEOUT` seconds (each write of the
answer has as long), so idle or trickling clients hold no thread for long.
A scrape reads the stacks' counters while the loop may be changing them: it
copies each table in one C-level call (``list(d.values())``, ``dict(c)``), which
CPython runs under the GIL without giving way to the loop, and reads plain
ints, so a scrape sees each counter whole (not every counter at one instant).

Metric names (docs/operations.md has the table): ``raetlike_road_*`` for a
road stack, ``raetlike_remote_*`` per remote estate, ``raetlike_lane_*`` and
``raetlike_lane_yard_queued`` for a lane stack, ``raetlike_manor_*`` for a
manor, ``raetlike_mains_*`` for an estate joined to several mains,
``raetlike_journal_*`` for an estate's journal, ``raetlike_durable_*`` for its durable
store (the write errors it went on after, what it holds).  Counters
end in ``_total``.  Every series has an ``estate`` (road, manor) or ``yard``
(lane) label; how many series there are follows from the
stacks' own bounds on remotes and yards.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import fields
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TextIO, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raetlike import __version__

if TYPE_CHECKING:
    from lane.stack import LaneStack
    from raetlike.durable import DurableRoad
    from raetlike.journal import JournalWriter
    from raetlike.manor import Manor
    from raetlike.multimain import MultiMain
    from road.stack import RoadStack

__all__ = [
    "METRICS_MAX_CONNECTIONS",
    "METRICS_PER_ADDRESS",
    "METRICS_TIMEOUT",
    "MetricsServer",
    "StatsLines",
    "Watch",
    "serve_metrics",
]

logger = logging.getLogger(__name__)

METRICS_MAX_CONNECTIONS = 16
"""Most connections the metrics endpoint handles at once (one thread each); a
connection beyond them is closed as soon as it is accepted (``MetricsServer.refused``)."""

METRICS_PER_ADDRESS = 4
"""Most of those connections one client address holds at once: one more from it is
closed as soon as it is accepted (``MetricsServer.refused``), so a single host holding
idle connections cannot keep a scraper on another address out."""

METRICS_TIMEOUT = 5.0
"""Seconds a metrics connection has, from its accept, to send its whole request; and
seconds each write of the answer may take.  Later, the connection is closed
(``MetricsServer.timed_out``)."""


def _counters(stats: object) -> Iterator[tuple[str, int]]:
    """The plain integer counters of a stats dataclass, by field name."""
    for field in fields(stats):  # type: ignore[arg-type]
        value = getattr(stats, field.name)
        if isinstance(value, int) and not isinstance(value, bool):
            yield field.name, value


class Watch:
    """Reads one process's stacks when asked: a Prometheus collector and stats lines.

    Give it the stacks the process runs: a road stack (an estate), a lane
    stack (a yard), or both and the manor between them.  Until it has any, a
    scrape is empty.
    """

    def __init__(self, *, road: RoadStack | None = None, lane: LaneStack | None = None,
                 manor: Manor | None = None, mains: MultiMain | None = None,
                 journal: JournalWriter | None = None, durable: DurableRoad | None = None,
                 clock: Any = time.time) -> None:
        self.road = road
        self.lane = lane
        self.manor = manor
        self.mains = mains
        self.journal = journal
        self.durable = durable
        self.clock = clock

    def watch(self, *, road: RoadStack | None = None, lane: LaneStack | None = None,
              manor: Manor | None = None, mains: MultiMain | None = None,
              journal: JournalWriter | None = None,
              durable: DurableRoad | None = None) -> None:
        """Read these stacks from now on (a server may be up before they are made)."""
        self.road, self.lane, self.manor, self.mains = road, lane, manor, mains
        self.journal, self.durable = journal, durable

    # -- Prometheus ----------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """Every metric family, read now (prometheus_client's Collector protocol)."""
        if self.road is not None:
            yield from self._road(self.road)
        if self.lane is not None:
            yield from self._lane(self.lane)
        if self.manor is not None and self.road is not None:
            yield from self._manor(self.manor, self.road.name)
        if self.mains is not None:
            yield from self._mains(self.mains)
        if self.journal is not None:
            yield from self._journal(self.journal)
        if self.durable is not None:
            yield from self._durable(self.durable)

    def _road(self, stack: RoadStack) -> Iterator[Metric]:
        estate = stack.name
        stats = stack.stats
        for name, value in _counters(stats):
            if name in ("drops",):
                continue
            family = CounterMetricFamily(f"raetlike_road_{name}", f"road stack: {name}",
                                         labels=["estate"])
            family.add_metric([estate], value)
            yield family
        dropped = CounterMetricFamily(
            "raetlike_road_dropped", "datagrams (or parts) dropped, by reason",
            labels=["estate", "reason"])
        for drop, times in dict(stats.dropped).items():
            dropped.add_metric([estate, drop.value], times)
        yield dropped
        remotes = stack.remote_stats()
        known = GaugeMetricFamily("raetlike_road_remotes", "remote estates known",
                                  labels=["estate"])
        known.add_metric([estate], len(remotes))
        yield known
        labels = ["estate", "remote"]
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "mode": GaugeMetricFamily("raetlike_remote_mode",
                                      "1 for the mode spoken with the remote (fast or raet)",
                                      labels=[*labels, "mode"]),
            "allowed": GaugeMetricFamily("raetlike_remote_allowed",
                                         "1 once an allow completed with the remote",
                                         labels=labels),
            "alive": GaugeMetricFamily("raetlike_remote_alive",
                                       "1 alive, 0 lost, absent before presence is known",
                                       labels=labels),
            "rtt": GaugeMetricFamily("raetlike_remote_rtt_seconds",
                                     "smoothed round-trip time", labels=labels),
            "queued": GaugeMetricFamily("raetlike_remote_queued",
                                        "messages in the outbox or in flight to the remote",
                                        labels=labels),
            "last_heard": GaugeMetricFamily(
                "raetlike_remote_last_heard_seconds",
                "seconds since the last authenticated datagram from the remote",
                labels=labels),
            "resends": CounterMetricFamily("raetlike_remote_resends",
                                           "packets, segments or datagrams sent again",
                                           labels=labels),
            "bytes_in": CounterMetricFamily("raetlike_remote_bytes_received",
                                            "authenticated bytes received from the remote",
                                            labels=labels),
            "bytes_out": CounterMetricFamily("raetlike_remote_bytes_sent",
                                             "bytes sent to the remote", labels=labels),
            "datagrams_in": CounterMetricFamily(
                "raetlike_remote_datagrams_received",
                "authenticated datagrams received from the remote", labels=labels),
            "datagrams_out": CounterMetricFamily("raetlike_remote_datagrams_sent",
                                                 "datagrams sent to the remote",
                                                 labels=labels),
            "dropped": CounterMetricFamily(
                "raetlike_remote_dropped",
                "authenticated datagrams from the remote dropped anyway, by reason",
                labels=[*labels, "reason"]),
        }
        for remote in remotes:
            key = [estate, remote.name]
            families["mode"].add_metric([*key, remote.mode], 1)
            families["allowed"].add_metric(key, int(remote.allowed))
            if remote.alive is not None:
                families["alive"].add_metric(key, int(remote.alive))
            if remote.rtt is not None:
                families["rtt"].add_metric(key, remote.rtt)
            families["queued"].add_metric(key, remote.queued)
            if remote.last_heard is not None:
                families["last_heard"].add_metric(key, remote.last_heard)
            for name in ("resends", "bytes_in", "bytes_out", "datagrams_in", "datagrams_out"):
                families[name].add_metric(key, getattr(remote, name))
            for reason, n in remote.dropped.items():
                families["dropped"].add_metric([*key, reason], n)
        yield from families.values()

    def _lane(self, stack: LaneStack) -> Iterator[Metric]:
        yard = stack.name
        stats = stack.stats
        for name, value in _counters(stats):
            family = CounterMetricFamily(f"raetlike_lane_{name}", f"lane stack: {name}",
                                         labels=["yard"])
            family.add_metric([yard], value)
            yield family
        dropped = CounterMetricFamily("raetlike_lane_dropped",
                                      "pages or books dropped, by reason",
                                      labels=["yard", "reason"])
        for lane_drop, times in dict(stats.dropped).items():
            dropped.add_metric([yard, lane_drop.value], times)
        yield dropped
        queued = GaugeMetricFamily("raetlike_lane_yard_queued",
                                   "messages waiting in the outbox to a yard",
                                   labels=["yard", "remote"])
        for remote in list(stack.yards.values()):
            queued.add_metric([yard, remote.name], len(remote.outbox))
        yield queued

    def _manor(self, manor: Manor, estate: str) -> Iterator[Metric]:
        stats = manor.stats
        for name, value in _counters(stats):
            family = CounterMetricFamily(f"raetlike_manor_{name}", f"manor: {name}",
                                         labels=["estate"])
            family.add_metric([estate], value)
            yield family
        problems = CounterMetricFamily("raetlike_manor_problems",
                                       "unroutable messages, by problem",
                                       labels=["estate", "problem"])
        for problem, count in dict(stats.problems).items():
            problems.add_metric([estate, str(problem)], count)
        yield problems

    def _mains(self, mains: MultiMain) -> Iterator[Metric]:
        estate = mains.name
        for name, value in _counters(mains.stats):
            family = CounterMetricFamily(f"raetlike_mains_{name}", f"several mains: {name}",
                                         labels=["estate"])
            family.add_metric([estate], value)
            yield family
        upstream = GaugeMetricFamily("raetlike_mains_upstream",
                                     "1 for each main in use now (failover: the active one)",
                                     labels=["estate", "remote"])
        for remote in mains.upstreams():
            upstream.add_metric([estate, remote], 1)
        yield upstream

    def _journal(self, journal: JournalWriter) -> Iterator[Metric]:
        yield from _estate_counters("journal", "journal", journal.node,
                                    _journal_counters(journal))

    def _durable(self, durable: DurableRoad) -> Iterator[Metric]:
        estate = durable.name
        yield from _estate_counters("durable", "durable store", estate,
                                    _durable_counters(durable))
        held = GaugeMetricFamily("raetlike_durable_held",
                                 "durable store: messages held (accepted, fate not known)",
                                 labels=["estate"])
        held.add_metric([estate], len(durable.outbox))
        yield held

    # -- stats lines ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything as one JSON-ready dict (the stats line)."""
        line: dict[str, Any] = {"ts": round(self.clock(), 3), "version": __version__}
        if self.road is not None:
            line["estate"] = self.road.name
            line["road"] = self.road.stats.as_dict()
            line["remotes"] = [remote.as_dict() for remote in self.road.remote_stats()]
        if self.lane is not None:
            line["yard"] = self.lane.name
            line["lane"] = self.lane.stats.as_dict()
            line["yards"] = {remote.name: {"queued": len(remote.outbox)}
                             for remote in list(self.lane.yards.values())}
        if self.manor is not None:
            stats = self.manor.stats
            manor: dict[str, Any] = dict(_counters(stats))
            manor["problems"] = {str(p): n for p, n in dict(stats.problems).items()}
            line["manor"] = manor
        if self.mains is not None:
            line["mains"] = {**dict(_counters(self.mains.stats)),
                             "active": self.mains.active, "upstreams": self.mains.upstreams()}
        if self.journal is not None:
            error = self.journal.last_error
            line["journal"] = {**{name: value for name, value, _ in
                                  _journal_counters(self.journal)},
                               "last_error": None if error is None else str(error)}
        if self.durable is not None:
            failed = self.durable.last_error
            line["durable"] = {**{name: value for name, value, _ in
                                  _durable_counters(self.durable)},
                               "held": len(self.durable.outbox),
                               "last_error": None if failed is None else str(failed)}
        return line


def _estate_counters(part: str, title: str, estate: str,
                     counters: list[tuple[str, int, str]]) -> Iterator[Metric]:
    """``raetlike_PART_NAME_total`` for each ``(name, value, what)`` of ``counters``, labelled
    with the estate."""
    for name, value, what in counters:
        family = CounterMetricFamily(f"raetlike_{part}_{name}", f"{title}: {what}",
                                     labels=["estate"])
        family.add_metric([estate], value)
        yield family


def _journal_counters(journal: JournalWriter) -> list[tuple[str, int, str]]:
    return [("records_written", journal.records_written, "records taken (written or waiting)"),
            ("records_lost", journal.records_lost,
             ("records not in the journal (refused while it could not be written, or in "
              "a removed segment)")),
            ("write_errors", journal.write_errors, "journal I/O operations that failed")]


def _durable_counters(durable: DurableRoad) -> list[tuple[str, int, str]]:
    return [("held_for_room", durable.held_for_room,
             "rounds whose datagrams waited: no room on the disk for the dedup marks"),
            ("held_for_errors", durable.held_for_errors,
             "rounds whose datagrams waited: another write error kept the marks from disk"),
            ("sync_errors", durable.sync_errors, "interval syncs that failed"),
            ("write_errors", durable.write_errors,
             "write errors met and gone on after (held rounds, syncs, close)"),
            ("journal_failures", durable.journal_failures,
             "durable deliveries the journal could not take (marks kept in the store)"),
            ("duplicates", durable.duplicates_seen, "durable messages received again, dropped")]


class _Collector(Collector):
    def __init__(self, watch: Watch) -> None:
        self.watch = watch

    def collect(self) -> Iterator[Metric]:
        return self.watch.collect()


class _ServerCollector(Collector):
    """The endpoint's own counters: connections it refused, timed out or failed."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        server = self.server
        for name, value, what in (
                ("refused", server.refused,
                 "connections closed at once: past the endpoint's or one address's bound"),
                ("timed_out", server.timed_out,
                 "connections that did not send their request within the timeout"),
                ("failed", server.failed, "connections that ended in another error")):
            family = CounterMetricFamily(f"raetlike_metrics_connections_{name}",
                                         f"metrics endpoint: {what}")
            family.add_metric([], value)
            yield family


class _DeadlineReader(io.RawIOBase):
    """Reads a socket until a deadline: each read waits only for the time left, then
    TimeoutError, so a client trickling its request a byte at a time gains nothing.
    Between reads the socket's timeout is ``timeout`` again (for writing the answer)."""

    def __init__(self, sock: socket.socket, deadline: float, timeout: float) -> None:
        super().__init__()
        self.sock = sock
        self.deadline = deadline
        self.timeout = timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long")
        self.sock.settimeout(left)
        try:
            return self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.timeout)


class _Answer(ServerHandler):
    """wsgiref's answer to one request, but an error in it (the client stopped reading,
    reset the connection) is counted by the server, not printed to stderr."""

    def log_exception(
        self, exc_info: tuple[type[BaseException], BaseException, TracebackType] | tuple[
            None, None, None],
    ) -> None:
        handler = self.request_handler  # type: ignore[attr-defined]
        server = handler.server
        assert isinstance(server, MetricsServer)  # noqa: S101 - only MetricsServer uses it
        server.failure(exc_info[1], handler.client_address)


class _Handler(WSGIRequestHandler):
    """One request per connection, read by its deadline; logs nothing per request."""

    def setup(self) -> None:
        server = self.server
        assert isinstance(server, MetricsServer)  # noqa: S101 - only MetricsServer uses it
        super().setup()
        timeout = server.timeout_seconds
        self.connection.settimeout(timeout)  # for each write of the answer
        # the whole request must be in by the deadline counted from here (the accept)
        self.rfile.close()  # the base's reader: the socket closes only when it is
        self.rfile = io.BufferedReader(_DeadlineReader(
            self.connection, time.monotonic() + timeout, timeout))

    def handle(self) -> None:
        """WSGIRequestHandler.handle, answering with :class:`_Answer`."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error was sent
            return
        answer = _Answer(self.rfile, cast("IO[bytes]", self.wfile), self.get_stderr(),
                         self.get_environ(), multithread=False)
        answer.request_handler = self  # type: ignore[attr-defined]
        answer.run(self.server.get_app())  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Log nothing (prometheus_client's server does not either)."""


class MetricsServer(WSGIServer):
    """A WSGI server with bounds: at most ``max_connections`` connections at once, one
    thread each, and ``per_address`` of them from one client address (more are closed at
    once and counted in ``refused``), each with
    ``timeout_seconds`` to send its request (``timed_out`` counts those that did not;
    ``failed`` other connections that ended in an error).  Nothing is printed per
    connection."""

    request_queue_size = 64
    """The listen backlog: connections the kernel completes while the accepting
    thread catches up (the base's 5 makes a burst of clients wait a SYN resend)."""

    def __init__(self, address: tuple[str, int], *,
                 family: socket.AddressFamily = socket.AF_INET,
                 max_connections: int = METRICS_MAX_CONNECTIONS,
                 per_address: int = METRICS_PER_ADDRESS,
                 timeout: float = METRICS_TIMEOUT) -> None:
        if max_connections < 1 or per_address < 1 or timeout <= 0:
            raise ValueError("a metrics server needs a connection and some time")
        self.address_family = family
        self.max_connections = max_connections
        self.per_address = per_address
        self._by_address: dict[str, int] = {}
        self.timeout_seconds = timeout
        self.refused = 0
        self.timed_out = 0
        self.failed = 0
        self._busy = 0
        self._lock = threading.Lock()
        super().__init__(address, _Handler)

    def busy(self) -> int:
        """How many connections are being handled now."""
        return self._busy

    def process_request(self, request: Any, client_address: Any) -> None:
        """Handle ``request`` in a thread of its own, or close it at once when all
        ``max_connections`` are taken."""
        host = str(client_address[0])
        with self._lock:
            held = self._by_address.get(host, 0)
            full = self._busy >= self.max_connections or held >= self.per_address
            if full:
                self.refused += 1
            else:
                self._busy += 1
                self._by_address[host] = held + 1
        if full:
            self.shutdown_request(request)
            return
        try:
            threading.Thread(target=self._serve, args=(request, client_address),
                             name="metrics-connection", daemon=True).start()
        except BaseException:
            self._done(request, host)
            raise

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception as exc:  # noqa: BLE001 - a client's doing (a timeout, a reset): counted
            self.failure(exc, client_address)
        finally:
            self._done(request, str(client_address[0]))

    def failure(self, exc: BaseException | None, client_address: Any) -> None:
        """Count a connection that ended in ``exc``: a timeout in ``timed_out``, the rest
        in ``failed``; logged at debug only."""
        with self._lock:
            if isinstance(exc, TimeoutError):
                self.timed_out += 1
            else:
                self.failed += 1
        logger.debug("metrics: a connection from %s ended in %r", client_address, exc)

    def _done(self, request: Any, host: str) -> None:
        self.shutdown_request(request)
        with self._lock:
            self._busy -= 1
            left = self._by_address.pop(host) - 1
            if left:
                self._by_address[host] = left


def serve_metrics(address: tuple[str, int], watch: Watch, *,
                  max_connections: int = METRICS_MAX_CONNECTIONS,
                  per_address: int = METRICS_PER_ADDRESS,
                  timeout: float = METRICS_TIMEOUT) -> tuple[MetricsServer, tuple[str, int]]:
    """Serve ``watch`` at ``http://HOST:PORT/metrics`` in a thread; returns (server, bound).

    prometheus_client's WSGI app on a :class:`MetricsServer` (bounded as its
    arguments say); stop it with ``server.shutdown()`` and ``server.server_close()``.
    Raises OSError (naming the address) when it cannot bind.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(watch))
    host, port = address
    try:
        # the address family as prometheus_client's own server picks it
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        server = MetricsServer((str(sockaddr[0]), port), family=family,
                               max_connections=max_connections, per_address=per_address,
                               timeout=timeout)
    except OSError as exc:
        raise OSError(exc.errno, f"--metrics {host}:{port}: cannot bind: {exc.strerror}") from None
    registry.register(_ServerCollector(server))
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    bound = server.server_address
    return server, (str(bound[0]), int(bound[1]))


class StatsLines:
    """One JSON stats line to ``stream``: every ``every`` seconds, and when requested.

    :meth:`request` is safe to call from a signal handler (it sets a flag);
    the loop calls :meth:`tick` each round and the line is written there.
    """

    def __init__(self, watch: Watch, stream: TextIO, every: float | None,
                 clock: Any = time.monotonic) -> None:
        self.watch = watch
        self.stream = stream
        self.every = every
        self.clock = clock
        self.requested = False
        self.due = None if every is None else clock() + every

    def request(self, *_args: object) -> None:
        """Write a line at the next round (SIGUSR1's handler)."""
        self.requested = True

    def tick(self) -> None:
        """Write the line if it is due or was requested."""
        now = self.clock()
        if self.due is not None and now >= self.due:
            assert self.every is not None  # noqa: S101 - due is set only with every
            self.due = max(self.due + self.every, now)
            self.requested = True
        if self.requested:
            self.requested = False
            self.write()

    def timeout(self) -> float | None:
        """Seconds until the next line is due (for the loop's wait), or None."""
        if self.requested:
            return 0.0
        return None if self.due is None else max(0.0, self.due - self.clock())

    def write(self) -> None:
        self.stream.write(json.dumps(self.watch.snapshot(), default=_plain) + "\n")
        self.stream.flush()


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)
