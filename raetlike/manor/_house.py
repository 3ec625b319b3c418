"""The manor house: a Manor with its lane's main yard bound on a UXD socket.

Used by ``raetlike estate --lane LANE`` beside the estate's own UDP driver:
the estate hands road events in, the house binds the main yard's socket on
the same loop, drains lane events and acts on the manor's events (echo,
logs).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.channels import Road
from raetlike.manor._manor import Delivered, Manor, Undelivered, loudness
from raetlike.manor._route import is_error
from raetlike.names import safe_name
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
from road import events as road_events

__all__ = ["MANOR_YARD", "ManorHouse"]

log = logging.getLogger(__name__)

MANOR_YARD = "main"
"""The default name of the manor's (main) yard."""


class ManorHouse:
    """The lane side of a manor process: main yard, UXD driver, manor, echo."""

    def __init__(self, road: Road, loop: Loop, lane: str, directory: str | None = None,
                 *, yard: str = MANOR_YARD, echo: bool = False,
                 clock: Callable[[], float]) -> None:
        """Bind the main yard of ``lane`` (in ``directory``) on ``loop`` next to ``road``.

        Raises :class:`~raetlike.uxd.YardRunningError` when a live main yard
        already holds the socket.
        """
        self.clock = clock
        self.echo = echo
        self.errors_heard = 0
        """Error messages addressed to the manor itself (for the log's rate limit)."""
        local = (LocalYard(yard, lane, main=True) if directory is None
                 else LocalYard(yard, lane, directory, main=True))
        self.lane = LaneStack(local, LaneConfig(), now=clock())
        self.driver = UxdDriver(self.lane)
        loop.add(self.driver)
        self.manor = Manor(road, self.lane, yard_known=self._yard_socket_exists)
        log.info("manor %s: main yard %s of lane %s at %s", road.name, yard, lane,
                 self.lane.path)

    def _yard_socket_exists(self, name: str) -> bool:
        """A yard not heard from yet is known when its socket file exists (and is allowed)."""
        allow = self.lane.config.allow
        if allow is not None and name not in allow:
            return False
        path = os.path.join(os.path.dirname(self.lane.path),
                            f"{self.lane.local.lane}.{name}.uxd")
        try:
            return stat.S_ISSOCK(os.lstat(path).st_mode)
        except OSError:
            return False

    def handle_road_event(self, event: road_events.Event) -> bool:
        """Give a road event to the manor; True when it was a message or an expiry."""
        return self.manor.handle_road_event(event, self.clock())

    def service(self) -> None:
        """Route what the lane brought, act on the manor's events, flush the lane."""
        now = self.clock()
        while (event := self.lane.next_event()) is not None:
            if not self.manor.handle_lane_event(event, now):
                self._log_lane(event)
        while (manor_event := self.manor.next_event()) is not None:
            if isinstance(manor_event, Delivered):
                self._delivered(manor_event, now)
            elif isinstance(manor_event, Undelivered):
                # the manor logged it already (the first and every 100th as a warning)
                log.debug("manor %s: undelivered (%s): %s", self.manor.estate,
                          manor_event.problem, safe_name(manor_event.detail))
        self.driver.send(now)

    def _delivered(self, event: Delivered, now: float) -> None:
        log.debug("manor %s: message for the manor from %s (by %s)", self.manor.estate,
                 event.source, event.via)
        if is_error(event.body):
            # a peer can send errors at will: the first and every 100th are warnings
            # (``event.source`` is partly a sender's claim: Triple.__str__ escapes it)
            self.errors_heard += 1
            log.log(loudness(self.errors_heard), "manor %s: error from %s: %s (%d so far)",
                    self.manor.estate, event.source, safe_name(event.body.get("error")),
                    self.errors_heard)
        elif self.echo:
            self.manor.reply(event, event.body, now=now)

    def _log_lane(self, event: events.Event) -> None:
        if isinstance(event, events.YardAdded):
            log.info("manor %s: yard %s joined the lane", self.manor.estate, event.yard)
        elif isinstance(event, events.YardRestarted):
            log.info("manor %s: yard %s restarted", self.manor.estate, event.yard)
