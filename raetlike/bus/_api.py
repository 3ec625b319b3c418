"""What a bus user hands in and gets back: calls, replies, requests, errors, events, stats."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol

from raetlike.bus._message import MAX_HOPS, BusMessage, Errno, Rolemask
from raetlike.errors import RaetError
from raetlike.sp import Payload

__all__ = [
    "Call",
    "Reply",
    "Request",
    "BusError",
    "Handler",
    "Service",
    "OnReply",
    "OnEvent",
    "Link",
    "PeerLost",
    "PeerAlive",
    "EventGap",
    "BusEvent",
    "BusConfig",
    "BusStats",
]


@dataclass(frozen=True, slots=True)
class Call:
    """A request to make: a ``service.method`` topic and a payload."""

    topic: str
    """``service.method``."""
    payload: Any = None
    """The request body (any JSON/msgpack value)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What ``on_reply`` gets, exactly once per ``send``: the response or a local error."""

    matchtag: int
    """The value ``send`` returned."""
    topic: str
    """The request's topic."""
    payload: Any
    """The response body (None on error)."""
    errno: Errno
    """0, or why the request failed (ENOSYS, EHOSTUNREACH, EPERM, ETIMEDOUT, ...)."""
    error: str = ""
    """A human-readable error text."""
    userid: str = ""
    """Who answered (stamped on the way back)."""

    @property
    def ok(self) -> bool:
        """True when the request succeeded."""
        return self.errno is Errno.OK


@dataclass(frozen=True, slots=True)
class Request:
    """What a service handler gets: the request and who (authenticated) sent it."""

    topic: str
    """``service.method``."""
    payload: Any
    """The request body."""
    userid: str
    """The sender, as the receiving stack authenticated it (never what the sender wrote)."""
    role: str
    """The sender's role from its join and the keep."""
    rolemask: Rolemask
    """OWNER for the local node, USER for a remote."""
    matchtag: int
    """The matchtag of the request's last hop: the requester's when it came straight,
    else the last relay's (each relay sends a request on under a matchtag of its own)."""

    @property
    def method(self) -> str:
        """The part of the topic after the service name."""
        return self.topic.partition(".")[2]


class BusError(RaetError):
    """Raised by a handler to answer with an error number instead of a payload."""

    def __init__(self, errno: Errno, text: str = "") -> None:
        """An error response ``errno`` with ``text``."""
        super().__init__(text or errno.name)
        self.errno = errno
        self.text = text or errno.name


Handler = Callable[[Request], Any]
"""A method handler: returns the response payload or raises BusError."""

Service = Handler | Mapping[str, Handler]
"""One handler for every method of a service, or a handler per method name."""

OnReply = Callable[[Reply], None]
"""Called once with the reply (or a timeout/unreachable error)."""

OnEvent = Callable[[BusMessage], None]
"""Called with each event whose topic matches a subscription."""


class Link(Protocol):
    """One neighbour of a bus node: a road remote or a lane yard (raetlike.channels)."""

    @property
    def name(self) -> str:
        """The neighbour's name (unique among a node's links)."""
        ...

    @property
    def alive(self) -> bool:
        """False while the neighbour is known to be unreachable."""
        ...

    @property
    def userid(self) -> str:
        """The neighbour's authenticated name."""
        ...

    @property
    def role(self) -> str:
        """The neighbour's authenticated role."""
        ...

    def send(self, payload: Payload) -> bool:
        """Queue a message body to the neighbour; False (or BackpressureError) if not taken.

        It should not raise on what the body holds (raetlike.channels' links return
        False); a node takes any RaetError as a refusal all the same."""
        ...


@dataclass(frozen=True, slots=True)
class PeerLost:
    """A link stayed silent past the keepalive timeout."""

    name: str
    """The link's name."""
    silent_for: float
    """Seconds since it was last heard."""


@dataclass(frozen=True, slots=True)
class PeerAlive:
    """A link that was lost was heard again."""

    name: str
    """The link's name."""


@dataclass(frozen=True, slots=True)
class EventGap:
    """Events from one publisher were missed (its sequence numbers jumped)."""

    publisher: str
    """The publisher's userid."""
    missed: int
    """How many sequence numbers were skipped."""


BusEvent = PeerLost | PeerAlive | EventGap


@dataclass(slots=True)
class BusConfig:
    """Timers and limits of a bus node."""

    request_timeout: float = 60.0
    """Seconds before ``on_reply`` gets ETIMEDOUT."""
    retry_interval: float = 5.0
    """Seconds between resends of a request still without a response."""
    keepalive_interval: float = 5.0
    """Seconds between keepalives to every link."""
    keepalive_timeout: float = 15.0
    """Seconds of silence before a link is reported lost."""
    max_hops: int = MAX_HOPS
    """Links a message may cross (loops): a request that would cross more fails with
    EPROTO, an event or response is dropped (``BusStats.too_many_hops``); a message
    claiming more (``hops``, a request's ``route``) is malformed."""
    dedup_window: int = 4096
    """Request (and event) numbers remembered per sender and run: a bitmap of this many
    bits (raetlike.dedup.BitWindow), about ``dedup_window`` / 8 + 350 bytes each."""
    max_senders: int = 4096
    """Senders (a node's name and its run, see ``BusMessage.epoch``) whose request and
    event numbers are remembered; the least recently heard one is forgotten first."""
    answered_memory: int = 1024
    """Responses kept to answer resent requests again without running the handler."""
    answered_bytes: int = 16 * 1024 * 1024
    """What those responses may hold in all (about: their payloads' objects, topics and
    error texts); the oldest go first past it, and one holding more than a sixteenth of
    it (1 MiB) is not kept (``BusStats.answers_not_kept``): a request resent for it
    runs no handler and gets no answer again (its first answer is on its way)."""
    route_delay: float = 0.5
    """Seconds a node waits, after the names below it change (a link added or removed, a
    relay's names), before its upstream hears of them in an early keepalive."""
    max_forwarded: int = 16_384
    """Requests relayed and not yet answered whose way back a node keeps (the link each
    went out on and the one it came from), each for ``request_timeout``; past it the
    oldest is forgotten (counted in ``BusStats.forwarded_forgotten``; its response then
    counts as stray).  A response is taken only from the link its request went out on
    and routed back by this table.  An entry costs about 400 bytes, at most about
    5 KB (a route of ``max_hops`` names of 200 bytes): 82 MB in all at most."""
    max_forwarded_per_link: int = 16_384 // 8
    """Of those, the most that came from one link below (links toward a main, trusted,
    are not limited): a request from a link at its quota is answered ENOBUFS (105) and
    not relayed (``BusStats.forwarded_refused``), so one peer's flood cannot push the
    other links' entries out of ``max_forwarded`` (their answers became stray)."""
    max_subscriptions: int = 1024
    """Topic prefixes a node keeps for each link below (what its keepalives subscribe to,
    for itself and the nodes below it); those past it are refused and counted
    (``BusStats.subscriptions_refused``).  A node whose tree wants more distinct prefixes
    advertises upstream a coarser set of at most this many (docs/bus.md "Events")."""
    max_topic_length: int = 255
    """Longest topic prefix a node keeps from a link's keepalive (longer ones are refused
    and counted in ``BusStats.subscriptions_refused``).  A link's subscriptions cost at
    most ``max_subscriptions`` x (``max_topic_length`` + ~120) bytes (~380 KB), and an
    event is matched in at most ``max_topic_length`` + 1 look-ups, however many."""
    max_events: int = 1024
    """Node events (PeerLost, PeerAlive, EventGap) waiting for ``next_event``; past it
    the oldest is dropped (``BusStats.events_dropped``): a node nobody drains keeps no
    more, however many gaps its peers' events show."""
    max_routes: int = 1_000_000
    """Node names below trusted links (relays) that a node routes requests to, learnt from
    their keepalives (``BusMessage.below``); names past it are refused and counted
    (``BusStats.routes_refused``).  A route costs about 150 bytes."""

    def __setattr__(self, name: str, value: object) -> None:
        # a keepalive interval of 0 divided by zero in the keepalive rounds, below 0 it
        # looped forever; refused when set, as RoadConfig's fields are.  A timeout or the
        # retry interval may be inf: never (a durable estate's bus never resends itself)
        if name in _SECONDS and not (
                isinstance(value, int | float) and not isinstance(value, bool)
                and (value >= 0 if name == "route_delay" else value > 0)
                and (math.isfinite(value) or name not in _FINITE)):
            least = "of at least 0" if name == "route_delay" else "above 0"
            kind = "a finite number" if name in _FINITE else "a number (inf: never)"
            raise ValueError(f"BusConfig.{name} must be {kind} of seconds {least}, "
                             f"not {value!r}")
        object.__setattr__(self, name, value)


_SECONDS = frozenset({"request_timeout", "retry_interval", "keepalive_interval",
                      "keepalive_timeout", "route_delay"})
_FINITE = frozenset({"keepalive_interval", "route_delay"})


@dataclass(slots=True)
class BusStats:
    """Counters of a bus node."""

    sent: int = 0
    received: int = 0
    handled: int = 0
    duplicates: int = 0
    retries: int = 0
    stray_responses: int = 0
    malformed: int = 0
    unknown_link: int = 0
    undeliverable: int = 0
    events_delivered: int = 0
    keepalives_sent: int = 0
    restamped: int = 0
    routes_refused: int = 0
    """Names below a link not taken as routes: from an untrusted link, a name that is our
    own, a direct link's or another link's route, or past ``max_routes``."""
    too_many_hops: int = 0
    """Requests failed (EPROTO), events and responses dropped past ``max_hops``: a loop of
    relays."""
    subscriptions_refused: int = 0
    """Topic prefixes of keepalives not kept: past ``BusConfig.max_subscriptions`` for the
    link, or longer than ``BusConfig.max_topic_length``."""
    answers_not_kept: int = 0
    """Responses too large to keep for resent requests (``BusConfig.answered_bytes``)."""
    events_dropped: int = 0
    """Node events dropped unread past ``BusConfig.max_events``."""
    forwarded_forgotten: int = 0
    """Relayed requests whose way back was forgotten before their time, past
    ``BusConfig.max_forwarded``."""
    forwarded_refused: int = 0
    """Requests not relayed (answered ENOBUFS) because the link they came from had
    ``BusConfig.max_forwarded_per_link`` relayed requests unanswered."""

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

