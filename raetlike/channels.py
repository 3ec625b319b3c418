"""Stacks as messaging channels: a road remote or a lane yard as an SP channel or a bus link.

- :class:`RoadChannel` / :class:`LaneChannel` wrap one peer of a stack.  They
  satisfy :class:`raetlike.sp.Channel` (``name``, ``priority``, ``alive``,
  ``send``) and the bus's link protocol (the same plus ``userid`` and
  ``role``, the peer's authenticated identity).
- :class:`Hosted` is a stack with *attachments*: itself a sans-IO stack (the
  same five calls), it hands every stack event to its attachments first
  (an SP endpoint, a device, a bus node) and lets them send through the stack
  before the datagrams go out.  Events no attachment takes come out of
  :meth:`Hosted.next_event`, so a driver or the simulated link sees them.
- :class:`SpLink` attaches an SP endpoint; :class:`DevicePump` a device.

In RAET mode (``Framing.MAPPING``) an SP payload is the mapping
``{"sp": [tags], "body": body}``; a message with exactly those two keys from a
peer that is one of an :class:`SpLink`'s channels goes to its endpoint.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from lane import events as lane_events
from lane.stack import LaneStack
from raetlike.errors import BackpressureError, LocalProtocolError
from raetlike.sp import Channel, Device, Payload, Rep, Req, Respondent, Surveyor, flush
from raetlike.sp._framing import BODY_KEY
from raetlike.wire.tags import MAPPING_KEY
from road import events as road_events
from road.config import LocalEstate
from road.remote import Remote

__all__ = [
    "Road",
    "RoadChannel",
    "LaneChannel",
    "Attachment",
    "Hosted",
    "SpLink",
    "DevicePump",
    "is_sp_payload",
    "received_from",
]

logger = logging.getLogger(__name__)

_SETTLE_ROUNDS = 10_000
"""Most event/pump rounds one settle runs (a guard against a livelock between attachments)."""

Endpoint = Req | Rep | Surveyor | Respondent
"""Any SP endpoint."""


def is_sp_payload(body: object) -> bool:
    """True for an SP payload in RAET mode: a mapping with exactly ``sp`` and ``body``."""
    return isinstance(body, Mapping) and set(body) == {MAPPING_KEY, BODY_KEY}


def received_from(event: object) -> tuple[str, Any] | None:
    """``(peer name, body)`` of a road or lane MessageReceived event, else None."""
    if isinstance(event, road_events.MessageReceived):
        return event.remote, event.body
    if isinstance(event, lane_events.MessageReceived):
        return event.yard, event.body
    return None


class Road(Protocol):
    """What a channel needs of a road: a :class:`RoadStack`, or a
    :class:`raetlike.durable.DurableRoad` wrapping one."""

    @property
    def name(self) -> str:
        """The local estate's name."""
        ...

    @property
    def names(self) -> dict[str, Remote]:
        """The remotes by name."""
        ...

    @property
    def local(self) -> LocalEstate:
        """The local estate."""
        ...

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None, now: float | None = None) -> int:
        """Queue a message for the remote ``to``."""
        ...

    def next_event(self) -> Any:
        """The next event, or None."""
        ...


_CONTENT_ERRORS = (LocalProtocolError, TypeError, ValueError, OverflowError, RecursionError,
                   UnicodeError)
"""What a stack's serializer raises on a payload it cannot carry (not serializable, an int
out of range, nested too deep, a lone surrogate): a channel counts it as unsendable."""


class RoadChannel:
    """One remote estate of a road (RoadStack or DurableRoad) as a channel (SP) or link (bus)."""

    __slots__ = ("priority", "remote_name", "stack", "ttl", "unsendable")

    def __init__(self, stack: Road, remote_name: str, *, priority: int = 0,
                 ttl: float | None = None) -> None:
        """The remote ``remote_name`` of ``stack``; ``ttl`` bounds each message's life."""
        self.stack = stack
        self.remote_name = remote_name
        self.priority = priority
        self.ttl = ttl
        self.unsendable = 0
        """Messages the stack would not take (closed, or not serializable): dropped."""

    def __repr__(self) -> str:
        return f"RoadChannel({self.stack.name}->{self.remote_name})"

    @property
    def name(self) -> str:
        """The remote's name."""
        return self.remote_name

    @property
    def alive(self) -> bool:
        """False when the remote is unknown or known to be dead."""
        remote = self.stack.names.get(self.remote_name)
        return remote is not None and remote.alive is not False and not remote.reaped

    @property
    def userid(self) -> str:
        """The authenticated name of the remote (from its join)."""
        return self.remote_name

    @property
    def role(self) -> str:
        """The remote's role, as its join and the keep established it."""
        remote = self.stack.names.get(self.remote_name)
        return "" if remote is None else remote.role

    def send(self, payload: Payload) -> bool:
        """Transmit ``payload``; False for an unknown remote, a closed stack or a message
        the road will not take (counted in ``unsendable``); BackpressureError when full.

        Never raises on what the payload holds: a bus or SP payload may come from a
        hostile peer, and an exception here would climb out of the stack's loop."""
        if self.remote_name not in self.stack.names:
            return False
        if isinstance(payload, Mapping):
            message: Mapping[str, Any] | bytes = payload
        elif isinstance(payload, bytes | bytearray | memoryview):
            message = bytes(payload)
        else:
            raise LocalProtocolError(f"cannot carry a {type(payload).__name__} on the road")
        try:
            self.stack.transmit(message, to=self.remote_name, ttl=self.ttl)
        except _CONTENT_ERRORS as error:  # (a lone surrogate raised UnicodeEncodeError
            # out of a durable road's store: the estate ended)
            self.unsendable += 1
            logger.debug("%r: cannot send: %s", self, error)
            return False
        return True


class LaneChannel:
    """One yard of a LaneStack as a channel (SP, mapping payloads only) or link (bus)."""

    __slots__ = ("priority", "stack", "unsendable", "yard_name")

    def __init__(self, stack: LaneStack, yard_name: str, *, priority: int = 0) -> None:
        """The yard ``yard_name`` of ``stack``."""
        self.stack = stack
        self.yard_name = yard_name
        self.priority = priority
        self.unsendable = 0
        """Messages the lane would not take (closed, not serializable, too large): dropped."""

    def __repr__(self) -> str:
        return f"LaneChannel({self.stack.name}->{self.yard_name})"

    @property
    def name(self) -> str:
        """The yard's name."""
        return self.yard_name

    @property
    def alive(self) -> bool:
        """False while the stack is closed (a lane yard's reachability shows only on sending)."""
        return not self.stack.closed

    @property
    def userid(self) -> str:
        """The yard's name: on a lane, socket permissions are the authentication."""
        return self.yard_name

    @property
    def role(self) -> str:
        """A yard's role is its name."""
        return self.yard_name

    def send(self, payload: Payload) -> bool:
        """Transmit ``payload`` (a mapping) to the yard; False for a closed stack or a
        message the lane cannot carry (not serializable as its pages are, e.g. bytes on a
        JSON lane, or too large: counted in ``unsendable``); BackpressureError when full.

        Never raises on what the payload holds: a bus or SP payload may come from a
        hostile peer (a msgpack road delivers bytes), and an exception here climbed out
        of the manor's loop and ended the estate."""
        if not isinstance(payload, Mapping):
            raise LocalProtocolError("a lane carries mapping payloads only (Framing.MAPPING)")
        try:
            self.stack.transmit(payload, to=self.yard_name)
        except _CONTENT_ERRORS as error:
            self.unsendable += 1
            logger.debug("%r: cannot send: %s", self, error)
            return False
        return True


class Attachment(Protocol):
    """Something riding on a stack: sees its events first and sends through it."""

    def handle_event(self, event: object, now: float) -> bool:
        """Take ``event`` if it is for us; True when taken (it goes no further)."""
        ...

    def get_timer(self) -> float | None:
        """Our next deadline, or None."""
        ...

    def handle_timer(self, now: float) -> None:
        """Let due timers fire."""
        ...

    def pump(self, now: float) -> int:
        """Send what we have queued and act on what we hold; returns how much work was done."""
        ...


AddressT = TypeVar("AddressT")


class HostStack(Protocol[AddressT]):
    """The sans-IO calls :class:`Hosted` needs of a road or lane stack."""

    def receive_datagram(self, data: bytes, source: AddressT, now: float) -> None:
        """Feed one datagram in."""
        ...

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, AddressT]]:
        """Take what goes on the wire."""
        ...

    def get_timer(self) -> float | None:
        """The next deadline."""
        ...

    def handle_timer(self, now: float) -> None:
        """Let timers fire."""
        ...

    def next_event(self) -> Any:
        """The next event, or None."""
        ...


class Hosted(Generic[AddressT]):
    """A stack plus attachments, driven exactly like the stack alone."""

    __slots__ = ("_events", "attachments", "stack")

    def __init__(self, stack: HostStack[AddressT], attachments: Iterable[Attachment] = ()) -> None:
        """Host ``attachments`` on ``stack``; they see its events in the order given."""
        self.stack = stack
        self.attachments = list(attachments)
        self._events: deque[Any] = deque()

    def attach(self, attachment: Attachment) -> None:
        """Add an attachment (last in line for events)."""
        self.attachments.append(attachment)

    def receive_datagram(self, data: bytes, source: AddressT, now: float) -> None:
        """Feed the stack, then let the attachments act on what it reported."""
        self.stack.receive_datagram(data, source, now)
        self.settle(now)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, AddressT]]:
        """Settle the attachments, then take the stack's datagrams."""
        self.settle(now)
        return self.stack.datagrams_to_send(now)

    def get_timer(self) -> float | None:
        """The earliest deadline of the stack and the attachments."""
        timers = [self.stack.get_timer(), *(a.get_timer() for a in self.attachments)]
        return min((t for t in timers if t is not None), default=None)

    def handle_timer(self, now: float) -> None:
        """Fire what is due in the stack and in each attachment."""
        timer = self.stack.get_timer()
        if timer is not None and timer <= now:
            self.stack.handle_timer(now)
        for attachment in self.attachments:
            timer = attachment.get_timer()
            if timer is not None and timer <= now:
                attachment.handle_timer(now)
        self.settle(now)

    def next_event(self) -> Any:
        """The next stack event no attachment took, or None."""
        self.settle(self._now())
        return self._events.popleft() if self._events else None

    def close(self, now: float) -> None:
        """Close the stack (what it gives back comes out of :meth:`next_event`)."""
        close = getattr(self.stack, "close", None)
        if close is not None:
            close(now=now)

    def _now(self) -> float:
        now = getattr(self.stack, "now", 0.0)
        return float(now)

    def settle(self, now: float) -> None:
        """Hand stack events to the attachments and pump them until nothing moves."""
        for _ in range(_SETTLE_ROUNDS):
            work = 0
            while (event := self.stack.next_event()) is not None:
                work += 1
                if not any(a.handle_event(event, now) for a in self.attachments):
                    self._events.append(event)
            work += sum(attachment.pump(now) for attachment in self.attachments)
            if not work:
                return
        logger.warning("attachments on %r did not settle", self.stack)


class SpLink:
    """Attaches an SP endpoint to a stack through channels of that stack."""

    __slots__ = ("_channels", "endpoint", "on_event")

    def __init__(self, endpoint: Endpoint, channels: Sequence[Channel] = (),
                 on_event: Callable[[Any], None] | None = None) -> None:
        """Feed ``endpoint`` from ``channels``; ``on_event`` (if given) takes its events.

        Leave ``on_event`` out for a device's endpoints: the device takes them.
        """
        self.endpoint = endpoint
        self.on_event = on_event
        self._channels: dict[str, Channel] = {}
        for channel in channels:
            self.add_channel(channel)

    def add_channel(self, channel: Channel) -> None:
        """Give the endpoint one more channel."""
        if channel.name in self._channels:
            raise LocalProtocolError(f"channel {channel.name!r} is already linked")
        self._channels[channel.name] = channel
        self.endpoint.add_channel(channel)

    def remove_channel(self, name: str, now: float) -> None:
        """Take the channel ``name`` away from the endpoint."""
        channel = self._channels.pop(name, None)
        if channel is None:
            return
        if isinstance(self.endpoint, Req):
            self.endpoint.remove_channel(channel, now)
        else:
            self.endpoint.remove_channel(channel)

    def handle_event(self, event: object, now: float) -> bool:
        """Take a message in SP form from one of our channels' peers."""
        received = received_from(event)
        if received is None:
            return False
        peer, body = received
        channel = self._channels.get(peer)
        if channel is None or not is_sp_payload(body):
            return False
        self.endpoint.receive(channel, body, now)
        return True

    def get_timer(self) -> float | None:
        """The endpoint's next resend or deadline (REQ and SURVEYOR have timers)."""
        if isinstance(self.endpoint, Req | Surveyor):
            return self.endpoint.get_timer()
        return None

    def handle_timer(self, now: float) -> None:
        """Let the endpoint's timers fire."""
        if isinstance(self.endpoint, Req | Surveyor):
            self.endpoint.handle_timer(now)

    def pump(self, now: float) -> int:
        """Hand events to ``on_event`` and send what the endpoint queued."""
        work = 0
        if self.on_event is not None:
            while (event := self.endpoint.next_event()) is not None:
                self.on_event(event)
                work += 1
        try:
            work += flush(self.endpoint, now)
        except BackpressureError:  # pragma: no cover - flush turns it into refused()
            logger.debug("backpressure while flushing %s", self.endpoint.name)
        return work


class DevicePump:
    """Attaches a device: moves requests and replies between its two endpoints."""

    __slots__ = ("device",)

    def __init__(self, device: Device) -> None:
        """Pump ``device`` whenever its stack settles."""
        self.device = device

    def handle_event(self, event: object, now: float) -> bool:  # noqa: ARG002
        """A device takes no stack events itself (its endpoints' links do)."""
        return False

    def get_timer(self) -> float | None:
        """A device has no timers."""
        return None

    def handle_timer(self, now: float) -> None:
        """Nothing to fire."""

    def pump(self, now: float) -> int:
        """Move what waits across the device."""
        return self.device.pump(now)
