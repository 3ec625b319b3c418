"""The asyncio driver: estates and yards as async context managers.

::

    async with (aio.Estate("main", main=True, auto="once") as main,
                aio.Estate("minion") as minion):
        await minion.join(main.address)              # joined and allowed
        await minion.send({"hello": 1}, to="main")   # acknowledged by main
        async for message in main.messages():        # road.events.MessageReceived
            print(message.remote, message.body)

A main estate leaves keys it has never seen pending unless ``auto`` says
otherwise (``"once"``: accept them the first time, ``"always"``); accept a
pending joiner with :meth:`Estate.accept`.

An estate with several mains (docs/multi-main.md) joins them with
:meth:`Estate.join_mains`: ``hot`` (all of them) or ``failover`` (one active,
``estate.mains.active``); ``MainActive`` events say when the active one changes.

The socket is watched with ``loop.add_reader`` (so any asyncio loop works,
uvloop included); time is ``loop.time()``; the stack's next timer is armed
with ``loop.call_at`` and re-armed after every call into the stack.  A send
that cannot be queued raises :class:`~raetlike.errors.BackpressureError` at
once; one that expires raises :class:`MessageExpiredError` (road) or
:class:`YardUnreachableError` (lane).  Cancelling an awaiting ``send`` does
not take the message back: the stack still delivers it or reports it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from lane import LaneConfig, LaneStack, LocalYard
from lane import events as lane_events
from raetlike.durable import DurableConfig, DurableRoad
from raetlike.errors import (
    JoinError,
    JoinTimeoutError,
    MessageExpiredError,
    RaetError,
    YardUnreachableError,
)
from raetlike.keep import default_auto
from raetlike.multimain import DEFAULT_MODE, MultiConfig, MultiMain, MultiMode
from raetlike.names import check_name
from raetlike.udp import Address, UdpDriver
from raetlike.uxd import UxdDriver
from raetlike.wire.kinds import AutoMode
from road import events as road_events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = [
    "Estate", "Yard",
    "MessageExpiredError", "YardUnreachableError", "JoinError", "JoinTimeoutError",
]

log = logging.getLogger(__name__)

JOIN_TIMEOUT = 30.0
EVENT_BACKLOG = 1024  # events nobody reads: the oldest are dropped beyond this


class _Stack(Protocol):
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...
    def next_event(self) -> Any: ...
    def close(self, *, now: float | None = None) -> None: ...


class _Driver(Protocol):
    @property
    def wants_write(self) -> bool: ...
    def fileno(self) -> int: ...
    def receive(self, now: float) -> int: ...
    def send(self, now: float) -> int: ...
    def close(self) -> None: ...


_EventT = TypeVar("_EventT")
_StackT = TypeVar("_StackT", bound=_Stack)


class _Stream(Generic[_EventT]):
    """Items for ``async for``; ends when closed."""

    def __init__(self, limit: int | None = None) -> None:
        self._items: collections.deque[_EventT] = collections.deque(maxlen=limit)
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = False

    def put(self, item: _EventT) -> None:
        self._items.append(item)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def __aiter__(self) -> AsyncIterator[_EventT]:
        while True:
            while self._items:
                yield self._items.popleft()
            if self.closed:
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter


class _Pump(Generic[_StackT]):
    """A stack and its socket on the running asyncio loop."""

    def __init__(self, stack: _StackT) -> None:
        self.stack = stack
        self._pumped: _Stack = stack  # what the socket and timers drive (a durable road's)
        self._driver: _Driver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._armed: float | None = None
        self._writing = False
        self._inbox: _Stream[Any] = _Stream()
        self._events: _Stream[Any] = _Stream(EVENT_BACKLOG)
        self.undelivered: list[Any] = []
        """Undelivered-message events nobody awaited, and those from closing."""

    @property
    def name(self) -> str:
        """The local estate's or yard's name."""
        return str(getattr(self.stack, "name", "?"))

    def _open(self) -> _Driver:
        raise NotImplementedError

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop this stack runs on (once entered)."""
        if self._loop is None:
            raise RaetError(f"{self.name} is not open: use 'async with'")
        return self._loop

    async def __aenter__(self) -> _Pump[_StackT]:
        self._loop = asyncio.get_running_loop()
        self._driver = self._open()
        self._loop.add_reader(self._driver.fileno(), self._on_readable)
        self._service()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the stack (undelivered messages are reported), then the socket."""
        if self._driver is None or self._loop is None:
            return
        driver, loop = self._driver, self._loop
        self._pumped.close(now=loop.time())
        self._service()
        self._driver = None
        loop.remove_reader(driver.fileno())
        if self._writing:
            loop.remove_writer(driver.fileno())
        if self._timer is not None:
            self._timer.cancel()
        driver.close()
        self._closed()
        self._inbox.close()
        self._events.close()

    def _closed(self) -> None:
        """Fail whatever still waits (after the closing events were handled)."""

    def _on_readable(self) -> None:
        if self._driver is not None:
            self._driver.receive(self.loop.time())
            self._service()

    def _on_timer(self) -> None:
        self._timer, self._armed = None, None
        self._service()

    def _service(self) -> None:
        """Timers, flush, events, re-arm: after every call into the stack."""
        driver, loop = self._driver, self.loop
        if driver is None:
            return
        now = loop.time()
        timer = self._pumped.get_timer()
        if timer is not None and timer <= now:
            self._pumped.handle_timer(now)
        driver.send(now)
        if driver.wants_write != self._writing:
            self._writing = driver.wants_write
            if self._writing:
                loop.add_writer(driver.fileno(), self._service)
            else:
                loop.remove_writer(driver.fileno())
        while (event := self._pumped.next_event()) is not None:
            self._handle(event)
        self._settle()
        self._arm(self._pumped.get_timer())

    def _arm(self, deadline: float | None) -> None:
        if deadline == self._armed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._armed = deadline
        self._timer = None if deadline is None else self.loop.call_at(deadline, self._on_timer)

    def _handle(self, event: Any) -> None:
        raise NotImplementedError

    def _settle(self) -> None:
        """Resolve what can be resolved from the stack's state after a call."""

    async def messages(self) -> AsyncIterator[Any]:
        """Every message received, as the stack's MessageReceived events; ends on close."""
        async for message in self._inbox:
            yield message

    async def events(self) -> AsyncIterator[Any]:
        """Every other event the stack reports (joins, presence, failures); ends on close.

        Only the latest ``EVENT_BACKLOG`` are kept for a reader that falls behind.
        """
        async for event in self._events:
            yield event


class Estate(_Pump[RoadStack]):
    """A road estate (RoadStack) on a UDP socket, as an async context manager."""

    def __init__(self, estate: str | RoadStack, *, main: bool = False,
                 host: str = "127.0.0.1", port: int = 0,
                 config: RoadConfig | None = None,
                 auto: AutoMode | str | None = None,
                 durable: str | os.PathLike[str] | None = None,
                 durable_config: DurableConfig | None = None) -> None:
        """Wrap ``estate``, or make a stack of that name with an in-memory keep.

        ``durable``: keep the outbox and the receive dedup in that directory
        (:class:`~raetlike.durable.DurableRoad`, docs/reliability.md): a message
        :meth:`transmit` or :meth:`send` accepted is on disk before it returns and is
        sent again after a restart; message ids are then the store's durable ids.  A
        restart keeps its identity only with a keep on disk: pass a stack from
        :func:`road.persist.open_estate`.

        ``auto`` (an :class:`~raetlike.wire.kinds.AutoMode` or ``"never"``,
        ``"once"``, ``"always"``) decides on keys never seen before, in place
        of ``config.auto``; by default ``never`` for a main estate (a joiner
        waits until :meth:`accept`), ``once`` otherwise.  A name that is not a
        valid name (:mod:`raetlike.names`) raises
        :class:`~raetlike.names.InvalidNameError`.
        """
        if isinstance(estate, str):
            check_name(estate, "estate name")
            mode = _auto_mode(auto, main)
            config = dataclasses.replace(config or RoadConfig(), auto=mode)
            estate = RoadStack(LocalEstate(estate, main=main), config, MemoryKeep(mode))
        elif auto is not None:
            raise RaetError("auto goes with an estate name: a RoadStack has its keep's own")
        super().__init__(estate)
        self.durable = None if durable is None else DurableRoad(
            estate, Path(durable), durable_config)
        """The durable road when ``durable`` was given, else None."""
        if self.durable is not None:
            self._pumped = self.durable
        self._road: RoadStack | DurableRoad | MultiMain = self.durable or estate
        self.mains: MultiMain | None = None
        """The several-mains policy once :meth:`join_mains` was called, else None."""
        self._mains_up: asyncio.Future[str] | None = None
        self._host, self._port = host, port
        self._sends: dict[int, asyncio.Future[int]] = {}
        self._joins: list[tuple[set[str], Any, asyncio.Future[str]]] = []

    async def __aenter__(self) -> Estate:
        await super().__aenter__()
        return self

    def accept(self, role: str) -> None:
        """Accept the pending keys of ``role`` (a JoinPending event names it).

        The joiner, which retries while it waits, then gets in.  Only for an
        estate made from a name (its keep is in memory); an estate on a keep
        directory is accepted with ``raetlike keys accept``.
        """
        keep = self.stack.keep
        if not isinstance(keep, MemoryKeep):
            raise RaetError(f"estate {self.name} keeps keys on disk: use 'raetlike keys accept'")
        try:
            keep.accept(role)
        except KeyError:
            raise RaetError(f"estate {self.name} holds no keys of role {role!r}") from None
        self._service()

    def _open(self) -> UdpDriver:
        return UdpDriver(self._road, self._host, self._port)

    @property
    def address(self) -> Address:
        """The bound (host, port)."""
        if not isinstance(self._driver, UdpDriver):
            raise RaetError(f"estate {self.name} is not open: use 'async with'")
        return self._driver.address

    async def join(self, address: Address, *, timeout: float = JOIN_TIMEOUT) -> str:
        """Join the estate at ``address`` and complete an allow; returns its name.

        ``address`` may name a host (``("localhost", 7530)``): it is looked up once
        with getaddrinfo, and :class:`~raetlike.errors.AddressError` says why when
        it does not resolve.  Raises :class:`JoinError` when it is rejected and
        :class:`JoinTimeoutError` when both have not completed within ``timeout`` seconds (a pending
        acceptance by the far operator waits, up to the timeout).
        """
        driver = self._driver
        if not isinstance(driver, UdpDriver):
            raise RaetError(f"estate {self.name} is not open: use 'async with'")
        # getaddrinfo may block on DNS: off the loop (AddressError if it does not resolve)
        address = await self.loop.run_in_executor(None, driver.resolve, address)
        placeholder = self.stack.join(address, now=self.loop.time())
        remote = self.stack.remote(placeholder)
        future: asyncio.Future[str] = self.loop.create_future()
        entry = ({placeholder}, remote, future)
        self._joins.append(entry)
        self._service()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise JoinTimeoutError(f"join of {address[0]}:{address[1]} not complete after "
                                   f"{timeout} s") from None
        finally:
            if entry in self._joins:
                self._joins.remove(entry)

    async def join_mains(self, addresses: Sequence[Address], *,
                         multi: MultiMode | str = DEFAULT_MODE,
                         failback_after: float | None = None,
                         timeout: float = JOIN_TIMEOUT) -> str:
        """Join several mains (docs/multi-main.md) and wait until one is joined and allowed.

        Every main is joined, now or whenever it appears (a main down now is picked
        up later); ``multi`` is ``"hot"`` (use them all) or ``"failover"`` (one at a
        time, ``self.mains.active``; ``failback_after`` seconds up brings the first
        back, None stays).  Returns the name of the first main allowed (the active
        one in failover); :class:`JoinTimeoutError` when none is within ``timeout``.
        Messages sent with :meth:`transmit` or :meth:`send` to the active main move
        with it; a bus node on this estate (raetlike.hosting.EstateBus on
        ``self.road``) follows it.
        """
        driver = self._driver
        if not isinstance(driver, UdpDriver):
            raise RaetError(f"estate {self.name} is not open: use 'async with'")
        if self.durable is not None:
            raise RaetError(f"estate {self.name}: a durable estate joins one main only")
        if self.mains is not None:
            raise RaetError(f"estate {self.name} joined its mains already")
        resolved = [await self.loop.run_in_executor(None, driver.resolve, address)
                    for address in addresses]
        mode = multi if isinstance(multi, MultiMode) else MultiMode(multi)
        self.mains = MultiMain(self.stack, resolved,
                               MultiConfig(mode=mode, failback_after=failback_after))
        self._road = self._pumped = self.mains
        self._mains_up = self.loop.create_future()
        self.mains.start(self.loop.time())
        self._service()
        try:
            return await asyncio.wait_for(asyncio.shield(self._mains_up), timeout)
        except TimeoutError:
            raise JoinTimeoutError(f"none of {len(resolved)} mains joined and allowed after "
                                   f"{timeout} s") from None

    def _settle(self) -> None:
        """A join_mains waiter learns the first main up (the active one in failover)."""
        waiter, mains = self._mains_up, self.mains
        if waiter is None or waiter.done() or mains is None:
            return
        up = [name for name in mains.main_names() if mains.up(name)]
        if up and (mains.active is not None or mains.config.mode is MultiMode.HOT):
            waiter.set_result(mains.active or up[0])

    @property
    def road(self) -> RoadStack | DurableRoad | MultiMain:
        """What the socket drives and messages go through (the stack, or its wrapper)."""
        return self._road

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None) -> int:
        """Queue ``message`` without waiting; its fate comes through :meth:`events`."""
        message_id = self._road.transmit(message, to=to, ttl=ttl, now=self.loop.time())
        self._service()
        return message_id

    async def send(self, message: Mapping[str, Any] | bytes, to: str, *,
                   ttl: float | None = None) -> int:
        """Send ``message`` to the remote ``to`` and wait for its acknowledgement.

        Returns its message id.  Raises BackpressureError at once when the
        outbox is full, and :class:`MessageExpiredError` when it expires.
        """
        message_id = self._road.transmit(message, to=to, ttl=ttl, now=self.loop.time())
        future: asyncio.Future[int] = self.loop.create_future()
        self._sends[message_id] = future
        self._service()
        try:
            return await future
        finally:
            self._sends.pop(message_id, None)

    def _handle(self, event: Any) -> None:
        if isinstance(event, road_events.MessageReceived):
            self._inbox.put(event)
            return
        if isinstance(event, road_events.MessageSent | road_events.MessageExpired):
            future = self._sends.pop(event.message_id, None)
            if future is not None and not future.done():
                if isinstance(event, road_events.MessageSent):
                    future.set_result(event.message_id)
                else:
                    future.set_exception(MessageExpiredError(event))
                return
            if isinstance(event, road_events.MessageExpired):
                self.undelivered.append(event)
        self._join_event(event)
        self._events.put(event)

    def _join_event(self, event: Any) -> None:
        for names, remote, future in self._joins:
            if future.done() or event.remote not in names | {remote.name}:
                continue
            names.add(event.remote)
            if isinstance(event, road_events.Allowed):
                future.set_result(event.remote)
            elif isinstance(event, road_events.JoinRejected):
                future.set_exception(JoinError(f"join with {event.remote} rejected: "
                                               f"{event.reason}"))

    def _closed(self) -> None:
        if self._mains_up is not None and not self._mains_up.done():
            self._mains_up.set_exception(JoinError(f"estate {self.name} closed"))
        for _, _, join in self._joins:
            if not join.done():
                join.set_exception(JoinError(f"estate {self.name} closed"))
        for send in self._sends.values():
            if not send.done():
                send.set_exception(RaetError(f"estate {self.name} closed"))


def _auto_mode(auto: AutoMode | str | None, main: bool) -> AutoMode:
    """``auto`` as an AutoMode; by default never for a main estate, once for others."""
    if auto is None:
        return default_auto(main)
    if isinstance(auto, str):
        try:
            return AutoMode[auto.upper()]
        except KeyError:
            raise RaetError(f"auto must be never, once or always, not {auto!r}") from None
    return AutoMode(auto)


class Yard(_Pump[LaneStack]):
    """A lane yard (LaneStack) on a UNIX datagram socket, as an async context manager."""

    def __init__(self, yard: str | LaneStack, *, lane: str = "lane",
                 directory: str | None = None, main: bool = False,
                 config: LaneConfig | None = None) -> None:
        """Wrap ``yard``, or make a stack of that name on ``lane`` in ``directory``."""
        if isinstance(yard, str):
            local = (LocalYard(yard, lane, directory, main=main) if directory is not None
                     else LocalYard(yard, lane, main=main))
            yard = LaneStack(local, config)
        super().__init__(yard)
        self._sends: dict[str, collections.OrderedDict[int, asyncio.Future[int]]] = {}

    async def __aenter__(self) -> Yard:
        await super().__aenter__()
        return self

    def _open(self) -> UxdDriver:
        return UxdDriver(self.stack)

    @property
    def path(self) -> str:
        """The yard's socket path."""
        return self.stack.path

    def transmit(self, message: Mapping[str, Any], to: str) -> int:
        """Queue ``message`` without waiting; if it cannot be delivered, :meth:`events` says so."""
        message_id = self.stack.transmit(message, to=to, now=self.loop.time())
        self._service()
        return message_id

    async def send(self, message: Mapping[str, Any], to: str) -> int:
        """Send ``message`` to the yard ``to``; completes when the kernel took all its pages.

        Returns its message id.  Raises BackpressureError at once when that
        yard's outbox is full, and :class:`YardUnreachableError` when the
        yard stays unreachable (``LaneConfig.unreachable_after``).
        """
        message_id = self.stack.transmit(message, to=to, now=self.loop.time())
        future: asyncio.Future[int] = self.loop.create_future()
        self._sends.setdefault(to, collections.OrderedDict())[message_id] = future
        self._service()
        try:
            return await future
        finally:
            if to in self._sends:
                self._sends[to].pop(message_id, None)

    def _handle(self, event: Any) -> None:
        if isinstance(event, lane_events.MessageReceived):
            self._inbox.put(event)
            return
        if isinstance(event, lane_events.YardUnreachable):
            pending = self._sends.get(event.yard, collections.OrderedDict())
            awaited = False
            for message_id in event.message_ids:
                future = pending.pop(message_id, None)
                if future is not None and not future.done():
                    future.set_exception(YardUnreachableError(event))
                    awaited = True
            if not awaited:
                self.undelivered.append(event)
        self._events.put(event)

    def _settle(self) -> None:
        """Messages no longer waiting in their yard's outbox went to the kernel."""
        for name, pending in self._sends.items():
            remote = self.stack.yards.get(name)
            first_waiting: float = math.inf
            if remote is not None:
                first_waiting = next((o.message_id for o in remote.outbox if o.message_id),
                                     math.inf)
            while pending:
                message_id, future = next(iter(pending.items()))
                if message_id >= first_waiting:
                    break
                pending.popitem(last=False)
                if not future.done():
                    future.set_result(message_id)
