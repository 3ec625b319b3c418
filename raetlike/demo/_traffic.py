"""The traffic: the in-process yards send messages, events, requests and surveys to plan."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raetlike import aio
from raetlike.bus import BusMessage, Call, Errno, Reply, Request
from raetlike.demo._cast import APP_YARD, ECHO_YARD, HUB_YARD, MAIN, MAIN_LANE, MINIONS
from raetlike.demo._figures import DemoFigures, Kind, body_size
from raetlike.demo._yard import DemoYard
from raetlike.manor import Triple
from raetlike.sp import Framing, Respondent, Surveyor, flush

__all__ = ["Plan", "traffic"]


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


async def traffic(dirs: dict[str, Path], plan: Plan, figures: DemoFigures,
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
            events.received_bytes += body_size(message.payload)
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
    return {"sum": sum(request.payload["terms"]), "by": request.userid, "_sent": time.time()}


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
                payload = {"from": app.node.name, "n": step, "_sent": time.time()}
                published[(app.node.name, step)] = now
                kinds["events"].sent_bytes += body_size(payload)
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
    payload = {"terms": [step, 1, 2], "_sent": time.time()}  # _sent: for the journal's latency
    kind.sent_bytes += body_size(payload)

    def on_reply(reply: Reply) -> None:
        if reply.errno == Errno.OK and reply.payload["sum"] == step + 3:
            kind.done += 1
            kind.received_bytes += body_size(reply.payload)
            kind.latencies.append(app.now() - sent)
        else:
            kind.failed += 1

    app.node.send(target, Call("demo.add", payload), on_reply, now=sent, timeout=20.0)


def _survey(hub: DemoYard, kind: Kind) -> None:
    surveyor = hub.endpoint
    assert isinstance(surveyor, Surveyor)  # noqa: S101 - the hub is the surveyor
    now = hub.now()
    # _kind and _sent: the journal's record kind and send time (for its latency figures)
    body = {"question": "load?", "_kind": "survey", "_sent": time.time()}
    survey_id = surveyor.survey(body, now)
    kind.sent_bytes += body_size(body) * len(MINIONS)
    hub.surveys_started[survey_id] = now
    flush(surveyor, now)
