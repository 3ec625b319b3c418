"""Road deeds: a RoadStack on a UDP socket inside an ioflo house.

FloScript (the shares live under ``.raetlike.road.stack.`` unless a deed is
given ``per inode "..."``)::

    init .raetlike.road.stack.local with name "minion" host "127.0.0.1" port 7531

    framer stack be active first start
        frame start
            enter
                do raetlike road stack setup
            recur
                do raetlike road stack service
            exit
                do raetlike road stack closer

    ...     do raetlike road stack joiner at enter with host "127.0.0.1" port 7530
    ...     do raetlike road stack mains at enter with joins "127.0.0.1:7530 127.0.0.1:7540"
                multi "failover"                     # several mains (docs/multi-main.md)
    ...     do raetlike road stack allower at enter
    ...     go next if allowed in .raetlike.road.stack.status
    ...     do raetlike road stack sender at enter with destination "master" text "hi"
    ...     do raetlike road stack printer

``local`` fields: ``name`` (default: the house's name; a valid name of
:mod:`raetlike.names`), ``host`` (127.0.0.1), ``port`` (0: any free port),
``main`` (False), ``auto`` ("once", "always" or "never"; default never for a
main estate, once otherwise), ``keep`` (a keep directory; "" keeps keys in
memory only), ``durable`` (a directory for a durable outbox and receive dedup,
:class:`raetlike.durable.DurableRoad`; "" for none; use it with a ``keep``, so a
restart keeps its identity).  ``status`` counters: ``joined``, ``allowed``, ``received``,
``sent`` (acknowledged), ``expired``, ``lost``, ``failed`` (refused by the
stack), ``failovers`` (the active main changed, with ``mains``).  ``address`` has the
bound ``host`` and ``port``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from raetlike.durable import DurableRoad
from raetlike.errors import AddressError, RaetError
from raetlike.flo._deed import RaetlikeDeed, stack_ioinits
from raetlike.keep import default_auto
from raetlike.multimain import DEFAULT_MODE, MainActive, MultiConfig, MultiMain, MultiMode
from raetlike.names import check_name
from raetlike.udp import UdpDriver, parse_host_port
from raetlike.wire.kinds import AutoMode
from road import events
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = [
    "ROAD_INODE",
    "RaetlikeRoadStackAllower",
    "RaetlikeRoadStackCloser",
    "RaetlikeRoadStackJoiner",
    "RaetlikeRoadStackMains",
    "RaetlikeRoadStackPrinter",
    "RaetlikeRoadStackSender",
    "RaetlikeRoadStackService",
    "RaetlikeRoadStackSetup",
]

log = logging.getLogger(__name__)

ROAD_INODE = ".raetlike.road.stack."
"""Where the road deeds keep their shares unless the plan says otherwise."""

_LOCAL = {"name": "", "host": "127.0.0.1", "port": 0, "main": False, "auto": "", "keep": "",
          "durable": ""}
_STATUS = {"joined": 0, "allowed": 0, "received": 0, "sent": 0, "expired": 0, "lost": 0,
           "failed": 0, "failovers": 0}

_COUNTED: dict[type[events.Event], str] = {
    events.Joined: "joined",
    events.Allowed: "allowed",
    events.MessageSent: "sent",
    events.MessageExpired: "expired",
    events.RemoteLost: "lost",
}


class _RoadDeed(RaetlikeDeed):
    """What every road deed shares: the iois and the stack they hold."""

    Ioinits = stack_ioinits(ROAD_INODE, _LOCAL, _STATUS)

    def road(self) -> RoadStack | None:
        """The house's road stack, or None (logged) before setup or after close."""
        stack = self.stack.value
        if isinstance(stack, RoadStack):
            return stack
        log.error("house %s: %s before 'do raetlike road stack setup' (or after close)",
                  self.house_name, type(self).__name__)
        return None


class RaetlikeRoadStackSetup(_RoadDeed):
    """``do raetlike road stack setup at enter``: make the stack and bind its UDP socket."""

    def action(self) -> None:
        name = check_name(str(self.setting("name", "") or self.house_name), "estate name")
        host = str(self.setting("host", "127.0.0.1"))
        port = int(self.setting("port", 0))
        main = bool(self.setting("main", False))
        chosen = str(self.setting("auto", ""))
        auto = AutoMode[chosen.upper()] if chosen else default_auto(main)
        keep_dir = str(self.setting("keep", ""))
        config = RoadConfig(auto=auto)
        if keep_dir:
            from road.persist import open_estate  # noqa: PLC0415 - only kept estates need files

            local, keep = open_estate(keep_dir, name, main=main, host_address=(host, port),
                                      auto=auto, max_pending_saves=config.max_pending_saves)
            stack = RoadStack(local, config, keep=keep, now=self.now)
            keep.restore_remotes(stack)
        else:
            stack = RoadStack(LocalEstate(name=name, main=main), config, now=self.now)
        durable = str(self.setting("durable", ""))
        driver = UdpDriver(stack if not durable else DurableRoad(stack, Path(durable)),
                           host, port)
        self.stack.value = stack
        self.driver.value = driver
        bound_host, bound_port = driver.address
        self.address.update(host=bound_host, port=bound_port)
        log.info("house %s: estate %s on %s:%d%s", self.house_name, name, bound_host,
                 bound_port, " (main)" if main else "")


class RaetlikeRoadStackService(_RoadDeed):
    """``do raetlike road stack service``: once per tick, transmit, read, fire timers, write.

    Messages waiting in ``txmsgs`` are handed to the stack; every event the
    stack reports lands in ``events``, received messages also in ``rxmsgs``
    as ``(body, sender)``, and the ``status`` counters are advanced.
    """

    def action(self) -> None:
        stack = self.road()
        if stack is None:
            return
        road = _pumped(self, stack)
        self.serve(road.transmit, lambda: _collect_events(self, road))


def _pumped(deed: _RoadDeed, stack: RoadStack) -> RoadStack | DurableRoad | MultiMain:
    """What the driver pumps: the durable road or multi-main policy wrapping ``stack``, or
    ``stack``."""
    road = getattr(deed.driver.value, "stack", None)
    return road if isinstance(road, DurableRoad | MultiMain) else stack


def _collect_events(deed: _RoadDeed, stack: RoadStack | DurableRoad | MultiMain) -> None:
    while (event := stack.next_event()) is not None:
        deed.events.value.append(event)
        if isinstance(event, events.MessageReceived):
            deed.rxmsgs.value.append((event.body, event.remote))
            deed.count("received")
        elif isinstance(event, MainActive):
            log.info("house %s: main %s active (%s)", deed.house_name, event.remote,
                     event.reason)
            if event.previous:
                deed.count("failovers")
        elif type(event) in _COUNTED:
            deed.count(_COUNTED[type(event)])
        log.debug("house %s: %s", deed.house_name, event)


class RaetlikeRoadStackJoiner(_RoadDeed):
    """``do raetlike road stack joiner at enter with host "H" port P``: join the main estate."""

    def action(self, host: str = "127.0.0.1", port: int = 7530) -> None:
        stack = self.road()
        driver = self.driver.value
        if stack is not None and isinstance(driver, UdpDriver):
            try:
                address = driver.resolve((str(host), int(port)))
            except AddressError as exc:  # the plan named a host that does not resolve
                where = f"house {self.house_name}: joiner {host}:{port}"
                raise AddressError(f"{where}: {exc}") from None
            stack.join(address, now=self.now)
            log.info("house %s: joining %s:%d", self.house_name, *address)


class RaetlikeRoadStackMains(_RoadDeed):
    """``do raetlike road stack mains at enter with joins "H:P H:P ..." [multi "hot|failover"]
    [failback S]``: join several mains (docs/multi-main.md), as ``raetlike estate --join A
    --join B --multi M --failback S``; the sender's default destination is the active main."""

    def action(self, joins: str = "", multi: str = "", failback: float = -1.0) -> None:
        stack = self.road()
        driver = self.driver.value
        if stack is None or not isinstance(driver, UdpDriver):
            return
        where = f"house {self.house_name}: mains"
        if isinstance(driver.stack, DurableRoad | MultiMain):
            raise RaetError(f"{where}: the estate is durable or joined its mains already")
        addresses = []
        for text in str(joins).replace(",", " ").split():
            try:
                host, port = parse_host_port(text)
                addresses.append(driver.resolve((host, port)))
            except (ValueError, AddressError) as exc:
                raise AddressError(f"{where}: {text}: {exc}") from None
        if len(addresses) < 2:
            raise RaetError(f"{where}: give two or more HOST:PORT in joins (one: use joiner)")
        try:
            mode = MultiMode(str(multi or DEFAULT_MODE.value))
        except ValueError:
            raise RaetError(f"{where}: multi is 'hot' or 'failover', not {multi!r}") from None
        config = MultiConfig(mode, failback_after=None if float(failback) < 0 else float(failback))
        mains = MultiMain(stack, addresses, config)
        driver.stack = mains
        mains.start(self.now)
        log.info("house %s: joining %d mains (%s)", self.house_name, len(addresses), mode.value)


class RaetlikeRoadStackAllower(_RoadDeed):
    """``do raetlike road stack allower at enter [with name "R"]``: allow R or all joined."""

    def action(self, name: str = "") -> None:
        stack = self.road()
        if stack is None:
            return
        names = [name] if name else [r.name for r in stack.remotes.values() if r.joined]
        for remote in names:
            stack.allow(remote, now=self.now)
            log.info("house %s: allowing %s", self.house_name, remote)


class RaetlikeRoadStackSender(_RoadDeed):
    """``do raetlike road stack sender at enter with destination "R" FIELD VALUE ...``.

    Queues the message made of the ``with`` fields (all but ``destination``)
    in ``txmsgs``.  Without ``destination`` it goes to the ``destination``
    share's value, else the main estate joined, else the sender of the last
    message received.
    """

    def action(self, destination: str = "", **parms: Any) -> None:
        stack = self.road()
        if stack is None:
            return
        self.queue_message(destination or _default_destination(self, stack), dict(parms))


def _default_destination(deed: _RoadDeed, stack: RoadStack) -> str:
    if deed.destination.value:
        return str(deed.destination.value)
    policy = getattr(deed.driver.value, "stack", None)
    if isinstance(policy, MultiMain) and policy.active is not None:
        return policy.active
    mains = [r.name for r in stack.remotes.values() if r.main]
    if mains:
        return mains[0]
    for event in reversed(deed.events.value):
        if isinstance(event, events.MessageReceived):
            return event.remote
    return ""


class RaetlikeRoadStackPrinter(_RoadDeed):
    """``do raetlike road stack printer``: log (and take) each message waiting in ``rxmsgs``."""

    def action(self) -> None:
        self.log_received()


class RaetlikeRoadStackCloser(_RoadDeed):
    """``do raetlike road stack closer at exit``: close the stack, flush, close the socket."""

    def action(self) -> None:
        stack = self.stack.value
        if not isinstance(stack, RoadStack):
            return
        road = _pumped(self, stack)
        self.close_stack(road.close, lambda: _collect_events(self, road))
        log.info("house %s: estate %s closed", self.house_name, stack.name)
