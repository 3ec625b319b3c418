"""Lane deeds: a LaneStack on a UNIX datagram socket inside an ioflo house.

FloScript (the shares live under ``.raetlike.lane.stack.`` unless a deed is
given ``per inode "..."``)::

    init .raetlike.lane.stack.local with name "lord" lane "ash" directory "/tmp/raetlike/lanes"

    framer stack be active first start
        frame start
            enter
                do raetlike lane stack setup
            recur
                do raetlike lane stack service
            exit
                do raetlike lane stack closer

    ...     do raetlike lane stack sender at enter with destination "serf" text "hi"
    ...     do raetlike lane stack printer

``local`` fields: ``name`` (default: the house's name), ``lane`` ("lane"),
``directory`` (the lane default), ``main`` (False: be the lane's main yard),
``main_yard`` ("": route unknown yards through this main yard).  ``status``
counters: ``received``, ``unreachable`` (messages handed back undelivered),
``failed`` (refused by the stack).  ``address`` has the socket ``path``.
"""

from __future__ import annotations

import logging
from typing import Any

from lane import events
from lane.stack import LaneConfig, LaneStack
from lane.yard import LocalYard
from raetlike.flo._deed import RaetlikeDeed, stack_ioinits
from raetlike.uxd import UxdDriver

__all__ = [
    "LANE_INODE",
    "RaetlikeLaneStackCloser",
    "RaetlikeLaneStackPrinter",
    "RaetlikeLaneStackSender",
    "RaetlikeLaneStackService",
    "RaetlikeLaneStackSetup",
]

log = logging.getLogger(__name__)

LANE_INODE = ".raetlike.lane.stack."
"""Where the lane deeds keep their shares unless the plan says otherwise."""

_LOCAL = {"name": "", "lane": "lane", "directory": "", "main": False, "main_yard": ""}
_STATUS = {"received": 0, "unreachable": 0, "failed": 0}


class _LaneDeed(RaetlikeDeed):
    """What every lane deed shares: the iois and the stack they hold."""

    Ioinits = stack_ioinits(LANE_INODE, _LOCAL, _STATUS)

    def lane(self) -> LaneStack | None:
        """The house's lane stack, or None (logged) before setup or after close."""
        stack = self.stack.value
        if isinstance(stack, LaneStack):
            return stack
        log.error("house %s: %s before 'do raetlike lane stack setup' (or after close)",
                  self.house_name, type(self).__name__)
        return None


class RaetlikeLaneStackSetup(_LaneDeed):
    """``do raetlike lane stack setup at enter``: make the yard and bind its socket."""

    def action(self) -> None:
        name = str(self.setting("name", "") or self.house_name)
        directory = str(self.setting("directory", ""))
        yard_settings: dict[str, Any] = {"lane": str(self.setting("lane", "lane")),
                                         "main": bool(self.setting("main", False))}
        if directory:
            yard_settings["directory"] = directory
        local = LocalYard(name, **yard_settings)
        main_yard = str(self.setting("main_yard", "")) or None
        stack = LaneStack(local, LaneConfig(main_yard=main_yard), now=self.now)
        driver = UxdDriver(stack)
        self.stack.value = stack
        self.driver.value = driver
        self.address.update(path=driver.path)
        log.info("house %s: yard %s on %s", self.house_name, name, driver.path)


class RaetlikeLaneStackService(_LaneDeed):
    """``do raetlike lane stack service``: once per tick, transmit, read, fire timers, write.

    Messages waiting in ``txmsgs`` are handed to the stack; every event lands
    in ``events``, received messages also in ``rxmsgs`` as ``(body, sender)``.
    """

    def action(self) -> None:
        stack = self.lane()
        if stack is None:
            return
        self.serve(stack.transmit, lambda: _collect_events(self, stack))


def _collect_events(deed: _LaneDeed, stack: LaneStack) -> None:
    while (event := stack.next_event()) is not None:
        deed.events.value.append(event)
        if isinstance(event, events.MessageReceived):
            deed.rxmsgs.value.append((event.body, event.yard))
            deed.count("received")
        elif isinstance(event, events.YardUnreachable):
            deed.count("unreachable")
        log.debug("house %s: %s", deed.house_name, event)


class RaetlikeLaneStackSender(_LaneDeed):
    """``do raetlike lane stack sender at enter with destination "Y" FIELD VALUE ...``.

    Queues the message made of the ``with`` fields (all but ``destination``)
    in ``txmsgs``; without ``destination`` it goes to the ``destination``
    share's value, else to the lane's main yard.
    """

    def action(self, destination: str = "", **parms: Any) -> None:
        stack = self.lane()
        if stack is None:
            return
        target = (destination or self.destination.value
                  or self.setting("main_yard", ""))
        self.queue_message(target, dict(parms))


class RaetlikeLaneStackPrinter(_LaneDeed):
    """``do raetlike lane stack printer``: log (and take) each message waiting in ``rxmsgs``."""

    def action(self) -> None:
        self.log_received()


class RaetlikeLaneStackCloser(_LaneDeed):
    """``do raetlike lane stack closer at exit``: close the stack, flush, remove the socket."""

    def action(self) -> None:
        stack = self.stack.value
        if not isinstance(stack, LaneStack):
            return
        self.close_stack(stack.close, lambda: _collect_events(self, stack))
        log.info("house %s: yard %s closed", self.house_name, stack.name)
