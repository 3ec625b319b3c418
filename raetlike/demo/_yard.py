"""The yards in the demo's own process: an aio yard with a bus node and an SP endpoint."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from raetlike import aio
from raetlike.bus import BusNode, is_bus_body
from raetlike.demo._cast import MAIN, MINIONS
from raetlike.demo._figures import DemoFigures, body_size
from raetlike.demo._routed import RoutedChannel, channel_name
from raetlike.manor import Route, RouteError, Triple, is_error, parse_route, with_route
from raetlike.sp import Respondent, SurveyDone, Surveyor, SurveyResponse, flush

__all__ = ["DemoYard"]


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
                kind.received_bytes += body_size(body)
                kind.latencies.append(now - sent)

    def answer_surveys(self, now: float) -> None:
        endpoint = self.endpoint
        if isinstance(endpoint, Respondent):
            while (survey := endpoint.next_event()) is not None:
                endpoint.respond(survey, {"yard": self.node.name, "load": len(self.waiting),
                                          "_kind": "survey_response", "_sent": time.time()})
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
                kind.received_bytes += body_size(event.body)
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
        kind.sent_bytes += body_size(body)
        route = Route(Triple(share=f"to-{far.estate}"),
                      Triple(far.estate, far.yard, f"from-{self.estate}"))
        self.yard.transmit(with_route(body, route), to="main")
