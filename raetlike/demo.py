"""``raetlike demo``: four manors, seven yards, every kind of traffic, a table.

On loopback, with temporary keeps, socket directories and free ports:

- estate processes (``python -m raetlike estate ... --lane ...``): ``main`` (a
  manor with its main yard, ``--auto never``, ``--echo``) and three minions,
  each a manor of its own lane;
- yard processes (``python -m raetlike yard echo --echo``), one per minion lane;
- in this process, on asyncio (:mod:`raetlike.aio`): the yard ``hub`` on main's
  lane and the yard ``app`` on each minion's lane.

The minions join main; main's keep leaves them pending until the demo accepts
them through the keep (``minion3`` visibly later).  Then the ``app`` yards send
routed messages yard to yard across estates (to the echo yards of the other
minions and to main's manor, answered with the route reversed), publish and
receive bus events, call each other's bus services (through the hub), and the
hub surveys the apps (SP SURVEYOR/RESPONDENT) — bus and SP both travel over
:class:`RoutedChannel`, a channel that is a ``(estate, yard)`` reached through
the manors.  A live line shows progress on a terminal; a table ends the run.

Every estate journals its deliveries (docs/journal.md) under the demo's
output directory, which outlives the demo; at the end the Spark pipeline
(docs/pipeline.md) runs over those journals and the demo prints where its
report is.  Routed messages carry ``_sent`` (for latency); those between the
apps and main's manor also carry ``_seq``, one numbered stream per direction
(source shares), for the delivery audit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from raetlike import aio
from raetlike.bus import BusMessage, BusNode, Call, Errno, Reply, Request, is_bus_body
from raetlike.errors import RaetError
from raetlike.keep import Acceptance, Keep
from raetlike.manor import Route, RouteError, Triple, is_error, parse_route, with_route
from raetlike.sp import Framing, Payload, Respondent, SurveyDone, Surveyor, SurveyResponse, flush
from raetlike.udp import Address, parse_host_port

__all__ = ["DemoError", "DemoFigures", "PipelineFigures", "RoutedChannel", "run_demo"]

log = logging.getLogger(__name__)

START_TIMEOUT = 15.0
POLL = 0.02
MAIN = "main"
MINIONS = ("minion1", "minion2", "minion3")
MAIN_LANE = "home"
ECHO_YARD = "echo"
APP_YARD = "app"
HUB_YARD = "hub"


class DemoError(RaetError):
    """The demo could not do what it shows; the message says what went wrong."""


# -- child processes ----------------------------------------------------------


class ChildProcess:
    """A ``python -m raetlike ...`` child whose first stdout line says where it listens."""

    def __init__(self, name: str, args: list[str], log_path: Path, ready: str) -> None:
        self.name = name
        self.log_path = log_path
        command = [sys.executable, "-m", "raetlike", *args]
        with log_path.open("wb") as log_file:
            self.process = subprocess.Popen(  # noqa: S603 - our own CLI, fixed arguments
                command, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
        self.ready = ready
        self.where = ""
        self.terminated = False

    def wait_ready(self) -> str:
        """Read the first stdout line (where the child listens); DemoError if it does not come."""
        self.where = self._read_line(self.ready)
        return self.where

    def _read_line(self, prefix: str) -> str:
        stdout = self.process.stdout
        assert stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(START_TIMEOUT):
                raise DemoError(f"{self.name} did not start within {START_TIMEOUT:g} s")
        line = stdout.readline().decode(errors="replace").strip()
        if not line.startswith(prefix):
            raise DemoError(f"{self.name} failed to start: {self.last_log_line()}")
        return line.removeprefix(prefix)

    def last_log_line(self) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return lines[-1] if lines else "(no output)"

    def wait_for_log(self, text: str, timeout: float) -> bool:
        """Whether ``text`` shows up in the child's log within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_path.read_text(errors="replace"):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(POLL)
        return text in self.log_path.read_text(errors="replace")

    def terminate(self) -> None:
        """Send SIGTERM once, if it still runs (a second one could cut its shutdown short)."""
        if not self.terminated and self.process.poll() is None:
            self.process.terminate()
        self.terminated = True

    def stop(self) -> int:
        """SIGTERM, then wait (kill after a few seconds); returns the exit status."""
        self.terminate()
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


class Children:
    """Every child process of the demo; all are stopped on exit (also on Ctrl-C)."""

    def __init__(self, base: Path, journals: Path | None = None) -> None:
        self.base = base
        self.journals = journals
        self.started: list[ChildProcess] = []

    def estate(self, name: str, *args: str) -> ChildProcess:
        """Start ``raetlike estate NAME`` on a free loopback port with its own keep."""
        journal = [] if self.journals is None else ["--journal", str(self.journals / name)]
        child = ChildProcess(
            name, ["estate", name, "--host", "127.0.0.1", "--port", "0",
                   "--keep", str(self.base / "keep"), *journal, *args],
            self.base / f"{name}.log", f"estate {name} listening on ")
        self.started.append(child)
        return child

    def yard(self, name: str, lane: str, directory: Path, *args: str) -> ChildProcess:
        """Start ``raetlike yard NAME --lane LANE --dir DIRECTORY``."""
        child = ChildProcess(
            f"{lane}.{name}", ["yard", name, "--lane", lane, "--dir", str(directory), *args],
            self.base / f"{lane}.{name}.log", f"yard {name} listening on ")
        self.started.append(child)
        return child

    def stop_all(self) -> dict[str, int]:
        """Stop the children (SIGTERM to all, then wait); their exit statuses by name."""
        for child in self.started:
            child.terminate()
        statuses = {child.name: child.stop() for child in reversed(self.started)}
        self.started.clear()
        return statuses


# -- routed channels: bus links and SP channels through the manors -------------


class RoutedChannel:
    """A yard on some estate, reached through this lane's manor: an SP channel and bus link.

    ``send`` puts the payload into a routed message (``route.dst`` is the far
    yard) and gives it to the manor (the main yard ``main`` of this lane).
    """

    __slots__ = ("far", "priority", "yard")

    def __init__(self, yard: aio.Yard, far: Triple) -> None:
        self.yard = yard
        self.far = far
        self.priority = 0

    @property
    def name(self) -> str:
        """``estate/yard``: the far yard's name on the bus and on SP endpoints."""
        return channel_name(self.far)

    @property
    def alive(self) -> bool:
        """While our own yard is open (reachability shows only when the manor answers)."""
        return not self.yard.stack.closed

    @property
    def userid(self) -> str:
        """The far yard, as the manors stamped it."""
        return self.name

    @property
    def role(self) -> str:
        """The far yard's name."""
        return self.name

    def send(self, payload: Payload) -> bool:
        """Route ``payload`` (a mapping) to the far yard through our manor."""
        if not isinstance(payload, dict):
            raise DemoError("a routed channel carries mapping payloads only")
        self.yard.transmit(with_route(payload, Route(Triple(), self.far)), to="main")
        return True


def channel_name(triple: Triple) -> str:
    """``estate/yard`` of a route end."""
    return f"{triple.estate}/{triple.yard}"


# -- figures ---------------------------------------------------------------------


@dataclass
class Kind:
    """Counters of one kind of traffic."""

    expected: int = 0
    done: int = 0
    failed: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0
    latencies: list[float] = field(default_factory=list)

    def row(self, name: str) -> dict[str, Any]:
        """This kind as a table row."""
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) if ordered else None
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else None
        return {"kind": name, "expected": self.expected, "done": self.done,
                "failed": self.failed, "bytes_sent": self.sent_bytes,
                "bytes_received": self.received_bytes,
                "p50_ms": None if p50 is None else round(p50 * 1000, 2),
                "p99_ms": None if p99 is None else round(p99 * 1000, 2)}


@dataclass
class DemoFigures:
    """What the demo counted."""

    kinds: dict[str, Kind] = field(default_factory=lambda: {
        name: Kind() for name in ("messages", "events", "requests", "surveys")})
    retries: int = 0
    problems: list[str] = field(default_factory=list)

    def complete(self) -> bool:
        """Whether every expected delivery happened."""
        return all(k.done >= k.expected for k in self.kinds.values())

    def progress(self) -> str:
        """One line: done/expected per kind."""
        return "  ".join(f"{name} {k.done}/{k.expected}" for name, k in self.kinds.items())


def _size(body: Any) -> int:
    return len(json.dumps(body, separators=(",", ":"), default=str))


# -- the yards in this process ------------------------------------------------------


class DemoYard:
    """An in-process yard: its aio.Yard, a bus node and an SP endpoint on routed channels."""

    def __init__(self, estate: str, yard: aio.Yard, figures: DemoFigures) -> None:
        self.estate = estate
        self.yard = yard
        self.figures = figures
        self.node = BusNode(f"{estate}/{yard.name}")
        self.channels: dict[str, RoutedChannel] = {}
        self.endpoint: Surveyor | Respondent | None = None
        self.waiting: dict[int, float] = {}
        self.surveys_started: dict[int, float] = {}

    def link(self, far: Triple, *, upstream: bool = False) -> RoutedChannel:
        """A routed channel to ``far``, also a bus link."""
        channel = RoutedChannel(self.yard, far)
        self.channels[channel.name] = channel
        self.node.add_link(channel, upstream=upstream, now=self.now())
        return channel

    def now(self) -> float:
        return self.yard.loop.time()

    async def serve(self) -> None:
        """Take every message the manor brings: bus, SP, echoes and errors."""
        async for message in self.yard.messages():
            self.take(message.body)

    def take(self, body: Any) -> None:
        try:
            route = parse_route(body)
        except RouteError:
            route = None
        if is_error(body):
            self.figures.problems.append(f"{self.node.name}: {body['error']['reason']}: "
                                         f"{body['error']['detail']}")
            return
        if route is None:
            return
        name = channel_name(route.source)
        inner = {k: v for k, v in body.items() if k != "route"}
        now = self.now()
        if is_bus_body(inner) and name in self.node.links:
            self.node.receive(name, inner, now)
        elif "sp" in inner and self.endpoint is not None and name in self.channels:
            self.endpoint.receive(self.channels[name], inner, now)
            self.answer_surveys(now)
        elif inner.get("demo") == "ping":
            sent = self.waiting.pop(inner["n"], None)
            if sent is not None:
                kind = self.figures.kinds["messages"]
                kind.done += 1
                kind.received_bytes += _size(body)
                kind.latencies.append(now - sent)

    def answer_surveys(self, now: float) -> None:
        endpoint = self.endpoint
        if isinstance(endpoint, Respondent):
            while (survey := endpoint.next_event()) is not None:
                endpoint.respond(survey, {"yard": self.node.name, "load": len(self.waiting)})
        elif isinstance(endpoint, Surveyor):
            self.take_survey_events()
        if endpoint is not None:
            flush(endpoint, now)

    def take_survey_events(self) -> None:
        assert isinstance(self.endpoint, Surveyor)  # noqa: S101 - only called for the hub
        while (event := self.endpoint.next_event()) is not None:
            kind = self.figures.kinds["surveys"]
            if isinstance(event, SurveyResponse):
                kind.done += 1
                kind.received_bytes += _size(event.body)
                started = self.surveys_started.get(event.survey_id)
                if started is not None:
                    kind.latencies.append(self.now() - started)
            elif isinstance(event, SurveyDone) and event.responses < len(MINIONS):
                kind.failed += 1
                self.figures.problems.append(
                    f"survey {event.survey_id}: {event.responses} of {len(MINIONS)} answered")

    async def tick(self) -> None:
        """Let the bus node's and the SP endpoint's timers fire."""
        while True:
            now = self.now()
            timer = self.node.get_timer()
            if timer is not None and timer <= now:
                self.node.handle_timer(now)
            if isinstance(self.endpoint, Surveyor):
                timer = self.endpoint.get_timer()
                if timer is not None and timer <= now:
                    self.endpoint.handle_timer(now)
            self.answer_surveys(now)
            await asyncio.sleep(0.05)

    def ping(self, far: Triple, number: int, sequence: int, size: int) -> None:
        """A routed message to ``far``'s yard (an echo yard or a manor), timed.

        The source share names the target and the target share names us, so
        each direction of each pair is a stream of its own in the journals.
        Messages to main's manor (direct, one road hop each way) are numbered
        (``_seq``) for the pipeline's delivery audit; the echo carries the
        number back.  Minion-to-minion messages are not: main relays them and
        journals them too, which the audit would count as duplicates.
        """
        body: dict[str, Any] = {"demo": "ping", "n": number, "_sent": time.time(),
                                "pad": "x" * size}
        if far.estate == MAIN:
            body["_seq"] = sequence
        self.waiting[number] = self.now()
        kind = self.figures.kinds["messages"]
        kind.sent_bytes += _size(body)
        route = Route(Triple(share=f"to-{far.estate}"),
                      Triple(far.estate, far.yard, f"from-{self.estate}"))
        self.yard.transmit(with_route(body, route), to="main")


@dataclass(frozen=True, slots=True)
class Plan:
    """How much traffic of each kind, over how long."""

    seconds: float
    pings: int  # per app yard and target
    events: int  # per app yard
    requests: int  # per app yard and other app yard
    surveys: int
    size: int = 200

    @classmethod
    def of(cls, *, quick: bool) -> Plan:
        if quick:
            return cls(seconds=2.0, pings=10, events=4, requests=4, surveys=2)
        return cls(seconds=12.0, pings=60, events=20, requests=20, surveys=8)


async def _traffic(dirs: dict[str, Path], plan: Plan, figures: DemoFigures,
                   show: Callable[[str], None]) -> None:
    """The in-process yards: set up the bus and SP, send everything, wait for the answers."""
    async with contextlib.AsyncExitStack() as stack:
        hub_yard = await stack.enter_async_context(
            aio.Yard(HUB_YARD, lane=MAIN_LANE, directory=str(dirs[MAIN])))
        hub = DemoYard(MAIN, hub_yard, figures)
        apps: list[DemoYard] = []
        for minion in MINIONS:
            yard = await stack.enter_async_context(
                aio.Yard(APP_YARD, lane=f"{minion}-lane", directory=str(dirs[minion])))
            apps.append(DemoYard(minion, yard, figures))
        surveyor = Surveyor(name="hub", framing=Framing.MAPPING, survey_time=plan.seconds + 5)
        hub.endpoint = surveyor
        for app in apps:
            surveyor.add_channel(hub.link(Triple(app.estate, APP_YARD)))
            up = app.link(Triple(MAIN, HUB_YARD), upstream=True)
            respondent = Respondent(name=app.node.name, framing=Framing.MAPPING)
            respondent.add_channel(up)
            app.endpoint = respondent
            app.node.register_service("demo", {"add": _add})
        every = [hub, *apps]
        tasks = [asyncio.create_task(y.serve()) for y in every]
        tasks += [asyncio.create_task(y.tick()) for y in every]
        events = figures.kinds["events"]
        published: dict[tuple[str, int], float] = {}

        def heard(message: BusMessage) -> None:
            sent = published.get((str(message.payload["from"]), int(message.payload["n"])))
            events.done += 1
            events.received_bytes += _size(message.payload)
            if sent is not None:
                events.latencies.append(hub.now() - sent)

        for y in every:
            y.node.subscribe("demo.", heard, now=y.now())
        await asyncio.sleep(0.5)  # subscriptions travel up in keepalives
        try:
            await _send_all(hub, apps, plan, figures, published)
            deadline = hub.now() + max(10.0, plan.seconds)
            while not figures.complete() and hub.now() < deadline:
                show(figures.progress())
                await asyncio.sleep(0.1)
            figures.retries = sum(y.node.stats.retries for y in every)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _add(request: Request) -> Any:
    return {"sum": sum(request.payload["terms"]), "by": request.userid}


async def _send_all(hub: DemoYard, apps: list[DemoYard], plan: Plan, figures: DemoFigures,
                    published: dict[tuple[str, int], float]) -> None:
    """Spread every kind of traffic over ``plan.seconds``."""
    kinds = figures.kinds
    targets = {app.estate: [Triple(other.estate, ECHO_YARD) for other in apps
                            if other is not app] + [Triple(MAIN, None)] for app in apps}
    kinds["messages"].expected = plan.pings * len(apps) * len(targets[apps[0].estate])
    kinds["events"].expected = plan.events * len(apps) * (len(apps) + 1)
    kinds["requests"].expected = plan.requests * len(apps) * (len(apps) - 1)
    kinds["surveys"].expected = plan.surveys * len(apps)
    steps = max(plan.pings, plan.events, plan.requests, plan.surveys)
    number = 0
    for step in range(steps):
        now = hub.now()
        for app in apps:
            for far in targets[app.estate]:
                if step < plan.pings:
                    number += 1
                    app.ping(far, number, step + 1, plan.size)
            if step < plan.events:
                payload = {"from": app.node.name, "n": step}
                published[(app.node.name, step)] = now
                kinds["events"].sent_bytes += _size(payload)
                app.node.publish("demo.tick", payload, now=now)
            if step < plan.requests:
                for other in apps:
                    if other is not app:
                        _request(app, other.node.name, step, kinds["requests"])
        if step < plan.surveys:
            _survey(hub, kinds["surveys"])
        await asyncio.sleep(plan.seconds / steps)


def _request(app: DemoYard, target: str, step: int, kind: Kind) -> None:
    sent = app.now()
    payload = {"terms": [step, 1, 2]}
    kind.sent_bytes += _size(payload)

    def on_reply(reply: Reply) -> None:
        if reply.errno == Errno.OK and reply.payload["sum"] == step + 3:
            kind.done += 1
            kind.received_bytes += _size(reply.payload)
            kind.latencies.append(app.now() - sent)
        else:
            kind.failed += 1

    app.node.send(target, Call("demo.add", payload), on_reply, now=sent, timeout=20.0)


def _survey(hub: DemoYard, kind: Kind) -> None:
    surveyor = hub.endpoint
    assert isinstance(surveyor, Surveyor)  # noqa: S101 - the hub is the surveyor
    now = hub.now()
    body = {"question": "load?"}
    survey_id = surveyor.survey(body, now)
    kind.sent_bytes += _size(body) * len(MINIONS)
    hub.surveys_started[survey_id] = now
    flush(surveyor, now)


# -- the run ----------------------------------------------------------------------


class Screen:
    """Plain lines, or on a terminal also one live status line redrawn in place."""

    def __init__(self, out: TextIO, *, live: bool) -> None:
        self.out = out
        self.live = live
        self.status = ""

    def line(self, text: str) -> None:
        if self.live and self.status:
            self.out.write("\r\033[K")
        self.out.write(text + "\n")
        self.status = ""
        self.out.flush()

    def show(self, status: str) -> None:
        if self.live and status != self.status:
            self.out.write(f"\r\033[K{status}")
            self.out.flush()
            self.status = status


def run_demo(out: TextIO, *, quick: bool = False, as_json: bool = False,
             out_dir: Path | None = None, pipeline: bool = True,
             spark: Any | None = None) -> int:
    """Run the demo, writing what happens and a final table to ``out``.

    The estates journal into ``out_dir/journal`` (``out_dir`` None: a new
    temporary directory that is kept); unless ``pipeline`` is False the Spark
    pipeline then writes ``out_dir/report`` (on ``spark`` if given, a
    SparkSession).  Returns 0 when everything was delivered (a pipeline that
    cannot run is reported in one line, not a failure); raises
    :class:`DemoError` with the reason otherwise (130 after Ctrl-C, once
    everything is cleaned up).
    """
    started = time.monotonic()
    screen = Screen(out, live=out.isatty() and not as_json)
    say = (lambda _text: None) if as_json else screen.line
    plan = Plan.of(quick=quick)
    figures = DemoFigures()
    kept = _output_directory(out_dir)
    journals = kept / "journal"
    with tempfile.TemporaryDirectory(prefix="raetlike-demo-") as temp:
        base = Path(temp)
        children = Children(base, journals)
        try:
            dirs = _start(children, base, say, quick=quick)
            say(f"traffic for about {plan.seconds:g} s: routed messages yard to yard, "
                "bus events and requests, SP surveys")
            asyncio.run(_traffic(dirs, plan, figures, screen.show))
            screen.line(f"traffic done: {figures.progress()}")
        except KeyboardInterrupt:
            children.stop_all()
            screen.line(f"interrupted: every process stopped, temporary files removed "
                        f"(journals kept in {journals})")
            return 130
        finally:
            statuses = children.stop_all()
    for name, status in statuses.items():
        if status:
            figures.problems.append(f"{name} exited with status {status}")
    written = sorted(path.name for path in journals.iterdir()) if journals.is_dir() else []
    say(f"journals of {', '.join(written) or 'no estate'} in {journals}")
    analysed: PipelineFigures | str | None = None
    if pipeline:
        say("running the Spark pipeline over the journals (10-60 s with Spark's start)")
        try:
            analysed = _run_pipeline(journals, kept / "report", spark)
        except KeyboardInterrupt:
            screen.line(f"pipeline interrupted; journals kept in {journals}")
            return 130
    rows = [kind.row(name) for name, kind in figures.kinds.items()]
    seconds = time.monotonic() - started
    if as_json:
        out.write(json.dumps({"ok": figures.complete() and not figures.problems,
                              "seconds": round(seconds, 2), "retries": figures.retries,
                              "traffic": rows, "problems": figures.problems,
                              "journals": str(journals),
                              "pipeline": _pipeline_json(analysed)}) + "\n")
    else:
        out.write(_table(rows))
        out.write(_pipeline_lines(analysed))
        out.write(f"retries (bus requests resent): {figures.retries}; "
                  f"{len(statuses)} processes stopped; demo took {seconds:.1f} s\n")
        if isinstance(analysed, PipelineFigures):
            out.write(f"report: {analysed.report}\n")
    out.flush()
    if not figures.complete():
        missing = [f"{r['kind']} {r['done']}/{r['expected']}" for r in rows
                   if r["done"] < r["expected"]]
        raise DemoError("not everything was delivered: " + ", ".join(missing)
                        + "".join(f"; {p}" for p in figures.problems[:3]))
    if figures.problems:
        raise DemoError("; ".join(figures.problems[:3]))
    return 0


def _output_directory(out_dir: Path | None) -> Path:
    """``out_dir`` (created), or a new temporary directory the demo does not remove."""
    if out_dir is None:
        return Path(tempfile.mkdtemp(prefix="raetlike-demo-out-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


# -- the pipeline over the journals ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class PipelineFigures:
    """What the pipeline found in the demo's journals."""

    report: Path
    records: int
    skipped_lines: int
    sources: int
    """Sources with ``_seq`` numbers (the audited streams)."""
    complete_sources: int
    missing: int
    duplicates: int
    out_of_order: int
    seconds: float


def _run_pipeline(journals: Path, report: Path, spark: Any | None) -> PipelineFigures | str:
    """Run the pipeline over every journal directory; its figures, or why it could not run."""
    directories = sorted(path for path in journals.iterdir() if path.is_dir()) \
        if journals.is_dir() else []
    if not directories:
        return "no journals were written"
    try:
        from raetlike.pipeline import (  # noqa: PLC0415 - PySpark is optional
            PipelineOptions,
            run_pipeline,
            spark_session,
        )
    except ImportError as exc:
        return f"PySpark is not installed (pip install 'raetlike[spark]'): {exc}"
    logging.getLogger("py4j").setLevel(max(logging.WARNING, logging.getLogger().level))
    started = time.monotonic()
    session = spark
    try:
        if session is None:
            session = spark_session()
        result = run_pipeline(PipelineOptions(journals=tuple(directories), out=report), session)
    except Exception as exc:  # noqa: BLE001 - Spark/Java fail in many ways; the demo goes on
        return f"{type(exc).__name__}: {_first_line(str(exc))}"
    finally:
        if spark is None and session is not None:
            with contextlib.suppress(Exception):
                session.stop()
    audit = json.loads((result.report.parent / "summary.json").read_text()).get("audit", [])
    return PipelineFigures(
        report=result.report, records=result.records, skipped_lines=result.skipped_lines,
        sources=len(audit), complete_sources=sum(1 for row in audit if row["complete"]),
        missing=sum(int(row["missing"]) for row in audit),
        duplicates=sum(int(row["duplicates"]) for row in audit),
        out_of_order=sum(int(row["out_of_order"]) for row in audit),
        seconds=time.monotonic() - started)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def _pipeline_json(analysed: PipelineFigures | str | None) -> dict[str, Any] | None:
    if analysed is None:
        return None
    if isinstance(analysed, str):
        return {"ok": False, "error": analysed}
    return {"ok": True, "report": str(analysed.report), "records": analysed.records,
            "skipped_lines": analysed.skipped_lines, "audited_sources": analysed.sources,
            "complete_sources": analysed.complete_sources, "missing": analysed.missing,
            "duplicates": analysed.duplicates, "out_of_order": analysed.out_of_order,
            "seconds": round(analysed.seconds, 2)}


def _pipeline_lines(analysed: PipelineFigures | str | None) -> str:
    if analysed is None:
        return "pipeline: skipped (--no-pipeline)\n"
    if isinstance(analysed, str):
        return f"pipeline: not run: {analysed}\n"
    verdict = ("complete" if analysed.complete_sources == analysed.sources
               else f"{analysed.sources - analysed.complete_sources} incomplete")
    return (f"journal  {analysed.records} records ({analysed.skipped_lines} skipped lines), "
            f"pipeline {analysed.seconds:.1f} s\n"
            f"audit    {analysed.sources} numbered streams: {analysed.missing} missing, "
            f"{analysed.duplicates} duplicates, {analysed.out_of_order} out of order "
            f"-> {verdict}\n")


def _start(children: Children, base: Path, say: Callable[[str], None], *,
           quick: bool) -> dict[str, Path]:
    """Start the manors and echo yards, accept the minions; the lanes' socket directories."""
    dirs = {name: base / "lanes" / name for name in (MAIN, *MINIONS)}
    main = children.estate(MAIN, "--main", "--auto", "never", "--echo",
                           "--lane", MAIN_LANE, "--dir", str(dirs[MAIN]))
    main.wait_ready()
    say(f"main estate: a manor on udp {main.where}, lane '{MAIN_LANE}' "
        f"(pid {main.process.pid}, keys accepted by the operator only)")
    address = parse_host_port(main.where)
    minions, yards = {}, {}
    for minion in MINIONS:  # all at once: each takes a second or two to start
        lane = f"{minion}-lane"
        minions[minion] = children.estate(minion, "--join", _text(address), "--lane", lane,
                                          "--dir", str(dirs[minion]))
        yards[minion] = children.yard(ECHO_YARD, lane, dirs[minion], "--echo")
    for minion in MINIONS:
        lane = f"{minion}-lane"
        estate, yard = minions[minion], yards[minion]
        estate.wait_ready()
        yard.wait_ready()
        say(f"{minion}: a manor on udp {estate.where}, lane '{lane}' with yards "
            f"'main' and '{ECHO_YARD}' (pids {estate.process.pid}, {yard.process.pid})")
    keep = Keep(base / "keep", MAIN)
    for minion in MINIONS:
        if not main.wait_for_log(f"join of {minion} pending", START_TIMEOUT):
            raise DemoError(f"{minion} never asked to join: {minions[minion].last_log_line()}")
    say("all three joins are pending in main's keep")
    for minion in MINIONS:
        if minion == MINIONS[-1]:
            time.sleep(0.3 if quick else 1.5)
            say(f"{minion} is still pending; accepting it through the keep "
                f"(as 'raetlike keys accept {minion}' does)")
        _accept(keep, minion)
    for minion, estate in minions.items():
        if not estate.wait_for_log(f"estate {minion}: allowed {MAIN}", START_TIMEOUT):
            raise DemoError(f"{minion} was not allowed by main: {estate.last_log_line()}")
    say("all minions joined and allowed (handshakes done, session keys set)")
    return dirs


def _accept(keep: Keep, name: str) -> None:
    remote = keep.load_remote(name)
    role = remote.role if remote is not None else name
    record = keep.load_role(role)
    if record is None or record.acceptance not in (None, Acceptance.PENDING):
        raise DemoError(f"main's keep holds no pending role {role!r}")
    keep.accept(role)


def _text(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


def _table(rows: list[dict[str, Any]]) -> str:
    header = ("kind", "delivered", "failed", "bytes out", "bytes in", "p50 ms", "p99 ms")
    lines = [header]
    lines.extend(
        (row["kind"], f"{row['done']}/{row['expected']}", str(row["failed"]),
                      str(row["bytes_sent"]), str(row["bytes_received"]),
                      "-" if row["p50_ms"] is None else f"{row['p50_ms']:.2f}",
                      "-" if row["p99_ms"] is None else f"{row['p99_ms']:.2f}")
        for row in rows)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [" ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
            for line in lines]
    return "\n".join(text) + "\n"
