"""Bus nodes in running processes: an estate's (manor's) node, timers on a Loop, echo.

:class:`EstateBus` puts a :class:`BusNode` on an estate's road stack and, for
a manor, on its lane's main yard: road remotes become links when allowed (a
main estate we joined is our upstream, a relay estate's too; with several
mains, :class:`raetlike.multimain.MultiMain` says which are), and a yard
becomes a link the first time a bus message comes from it; hosted on a road
stack (:class:`raetlike.channels.Hosted`) it makes a sans-IO estate with its
bus.  :func:`timer_task` runs a node's timers as a :class:`raetlike.run.Loop`
task.  :func:`echo` is the ``echo.`` service of ``raetlike estate --bus`` and
``raetlike yard --bus``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from lane import LaneConfig, LocalYard
from lane import events as lane_events
from lane.stack import LaneStack
from raetlike.bus._api import Call, Reply, Request
from raetlike.bus._glue import BusAttachment
from raetlike.bus._message import Errno, is_bus_body
from raetlike.bus._node import BusNode
from raetlike.channels import LaneChannel, Road, RoadChannel
from raetlike.manor import Manor
from raetlike.manor._manor import loudness
from raetlike.multimain import MainActive, MultiMain
from raetlike.names import safe_name
from raetlike.run import Loop, TaskBody
from raetlike.uxd import UxdDriver
from road import events as road_events

__all__ = ["ECHO_PREFIX", "EstateBus", "LoopBus", "bus_yard", "echo", "timer_task"]

logger = logging.getLogger(__name__)

ECHO_PREFIX = "echo."
"""The topic prefix the command-line bus nodes serve."""

ROAD_TTL = 30.0
"""Seconds a bus message may wait on the road before it is given back (113)."""


def echo(request: Request) -> Any:
    """A handler that answers with the request's payload."""
    return request.payload


def timer_task(node: BusNode, clock: Callable[[], float]) -> TaskBody:
    """A Loop task that fires ``node``'s timers when they are due, forever."""
    while True:
        now = clock()
        timer = node.get_timer()
        if timer is not None and timer <= now:
            node.handle_timer(now)
            yield None  # let the loop flush what the timers sent
            continue
        yield 1.0 if timer is None else timer - now


class EstateBus:
    """A bus node on an estate's road stack and (for a manor) its lane's main yard."""

    __slots__ = ("_attachment", "_remotes", "_yards", "lane", "mains", "node", "refused",
                 "relays", "road", "ttl")

    def __init__(self, node: BusNode, road: Road, lane: LaneStack | None = None, *,
                 ttl: float = ROAD_TTL, relays: Collection[str] = ()) -> None:
        """Feed ``node`` from ``road`` (and ``lane``); road links get ``ttl``.

        When ``road`` is a :class:`MultiMain`, it decides which mains are upstream.
        ``relays`` are the roles of remotes below us that relay for others (relay estates,
        docs/relay.md): their links are trusted, so the identities they stamped on their
        own minions' messages are kept instead of being replaced by the relay's.
        """
        self.node = node
        self.road = road
        self.mains = road if isinstance(road, MultiMain) else None
        self.lane = lane
        self.ttl = ttl
        self.relays = frozenset(relays)
        self._attachment = BusAttachment(node)
        self._remotes: set[str] = set()
        self._yards: set[str] = set()
        self.refused = 0
        """Bus messages dropped because their sender's name is another kind of link's."""

    def handle_road_event(self, event: road_events.Event, now: float) -> bool:
        """Link allowed remotes; take bus messages.  True when the event was the bus's."""
        if isinstance(event, road_events.Allowed | road_events.Alive):
            self._link_remote(event.remote, now)
            return False
        if isinstance(event, MainActive):
            self._follow(event, now)
            return False
        if isinstance(event, road_events.RemoteRemoved) and event.remote in self._remotes:
            # gone from the road: its link and the routes through it go (a relay above
            # hears it in our next keepalive); a later allow links it afresh
            self._remotes.discard(event.remote)
            self.node.remove_link(event.remote)
            return False
        if isinstance(event, road_events.MessageReceived) and is_bus_body(event.body):
            self._link_remote(event.remote, now)
            if event.remote not in self._remotes:  # a yard's name: never speak for it
                self.refused += 1
                return True
        return self._attachment.handle_event(event, now)

    def handle_lane_event(self, event: lane_events.Event, now: float) -> bool:
        """Link a yard on its first bus message; take bus messages.  True when taken."""
        if self.lane is not None and isinstance(event, lane_events.MessageReceived) \
                and is_bus_body(event.body):
            if event.yard not in self.node.links:
                logger.info("bus %s: yard %s linked", self.node.name, event.yard)
                self.node.add_link(LaneChannel(self.lane, event.yard), now=now)
                self._yards.add(event.yard)
            elif event.yard not in self._yards:  # an estate's name: never speak for it
                # the yard can repeat it at will: the first and every 100th are warnings
                self.refused += 1
                logger.log(loudness(self.refused), "bus %s: yard %s has a remote's name; "
                           "dropped (%d refused so far)", self.node.name, safe_name(event.yard),
                           self.refused)
                return True
        return self._attachment.handle_event(event, now)

    def take_lane_events(self, manor: Manor, now: float) -> None:
        """Drain the lane's events: the bus's to the node, every other one to ``manor``."""
        if self.lane is None:
            return
        while (event := self.lane.next_event()) is not None:
            if not self.handle_lane_event(event, now) and not manor.handle_lane_event(event, now):
                logger.debug("bus %s: lane event %s", self.node.name, type(event).__name__)

    # == as an attachment of a Hosted road stack (raetlike.channels): a sans-IO estate ==

    def handle_event(self, event: object, now: float) -> bool:
        """:meth:`handle_road_event` for a road event (a MultiMain's MainActive is one too);
        anything else is not ours."""
        return isinstance(event, road_events.Event) and self.handle_road_event(event, now)

    def get_timer(self) -> float | None:
        """The node's next deadline."""
        return self.node.get_timer()

    def handle_timer(self, now: float) -> None:
        """Let the node's timers fire."""
        self.node.handle_timer(now)

    def pump(self, now: float) -> int:  # noqa: ARG002 - the Attachment protocol's call
        """The node sends through its links as it goes: nothing waits here."""
        return 0

    def _link_remote(self, name: str, now: float) -> None:
        if name in self.node.links:
            return
        remote = self.road.names.get(name)
        if remote is None:
            return
        standby = False
        if self.mains is not None:  # only the mains it was given (not others in its keep)
            upstream = self.mains.is_upstream(name)
            standby = not upstream and self.mains.is_main(name)  # failover's other mains
        else:
            # a main we asked to join (Remote.sought): a minion's main, or a relay's own
            # main (docs/relay.md).  An estate that joined us is never our upstream, main
            # or not: only our own command makes one.
            upstream = remote.main and remote.sought and self.node.upstream is None
        trusted = upstream or standby or remote.role in self.relays
        logger.info("bus %s: remote %s linked%s", self.node.name, name,
                    " (upstream)" if upstream else " (standby main)" if standby
                    else " (relay)" if trusted else "")
        self.node.add_link(RoadChannel(self.road, name, ttl=self.ttl), upstream=upstream,
                           standby=standby, trusted=trusted, now=now)
        self._remotes.add(name)

    def _follow(self, event: MainActive, now: float) -> None:
        """Failover moved the active main: it becomes the upstream, the old one a standby
        link.  (What the old one had not acknowledged the MultiMain moved already.)"""
        self._link_remote(event.remote, now)
        if event.remote in self.node.links:
            logger.info("bus %s: upstream now %s", self.node.name, event.remote)
            self.node.set_upstream(event.remote, True)
        if event.previous in self.node.links:
            self.node.set_upstream(event.previous, False)


class LoopBus:
    """A bus node on a :class:`Loop`, with blocking calls (tests, benchmarks, scripts)."""

    __slots__ = ("clock", "loop", "node")

    def __init__(self, node: BusNode, loop: Loop, clock: Callable[[], float]) -> None:
        """``node`` driven by ``loop`` (whose drivers feed it); starts its timer task."""
        self.node = node
        self.loop = loop
        self.clock = clock
        loop.spawn(timer_task(node, clock), name=f"bus timers {node.name}")

    def call(self, target: str, topic: str, payload: Any, timeout: float) -> Reply:
        """Send one request and run the loop until its one reply (a timeout error at worst)."""
        got: list[Reply] = []
        matchtag = self.node.send(target, Call(topic, payload), got.append, now=self.clock(),
                                  timeout=timeout)
        if not self.loop.run_until(lambda: bool(got), timeout=timeout + 1.0):
            self.node.cancel(matchtag)  # the node's timer was late: end it here the same way
            return Reply(matchtag, topic, None, Errno.ETIMEDOUT, "no response in time")
        return got[0]

    def call_until_routed(self, target: str, topic: str, payload: Any,
                          deadline: float) -> Reply:
        """Call until the answer is not 113 (links appear as nodes start) or ``deadline``."""
        while True:
            reply = self.call(target, topic, payload, max(0.1, deadline - self.clock()))
            if reply.errno is not Errno.EHOSTUNREACH or self.clock() >= deadline:
                return reply
            self.loop.run_until(lambda: False, timeout=0.05)


def bus_yard(name: str, lane: str, directory: str, main_yard: str = "main",
             clock: Callable[[], float] = time.monotonic) -> LoopBus:
    """This process as the yard ``name`` on ``lane``: a bus node whose upstream is ``main_yard``."""
    loop = Loop(clock)
    stack = LaneStack(LocalYard(name, lane, directory), LaneConfig(main_yard=main_yard),
                      now=clock())
    node = BusNode(name, now=clock())
    attachment = BusAttachment(node)

    def on_event(event: object) -> None:
        attachment.handle_event(event, clock())

    loop.add(UxdDriver(stack), on_event=on_event)
    node.add_link(LaneChannel(stack, main_yard), upstream=True)
    return LoopBus(node, loop, clock)
