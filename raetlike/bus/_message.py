"""Bus messages (Flux CMB1 style) and their mapping form on the stacks.

A bus message travels as a stack message body ``{"bus": {...}}``; the inner
keys are short wire names mapped once here to the fields of :class:`BusMessage`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from raetlike.errors import PacketError
from raetlike.names import MAX_NAME_BYTES

__all__ = [
    "MAX_HOPS",
    "BUS_KEY",
    "ANY",
    "UPSTREAM",
    "MessageType",
    "Errno",
    "Rolemask",
    "BusMessage",
    "is_bus_body",
    "follows_failover",
    "encode",
    "decode",
    "carriable",
    "MAX_PAYLOAD_DEPTH",
]

MAX_HOPS = 16
"""Links a bus message may cross (``BusConfig.max_hops``'s default, ``decode``'s)."""

BUS_KEY = "bus"
"""The one key of a stack message body that carries a bus message."""

ANY = "*any*"
"""Destination: the first node from here up toward main that provides the service."""

UPSTREAM = "*upstream*"
"""Destination: the first node above this one (toward main) that provides the service."""


class MessageType(enum.Enum):
    """The four kinds of bus message."""

    REQUEST = "request"
    RESPONSE = "response"
    EVENT = "event"
    KEEPALIVE = "keepalive"


class Errno(enum.IntEnum):
    """Error numbers a response can carry (Linux values, as Flux uses)."""

    OK = 0
    EPERM = 1
    """Operation not permitted: the service requires a role the sender lacks."""
    EIO = 5
    """The handler failed (raised something other than BusError)."""
    EPROTO = 71
    """Protocol error: the request could not be taken (e.g. too many hops)."""
    ENOSYS = 38
    """Function not implemented: no such service or method."""
    ENOBUFS = 105
    """No room: this node's own outbox toward the next hop is full (made locally for a
    request of this node, never sent; a relayed one is answered 113), or a relay keeps
    as many requests from the link this one came from as it may
    (``BusConfig.max_forwarded_per_link``).  Try again later."""
    ETIMEDOUT = 110
    """No response in time (made locally, never sent)."""
    EHOSTUNREACH = 113
    """No route to host: the target node cannot be reached."""


class Rolemask(enum.IntFlag):
    """How much a message's sender is trusted (Flux's role bits)."""

    NONE = 0
    OWNER = 1
    """The local node itself."""
    USER = 2
    """An authenticated remote."""


@dataclass(frozen=True, slots=True)
class BusMessage:
    """One bus message, as a node sees it."""

    type: MessageType
    """Request, response, event or keepalive."""
    topic: str = ""
    """``service.method`` for requests and responses, the event name for events."""
    payload: Any = None
    """The application body (any JSON/msgpack value)."""
    matchtag: int = 0
    """Pairs a response with its request (chosen by the requester)."""
    sequence: int = 0
    """Per-sender number: request numbers for dedup, event numbers for gap detection."""
    epoch: int = 0
    """The sender node's run: random for each start, so a restarted node's numbers,
    which begin at 1 again, are never taken for the old run's (0 from older nodes)."""
    target: str = ANY
    """Requests: ANY, UPSTREAM or a node name."""
    errno: Errno = Errno.OK
    """Responses: 0 or why it failed."""
    error: str = ""
    """Responses: a human-readable error text."""
    route: tuple[str, ...] = ()
    """Requests and responses: the links a request came in on, hop by hop (popped back)."""
    hops: int = 0
    """How many links the message has crossed."""
    userid: str = ""
    """Who sent it, stamped by the receiving node from the authenticated link."""
    role: str = ""
    """The sender's role (from the join and keep), stamped like ``userid``."""
    rolemask: Rolemask = Rolemask.NONE
    """The sender's trust, stamped like ``userid``."""
    subscriptions: tuple[str, ...] = field(default=())
    """Keepalives: the topic prefixes wanted below the sender."""
    below: tuple[str, ...] = field(default=())
    """Keepalives: the node names reachable through the sender (its links below and the
    names they advertised), so requests find their way down a tree of relays."""

    @property
    def service(self) -> str:
        """The part of the topic before the first dot."""
        return self.topic.partition(".")[0]

    @property
    def method(self) -> str:
        """The part of the topic after the first dot."""
        return self.topic.partition(".")[2]

    def stamped(self, userid: str, role: str, rolemask: Rolemask) -> BusMessage:
        """This message with the sender's identity replaced."""
        return replace(self, userid=userid, role=role, rolemask=rolemask)


def is_bus_body(body: object) -> bool:
    """True for a stack message body that carries a bus message."""
    return isinstance(body, Mapping) and set(body) == {BUS_KEY}


def follows_failover(body: object) -> bool:
    """Whether a stack message body moves to the new main when a failover estate's active
    main is lost (raetlike.multimain): requests, events and non-bus messages do; a
    response (its route names the old main's links) and a keepalive do not."""
    if not is_bus_body(body):
        return True
    inner = body[BUS_KEY]  # type: ignore[index]
    kind = inner.get("ty") if isinstance(inner, Mapping) else None
    return kind in (MessageType.REQUEST.value, MessageType.EVENT.value)


def encode(message: BusMessage) -> dict[str, Any]:
    """The stack message body for ``message``."""
    inner: dict[str, Any] = {"ty": message.type.value, "ho": message.hops}
    if message.type is MessageType.KEEPALIVE:
        inner["su"] = list(message.subscriptions)
        if message.below:
            inner["nb"] = list(message.below)
    else:
        inner.update(to=message.topic, pl=message.payload, sq=message.sequence,
                     ui=message.userid, ro=message.role, rm=int(message.rolemask))
        if message.epoch:
            inner["ep"] = message.epoch
    if message.type in (MessageType.REQUEST, MessageType.RESPONSE):
        inner.update(mt=message.matchtag, rt=list(message.route))
    if message.type is MessageType.REQUEST:
        inner["ta"] = message.target
    if message.type is MessageType.RESPONSE:
        inner.update(en=int(message.errno), er=message.error)
    return {BUS_KEY: inner}


_INT_LOW, _INT_HIGH = -(1 << 63), (1 << 64) - 1  # what msgpack carries


MAX_PAYLOAD_DEPTH = 256
"""How deeply a payload received may nest lists and mappings (``carriable``)."""


def _encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: no lone surrogate (a JSON body's ``"\\ud800"``
    decodes to one; msgpack and a JSON lane's writer raise on it)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _keys_carried(mapping: dict[Any, Any]) -> bool:
    return all(type(key) is str and _encodable(key) for key in mapping)


def carriable(value: object) -> bool:
    """Whether every kind of link carries ``value`` (a JSON lane, a msgpack road): a JSON
    value with string keys and 64-bit ints, as JSON and msgpack decode it (exact types:
    no bytes, msgpack ext types, tuples or keys of other types), every string and key
    encodable as UTF-8 (no lone surrogates), nested at most ``MAX_PAYLOAD_DEPTH`` deep
    (JSON encoders recurse)."""
    # a stack of iterators, one per container being walked: memory O(depth), not a
    # tuple per element pushed before it was looked at (16 M nils took 1 GB and 2 s)
    walking: list[Iterator[Any]] = [iter((value,))]
    while walking:
        for item in walking[-1]:
            kind = type(item)
            if kind is str:
                if not _encodable(item):
                    return False
            elif kind is int:
                if not _INT_LOW <= item <= _INT_HIGH:
                    return False
            elif kind is list or kind is dict:
                if len(walking) > MAX_PAYLOAD_DEPTH or (kind is dict and not _keys_carried(item)):
                    return False  # (item is len(walking) - 1 deep)
                walking.append(iter(item.values() if kind is dict else item))
                break  # (walk it, then go on with this one where it stopped)
            elif not (kind is float or kind is bool or item is None):
                return False
        else:
            walking.pop()
    return True


def _get(inner: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = inner.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)) \
            or (isinstance(value, str) and not _encodable(value)):
        raise PacketError("malformed-bus", f"bad {key!r}: {value!r}")
    return value


def decode(body: object, max_hops: int = MAX_HOPS) -> BusMessage:
    """The bus message in a stack message body; PacketError when it is not one.

    A route longer than ``max_hops``, or ``hops`` outside 0 to ``max_hops``, is refused:
    no message crosses more links; so is a name (``target``, ``userid``, ``role``, in
    ``route`` or ``below``) longer than a name may be (``MAX_NAME_BYTES`` bytes of UTF-8),
    and any string that does not encode as UTF-8 (a lone surrogate: no msgpack road or
    durable store carries it, and packing it raised out of the estate).  The payload is
    checked by :func:`carriable`."""
    if not isinstance(body, Mapping) or set(body) != {BUS_KEY}:
        raise PacketError("malformed-bus", "not a bus body")
    inner = body[BUS_KEY]
    if not isinstance(inner, Mapping):
        raise PacketError("malformed-bus", "the bus body is not a mapping")
    try:
        kind = MessageType(inner.get("ty"))
        errno = Errno(_get(inner, "en", int, 0))
        bits = _get(inner, "rm", int, 0)
        if not 0 <= bits <= Rolemask.OWNER | Rolemask.USER:  # (Rolemask(-1) is OWNER|USER)
            raise ValueError(f"rolemask {bits}")
        rolemask = Rolemask(bits)
    except ValueError as error:
        raise PacketError("malformed-bus", str(error)) from error
    hops = _get(inner, "ho", int, 0)
    if not 0 <= hops <= max_hops:  # (a negative count passed every hop limit)
        raise PacketError("malformed-bus", f"{hops} hops")
    route = _get(inner, "rt", list, [])
    subscriptions = _get(inner, "su", list, [])
    below = _get(inner, "nb", list, [])
    if len(route) > max_hops:
        raise PacketError("malformed-bus", f"a route of {len(route)} links")
    if not all(isinstance(hop, str) and _encodable(hop) for hop in route + subscriptions + below):
        raise PacketError("malformed-bus", "route, subscriptions and below hold names")
    target, userid, role = (_get(inner, "ta", str, ANY), _get(inner, "ui", str, ""),
                            _get(inner, "ro", str, ""))
    # names are kept (routes, the way back, dedup keys): no longer than a name may be
    # (in UTF-8 bytes, as raetlike.names counts: 200 characters of 4 bytes held 3.3x
    # what docs/bus.md states for the way-back table)
    if any(len(name) > MAX_NAME_BYTES or (not name.isascii()
                                          and len(name.encode()) > MAX_NAME_BYTES)
           for name in (target, userid, role, *route, *below)):
        raise PacketError("malformed-bus", f"a name longer than {MAX_NAME_BYTES} bytes")
    return BusMessage(
        type=kind,
        topic=_get(inner, "to", str, ""),
        payload=inner.get("pl"),
        matchtag=_get(inner, "mt", int, 0),
        sequence=_get(inner, "sq", int, 0),
        epoch=_get(inner, "ep", int, 0),
        target=target,
        errno=errno,
        error=_get(inner, "er", str, ""),
        route=tuple(route),
        hops=hops,
        userid=userid,
        role=role,
        rolemask=rolemask,
        subscriptions=tuple(subscriptions),
        below=tuple(below),
    )
