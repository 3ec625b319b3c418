"""The bus: Flux CMB1-style requests, responses, events and keepalives over the stacks.

A :class:`BusNode` per estate (or yard) with links to its neighbours
(``raetlike.channels.RoadChannel`` / ``LaneChannel``), one of them upstream
toward main.  Handlers are registered per topic prefix (``serve("kvs.",
handler)``; ``register_service("kvs", handler)`` is the same), requests sent
with ``send(destination, Call(topic, payload), on_reply)`` (``on_reply`` runs
once, with the response or an error such as ETIMEDOUT), events published
through main to subscribers by topic prefix.  Sans-IO: host the node on its stack with
``Hosted(stack, [BusAttachment(node)])``.  See docs/bus.md.
"""

from __future__ import annotations

from raetlike.bus._api import (
    BusConfig,
    BusError,
    BusEvent,
    BusStats,
    Call,
    EventGap,
    Handler,
    Link,
    OnEvent,
    OnReply,
    PeerAlive,
    PeerLost,
    Reply,
    Request,
    Service,
)
from raetlike.bus._glue import BusAttachment
from raetlike.bus._message import (
    ANY,
    BUS_KEY,
    UPSTREAM,
    BusMessage,
    Errno,
    MessageType,
    Rolemask,
    decode,
    encode,
    follows_failover,
    is_bus_body,
)
from raetlike.bus._node import BusNode

__all__ = [
    # node
    "BusNode",
    "BusAttachment",
    "BusConfig",
    "BusStats",
    "Link",
    # addressing
    "ANY",
    "UPSTREAM",
    # API values
    "Call",
    "Reply",
    "Request",
    "BusError",
    "Handler",
    "Service",
    "OnReply",
    "OnEvent",
    # node events
    "BusEvent",
    "PeerLost",
    "PeerAlive",
    "EventGap",
    # wire
    "BUS_KEY",
    "BusMessage",
    "MessageType",
    "Errno",
    "Rolemask",
    "encode",
    "decode",
    "follows_failover",
    "is_bus_body",
]
