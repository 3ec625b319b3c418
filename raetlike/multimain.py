"""An estate joined to several mains: hot (all of them) or failover (one active).

:class:`MultiMain` is a sans-IO policy object that owns one :class:`RoadStack`
and stands in for it towards the driver and the bus (it has the stack's
``receive_datagram`` / ``datagrams_to_send`` / ``get_timer`` / ``handle_timer`` /
``next_event`` / ``transmit`` surface, as :class:`raetlike.durable.DurableRoad`
does).  It joins every main it was given (the stack retries a join every
``rejoin_interval`` until it completes, so a main that is down at start is
picked up whenever it appears), watches their presence through the stack's
events, and decides which of them are *upstream*:

- ``hot``: every main that is joined and allowed.  The bus sends events to
  all of them and a request to one live one (docs/bus.md).
- ``failover``: one *active* main.  When presence says it is gone
  (``RemoteLost``), the next main (in the order given) that is allowed and alive
  becomes active at once; the messages the stack still holds for the old
  one (queued, or sent and not yet acknowledged) are given to the new one.
  Failing back is :attr:`MultiConfig.failback_after`'s: sticky by default.

It never calls into user code: what changed comes out of :meth:`next_event`
as :class:`MainActive`, in the stream of the stack's own events.  See
docs/multi-main.md for the guarantees (what "delivered once" means).
"""

from __future__ import annotations

import enum
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raetlike.errors import BackpressureError, LocalProtocolError
from road import events
from road.config import LocalEstate
from road.remote import Address, Remote
from road.stack import RoadStack

_PRESENCE = (events.Joined, events.Allowed, events.Alive, events.RemoteLost,
             events.RemoteRemoved, events.RemoteReaped)
"""The stack events that may change which mains are up."""

__all__ = ["DEFAULT_MODE", "MainActive", "MultiConfig", "MultiMain", "MultiMode", "MultiStats"]

log = logging.getLogger(__name__)


class MultiMode(enum.Enum):
    """How an estate with several mains uses them."""

    HOT = "hot"
    """Joined and allowed to every reachable main; events go to all of them."""
    FAILOVER = "failover"
    """One active main at a time; the next reachable one when it is gone."""


DEFAULT_MODE = MultiMode.FAILOVER
"""The mode for several mains when none is named: Salt's ``master_type: failover``
habit (one master carries a minion's traffic), and the one that sends each event once."""


@dataclass(frozen=True, slots=True)
class MultiConfig:
    """Settings of a :class:`MultiMain`."""

    mode: MultiMode = DEFAULT_MODE
    """Hot or failover."""
    failback_after: float | None = None
    """Failover: go back to the first main given once it has been allowed and alive this
    many seconds in a row (Salt's ``master_failback`` with its interval); None (the
    default, Salt's default too) stays on the main it failed over to (sticky)."""
    alive_timeout: float = 1.0
    """Seconds an unanswered presence check of a main waits before the main is lost (the
    stack's own default is 2 s, RAET's; in fast mode the least wait: a main whose answers
    take longer is waited for 4 of them, docs/road.md).  A minion checks a silent main ``period +
    offset`` (1.5 s, a presence period) after it last heard it, so with 1 s a dead main is
    noticed, and failover done, within 2.5 s: under 2 presence periods."""
    max_tracked: int = 100_000
    """Failover: messages to the active main remembered until acknowledged (so they can
    move); past it the oldest is forgotten (``stats.untracked``): it stays with its main."""

    def __post_init__(self) -> None:
        if self.failback_after is not None and not self.failback_after >= 0:
            raise LocalProtocolError(f"failback_after must be >= 0, got {self.failback_after}")
        if not self.alive_timeout > 0:
            raise LocalProtocolError(f"alive_timeout must be > 0, got {self.alive_timeout}")
        if self.max_tracked < 1:
            raise LocalProtocolError(f"max_tracked must be >= 1, got {self.max_tracked}")


@dataclass(slots=True)
class MainActive(events.Event):
    """Failover: ``remote`` is now the active main (``previous`` was, or "" at first)."""

    previous: str
    """The main that was active before ("" when none was)."""
    reason: str
    """Why: "first up", "lost", "failback"."""
    moved: int
    """Messages given to ``remote`` that had been sent or queued for ``previous``."""


@dataclass(slots=True)
class MultiStats:
    """What a MultiMain counted."""

    failovers: int = 0
    """Times the active main changed because it was lost."""
    failbacks: int = 0
    """Times it changed back to the first main (``failback_after``)."""
    moved: int = 0
    """Messages given to a new active main."""
    withdrawn: int = 0
    """Of those, never sent to the old main (taken out of its outbox)."""
    untracked: int = 0
    """Messages forgotten past ``max_tracked`` (they stay with their main)."""


@dataclass(slots=True)
class _Tracked:
    body: Any
    expires: float


class MultiMain:
    """A road stack joined to several mains; see the module docstring."""

    def __init__(self, stack: RoadStack, mains: Sequence[Address],
                 config: MultiConfig | None = None, *,
                 movable: Callable[[Any], bool] | None = None) -> None:
        """Drive ``stack`` towards ``mains`` (in order of preference).

        ``movable`` says which message bodies follow a failover (default: all);
        the bus moves its requests and events, not its responses and keepalives.
        """
        if not mains:
            raise LocalProtocolError("a multi-main estate needs at least one main")
        if len(set(mains)) != len(mains):
            raise LocalProtocolError("the same main is given twice")
        self.stack = stack
        self.addresses = list(mains)
        self.config = config or MultiConfig()
        self.stats = MultiStats()
        self.movable = movable or (lambda _body: True)
        self.active: str | None = None
        """Failover: the active main's name (None until one is allowed)."""
        self._events: deque[events.Event] = deque()
        self._tracked: dict[str, OrderedDict[int, _Tracked]] = {}  # main -> id -> message
        self._moved: set[int] = set()  # ids whose fate event we swallow (they moved)
        self._origin: dict[int, int] = {}  # id of a moved copy -> the id transmit returned
        self._primary: str | None = None  # the first main's name, once it is known
        self._primary_up_since: float | None = None
        self._active_lost = False
        self._started = False

    # == the Road surface (what drivers, channels and the bus use) =========

    @property
    def name(self) -> str:
        """The local estate's name."""
        return self.stack.name

    @property
    def names(self) -> dict[str, Remote]:
        """The stack's remotes by name."""
        return self.stack.names

    @property
    def local(self) -> LocalEstate:
        """The local estate."""
        return self.stack.local

    @property
    def now(self) -> float:
        """The stack's time."""
        return self.stack.now

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        """As :meth:`RoadStack.receive_datagram`."""
        self.stack.receive_datagram(data, source, now)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        """As :meth:`RoadStack.datagrams_to_send`."""
        return self.stack.datagrams_to_send(now)

    def get_timer(self) -> float | None:
        """The stack's next deadline, or the failback's if sooner."""
        timer = self.stack.get_timer()
        failback = self._failback_due()
        if failback is not None and (timer is None or failback < timer):
            return failback
        return timer

    def handle_timer(self, now: float) -> None:
        """Let the stack's timers fire, then fail back if it is time."""
        self.stack.handle_timer(now)
        due = self._failback_due()
        primary = self._primary
        if due is not None and due <= now and primary is not None:
            if self.up(primary):
                self._switch(self.names[primary], "failback")
            else:
                self._primary_up_since = None

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None, now: float | None = None) -> int:
        """As :meth:`RoadStack.transmit`; failover remembers what goes to the active main
        until it is acknowledged, so it can move if that main is lost.  The id returned
        stays the message's: a moved copy's ``MessageSent`` or ``MessageExpired`` carries
        it (from the new main), and the old main's are not reported."""
        message_id = self.stack.transmit(message, to, ttl=ttl, now=now)
        if (self.config.mode is MultiMode.FAILOVER and to == self.active
                and self.movable(message)):
            self._track(to, message_id, message, ttl)
        return message_id

    def close(self, *, now: float | None = None) -> None:
        """Close the stack (queued messages come back as MessageExpired)."""
        self.stack.close(now=now)

    def next_event(self) -> events.Event | None:
        """The next event: the stack's (less the fates of moved messages), and ours."""
        while True:
            if self._events:
                return self._events.popleft()
            event = self.stack.next_event()
            if event is None:
                return None
            if self._take(event):
                return event

    # == commands ==========================================================

    def start(self, now: float) -> None:
        """Join every main (the stack retries until each one answers)."""
        if self._started:
            return
        self._started = True
        for address in self.addresses:
            self.stack.join(address, now=now)
            self._check_promptly(self.stack.register.at(address))

    def main_names(self) -> list[str]:
        """The mains' remote names, in the order given (a placeholder until joined)."""
        names = []
        for address in self.addresses:
            remote = self.stack.register.at(address)
            if remote is not None:
                names.append(remote.name)
        return names

    def is_main(self, name: str) -> bool:
        """Whether the remote ``name`` is one of our mains."""
        remote = self.names.get(name)
        return remote is not None and remote.host_address in self.addresses

    def is_upstream(self, name: str) -> bool:
        """Whether the bus should treat the remote ``name`` as upstream now."""
        if self.config.mode is MultiMode.HOT:
            return self.is_main(name)
        return name == self.active

    def up(self, name: str) -> bool:
        """Whether the main ``name`` is allowed and not known dead."""
        remote = self.names.get(name)
        return (remote is not None and bool(remote.joined) and bool(remote.allowed)
                and remote.alive is not False and not remote.reaped)

    def upstreams(self) -> list[str]:
        """The mains the bus should treat as upstream now."""
        return [name for name in self.main_names() if self.is_upstream(name)]

    # == what the stack said ===============================================

    def _take(self, event: events.Event) -> bool:
        """Act on one stack event; False when it is swallowed (a moved message's fate)."""
        if isinstance(event, events.MessageSent | events.MessageExpired):
            tracked = self._tracked.get(event.remote)
            if tracked is not None:
                tracked.pop(event.message_id, None)
            if event.message_id in self._moved:
                self._moved.discard(event.message_id)
                return False
            origin = self._origin.pop(event.message_id, None)
            if origin is not None:  # a moved copy's fate is the original's, by its id
                event.message_id = origin
            return True
        if isinstance(event, _PRESENCE) and self.is_main(event.remote):
            self._check_promptly(self.names.get(event.remote))
        if (self.config.mode is MultiMode.FAILOVER and isinstance(event, _PRESENCE)
                and (event.remote == self.active or self.is_main(event.remote))):
            self._presence(event)
        return True

    def _check_promptly(self, remote: Remote | None) -> None:
        """Give a main our presence checks' shorter timeout (a join may have made the
        remote object anew, so this is done again whenever one of them changes)."""
        if remote is not None:
            remote.alive_timeout = self.config.alive_timeout

    def _presence(self, event: events.Event) -> None:
        """Failover: a main came up or went away; choose the active one.

        Only a loss of the active main (``RemoteLost``, removed, reaped) moves it: a
        re-allow that clears ``allowed`` for a moment does not.  While it stays lost
        and no other main is up, the first main to come up takes over.
        """
        name, now = event.remote, self.now
        remote = self.names.get(name)  # (None: it was removed)
        if remote is not None and remote.host_address == self.addresses[0]:
            self._primary = name
            self._primary_up_since = (self._primary_up_since or now) if self.up(name) else None
        elif name == self._primary:
            self._primary_up_since = None
        if self.active is None:
            if remote is not None and self.up(name):
                self._switch(remote, "first up")
            return
        if name == self.active:
            if remote is None or isinstance(
                    event, events.RemoteLost | events.RemoteRemoved | events.RemoteReaped):
                self._active_lost = True
            elif self.up(name):
                self._active_lost = False
        if self._active_lost:
            successor = self._next_up()
            if successor is not None:
                self._switch(successor, "lost")

    def _next_up(self) -> Remote | None:
        """The first main after the active one (in the order given, wrapping) that is up."""
        names = self.main_names()
        start = names.index(self.active) + 1 if self.active in names else 0
        for name in names[start:] + names[:start]:
            if name != self.active and self.up(name):
                return self.names[name]
        return None

    def _failback_due(self) -> float | None:
        after = self.config.failback_after
        if (after is None or self.config.mode is not MultiMode.FAILOVER
                or self._primary_up_since is None or self.active is None
                or self.active == self._primary):
            return None
        return self._primary_up_since + after

    # == moving messages ===================================================

    def _track(self, to: str, message_id: int, body: Any, ttl: float | None) -> None:
        tracked = self._tracked.setdefault(to, OrderedDict())
        expires = self.now + (self.stack.config.message_ttl if ttl is None else ttl)
        tracked[message_id] = _Tracked(body, expires)
        while len(tracked) > self.config.max_tracked:
            tracked.popitem(last=False)
            self.stats.untracked += 1

    def _switch(self, successor: Remote, reason: str) -> None:
        """Make ``successor`` the active main and give it what the old one still holds."""
        previous, self.active = self.active or "", successor.name
        self._active_lost = False
        moved = 0
        if previous and previous != successor.name:
            moved = self._move(previous, successor.name)
            if reason == "failback":
                self.stats.failbacks += 1
            else:
                self.stats.failovers += 1
        log.debug("%s: main %s active (%s%s; %d message(s) moved)", self.name, successor.name,
                 reason, f", was {previous}" if previous else "", moved)
        self._events.append(MainActive(successor.name, previous, reason, moved))

    def _move(self, old: str, new: str) -> int:
        """Re-send to ``new`` every message ``old`` has not acknowledged, in transmit order.

        Those still queued (never sent) are taken out of ``old``'s outbox; the
        others stay with ``old`` too (it may have them already, or get them when it
        is back): the receiving side's dedup takes the second copy
        (docs/multi-main.md), and their fate events from ``old`` are swallowed.  A
        message whose time ran out, or that ``new``'s full outbox refuses, stays
        with ``old`` (its fate event comes from there).
        """
        tracked = self._tracked.pop(old, OrderedDict())
        now, moved = self.now, []
        for message_id, message in tracked.items():
            if message.expires <= now:
                continue
            try:
                new_id = self.stack.transmit(message.body, new, ttl=message.expires - now)
            except BackpressureError:
                break
            moved.append(message_id)
            self._origin[new_id] = self._origin.pop(message_id, message_id)
            self._track(new, new_id, message.body, message.expires - now)
        withdrawn = set(self.stack.withdraw(old, moved))
        self._moved.update(message_id for message_id in moved if message_id not in withdrawn)
        self.stats.withdrawn += len(withdrawn)
        self.stats.moved += len(moved)
        return len(moved)
