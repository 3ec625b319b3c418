"""The manor: one estate's RoadStack and its lane's main yard, routing between them.

Sans-IO: the manor holds the two stacks but no socket and no clock.  Its
driver hands it the stacks' events (:meth:`Manor.handle_road_event`,
:meth:`Manor.handle_lane_event`); the manor answers with commands on the
stacks (``transmit``) and events of its own (:meth:`Manor.next_event`).

Routing of a message with a ``route`` (see :mod:`raetlike.manor._route`):

1. The source is stamped from what the stack authenticated: from the lane,
   ``(this estate, the sending yard, share)``; from the road, the sending
   estate (a main estate may speak for the estates it relays for).
2. Empty destination parts take defaults: this estate, this manor's yard.
3. This estate and this yard: a :class:`Delivered` event.  This estate,
   another yard: the lane, if the yard is known.  Another estate: the road,
   if the estate is known; a non-main manor sends messages for unknown
   estates to its main estate, which relays between its remotes.
4. Anything else goes back to its source as an error message
   (``{"route": ..., "error": {"reason", "detail", "route"}}``); an error
   that cannot be routed either becomes an :class:`Undelivered` event.
   Errors are never answered with errors, so nothing loops.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lane import LaneStack
from lane import events as lane_events
from raetlike.channels import Road
from raetlike.errors import BackpressureError, RaetError
from raetlike.manor._route import (
    Problem,
    Route,
    RouteError,
    Triple,
    error_body,
    is_error,
    parse_route,
    with_route,
)
from raetlike.names import safe_name
from road import events as road_events

__all__ = ["LOUD_EVERY", "Delivered", "Manor", "ManorEvent", "ManorStats", "Undelivered", "Via",
           "loudness"]

log = logging.getLogger(__name__)

LOUD_EVERY = 100
"""Of a log line a peer can cause at will, the first and every this-many-th is a warning."""


def loudness(count: int) -> int:
    """The level of the ``count``-th (from 1) of a log line a peer can repeat at will:
    WARNING for the first and every :data:`LOUD_EVERY`-th, DEBUG for the rest."""
    return logging.WARNING if count % LOUD_EVERY == 1 else logging.DEBUG


class Via(StrEnum):
    """Where a message reached the manor from."""

    ROAD = "road"
    LANE = "lane"
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class Arrival:
    """The channel a message came in on."""

    via: Via
    """Road, lane, or the manor itself."""
    sender: str
    """The remote estate's or the yard's name (the manor's own yard for LOCAL)."""


@dataclass(frozen=True, slots=True)
class ManorEvent:
    """Base of the manor's events."""


@dataclass(frozen=True, slots=True)
class Delivered(ManorEvent):
    """A message addressed to the manor itself (its yard, on its estate)."""

    body: Any
    """The message (its route stamped and defaulted), or bytes from the road."""
    source: Triple
    """Who sent it (stamped by the manor)."""
    destination: Triple
    """Where it was addressed, defaults filled in (the share tells what for)."""
    via: Via
    """Where it came from."""
    sender: str
    """The yard or remote estate it came from (the last hop)."""
    routed: bool
    """False for a message without a route (answer it on the channel it came by)."""


@dataclass(frozen=True, slots=True)
class Undelivered(ManorEvent):
    """A message that could neither be routed nor answered with an error."""

    body: Any
    """The message as the manor last held it."""
    problem: Problem
    """Why it could not go on."""
    detail: str
    """The details, in a sentence."""


@dataclass(slots=True)
class ManorStats:
    """What the manor did, by count."""

    received: int = 0
    """Messages handed to the manor by either stack."""
    delivered: int = 0
    """Messages for the manor itself (Delivered events)."""
    to_lane: int = 0
    """Messages passed to a yard on the lane."""
    to_road: int = 0
    """Messages passed to an estate on the road."""
    errors_sent: int = 0
    """Error messages sent back to the source of an unroutable message."""
    undelivered: int = 0
    """Undelivered events (an error that could not be routed either)."""
    problems: Counter[Problem] = field(default_factory=Counter)
    """Unroutable messages by problem."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counters."""
        return {
            "received": self.received, "delivered": self.delivered, "to_lane": self.to_lane,
            "to_road": self.to_road, "errors_sent": self.errors_sent,
            "undelivered": self.undelivered,
            "problems": {str(problem): count for problem, count in self.problems.items()},
        }


class Manor:
    """Routes routed messages between one estate's road and its lane (sans-IO)."""

    def __init__(self, road: Road, lane: LaneStack, *,
                 yard_known: Callable[[str], bool] | None = None) -> None:
        """``yard_known(name)`` tells whether a yard not yet heard from exists on the lane."""
        self.road = road
        self.lane = lane
        self._yard_known = yard_known
        self.stats = ManorStats()
        self.answers_failed = 0
        """Answers (:meth:`reply`) a stack would not take (for the log's rate limit)."""
        self._events: deque[ManorEvent] = deque()

    @property
    def estate(self) -> str:
        """This estate's name."""
        return self.road.name

    @property
    def yard(self) -> str:
        """The manor's own (main) yard name."""
        return self.lane.name

    @property
    def triple(self) -> Triple:
        """The manor's own address."""
        return Triple(self.estate, self.yard, None)

    # == input =============================================================

    def handle_road_event(self, event: road_events.Event, now: float) -> bool:
        """Take a road event; True when it was the manor's business (a message or its expiry)."""
        if isinstance(event, road_events.MessageReceived):
            self._arrived(event.body, Arrival(Via.ROAD, event.remote), now)
            return True
        if isinstance(event, road_events.MessageExpired):
            self._bounced(event.body, f"estate {event.remote} unreachable: {event.reason}", now)
            return True
        return False

    def handle_lane_event(self, event: lane_events.Event, now: float) -> bool:
        """Take a lane event; True when it was the manor's business."""
        if isinstance(event, lane_events.MessageReceived):
            self._arrived(event.body, Arrival(Via.LANE, event.yard), now)
            return True
        if isinstance(event, lane_events.YardUnreachable):
            for message in event.messages:
                self._bounced(message, f"yard {event.yard} unreachable: {event.reason}", now)
            return True
        return False

    def pump(self, now: float) -> None:
        """Drain both stacks' events through the manor (for drivers with nothing else to see)."""
        while (road_event := self.road.next_event()) is not None:
            self.handle_road_event(road_event, now)
        while (lane_event := self.lane.next_event()) is not None:
            self.handle_lane_event(lane_event, now)

    # == commands ==========================================================

    def send(self, message: Mapping[str, Any], to: Triple, *, share: str | None = None,
             now: float) -> None:
        """Route ``message`` from the manor (source share ``share``) to ``to``."""
        route = Route(Triple(self.estate, self.yard, share), to)
        self.stats.received += 1
        self._route(with_route(message, route), route, Arrival(Via.LOCAL, self.yard), now)

    def reply(self, delivered: Delivered, message: Any, *, now: float) -> None:
        """Answer a Delivered message: by its route reversed, else on the channel it came by."""
        if delivered.routed and isinstance(message, Mapping):
            self.send(message, delivered.source, share=delivered.destination.share, now=now)
            return
        try:
            if delivered.via is Via.ROAD:
                self.road.transmit(message, to=delivered.sender, now=now)
            elif delivered.via is Via.LANE:
                self.lane.transmit(message, to=delivered.sender, now=now)
        except RaetError as exc:
            self.answers_failed += 1
            log.log(loudness(self.answers_failed), "manor %s: cannot answer %s: %s",
                    self.estate, safe_name(delivered.sender), safe_name(str(exc)))

    def next_event(self) -> ManorEvent | None:
        """The oldest manor event not yet taken, or None."""
        return self._events.popleft() if self._events else None

    # == routing ===========================================================

    def _stamp(self, claimed: Triple, arrival: Arrival) -> Triple:
        """The source as the stacks authenticated it (the sender's claim only where it may)."""
        if arrival.via is Via.LANE:
            return Triple(self.estate, arrival.sender, claimed.share)
        if arrival.via is Via.ROAD:
            remote = self.road.names.get(arrival.sender)
            # only the main we joined relays for others; an estate that joined us may
            # claim the main bit in its join, never another estate's messages
            relays = remote is not None and remote.main and remote.sought
            estate = claimed.estate if relays and claimed.estate else arrival.sender
            return Triple(estate, claimed.yard, claimed.share)
        return claimed

    def _arrived(self, body: Any, arrival: Arrival, now: float) -> None:
        self.stats.received += 1
        try:
            route = parse_route(body)
        except RouteError as exc:
            sender = self._stamp(Triple(), arrival)
            self._fail(body, sender, Problem.BAD_ROUTE, str(exc), now)
            return
        if route is None:
            self._deliver(body, self._stamp(Triple(), arrival), self.triple, arrival, routed=False)
            return
        route = Route(self._stamp(route.source, arrival), route.destination)
        self._route(with_route(body, route), route, arrival, now)

    def _route(self, body: dict[str, Any], route: Route, arrival: Arrival, now: float) -> None:
        target = route.destination
        estate = target.estate or self.estate
        if estate == self.estate:
            yard = target.yard or self.yard
            destination = Triple(estate, yard, target.share)
            body = with_route(body, Route(route.source, destination))
            if yard == self.yard:
                self._deliver(body, route.source, destination, arrival, routed=True)
            elif yard in self.lane.yards or (self._yard_known is not None
                                             and self._yard_known(yard)):
                self._to_lane(body, yard, route, now)
            else:
                self._fail(body, route.source, Problem.UNKNOWN_YARD,
                           f"no yard {yard!r} on lane {self.lane.local.lane!r} "
                           f"of estate {estate!r}", now)
            return
        body = with_route(body, Route(route.source, Triple(estate, target.yard, target.share)))
        remote = estate if estate in self.road.names else None
        if remote is not None and arrival.via is Via.ROAD and not self.road.local.main:
            remote = None  # only a main estate relays between estates
        if remote is None and arrival.via is not Via.ROAD and not self.road.local.main:
            remote = next((r.name for r in self.road.names.values() if r.main), None)
        if remote is None:
            self._fail(body, route.source, Problem.UNKNOWN_ESTATE,
                       f"no route from estate {self.estate!r} to estate {estate!r}", now)
            return
        self._to_road(body, remote, route, now)

    def _deliver(self, body: Any, source: Triple, destination: Triple, arrival: Arrival, *,
                 routed: bool) -> None:
        self.stats.delivered += 1
        self._events.append(Delivered(body, source, destination, arrival.via, arrival.sender,
                                      routed))

    def _to_lane(self, body: dict[str, Any], yard: str, route: Route, now: float) -> None:
        try:
            self.lane.transmit(body, to=yard, now=now)
        except BackpressureError as exc:
            self._fail(body, route.source, Problem.BUSY, str(exc), now)
        except RaetError as exc:
            self._fail(body, route.source, Problem.UNDELIVERABLE, str(exc), now)
        else:
            self.stats.to_lane += 1
            log.debug("manor %s: %s -> %s by lane", self.estate, route.source, yard)

    def _to_road(self, body: dict[str, Any], estate: str, route: Route, now: float) -> None:
        try:
            self.road.transmit(body, to=estate, now=now)
        except BackpressureError as exc:
            self._fail(body, route.source, Problem.BUSY, str(exc), now)
        except RaetError as exc:
            self._fail(body, route.source, Problem.UNDELIVERABLE, str(exc), now)
        else:
            self.stats.to_road += 1
            log.debug("manor %s: %s -> %s by road", self.estate, route.source, estate)

    def _bounced(self, body: Any, detail: str, now: float) -> None:
        """A message a stack gave back: an error to its source, if it has a route."""
        try:
            route = parse_route(body)
        except RouteError:
            route = None
        if route is None:
            self._undelivered(body, Problem.UNDELIVERABLE, detail)
            return
        self._fail(body, route.source, Problem.UNDELIVERABLE, detail, now)

    def _fail(self, body: Any, source: Triple, problem: Problem, detail: str,
              now: float) -> None:
        """Send an error naming ``problem`` back to ``source`` (never for an error)."""
        self.stats.problems[problem] += 1
        # a failed lookup (no such yard or estate, no route) is what an operator must see;
        # a sender can repeat it at will, so the first and every 100th are warnings
        # (``source`` is a sender's claim: Triple.__str__ escapes its parts)
        log.log(loudness(self.stats.problems[problem]), "manor %s: %s from %s: %s (%d so far)",
                self.estate, problem, source, safe_name(detail), self.stats.problems[problem])
        if is_error(body):
            self._undelivered(body, problem, detail)
            return
        original = body.get("route") if isinstance(body, Mapping) else None
        route = Route(self.triple, source)
        self.stats.errors_sent += 1
        self._route(error_body(route, problem, detail, original), route,
                    Arrival(Via.LOCAL, self.yard), now)

    def _undelivered(self, body: Any, problem: Problem, detail: str) -> None:
        self.stats.undelivered += 1
        # a peer can send unroutable errors at will: the first and every 100th are warnings
        log.log(loudness(self.stats.undelivered), "manor %s: undelivered (%s): %s (%d so far)",
                self.estate, problem, safe_name(detail), self.stats.undelivered)
        self._events.append(Undelivered(body, problem, detail))
