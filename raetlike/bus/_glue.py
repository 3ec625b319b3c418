"""Glue between a stack and a bus node: stack events in, the node's timers out.

:class:`BusAttachment` rides on a :class:`raetlike.channels.Hosted` stack:
it takes the bus messages among the stack's MessageReceived events, and the
undelivered ones (road MessageExpired, lane YardUnreachable), and leaves every
other event to the driver.
"""

from __future__ import annotations

from lane import events as lane_events
from raetlike.bus._message import is_bus_body
from raetlike.bus._node import BusNode
from raetlike.channels import received_from
from road import events as road_events

__all__ = ["BusAttachment"]


class BusAttachment:
    """Feeds a :class:`BusNode` from the events of the stack it is hosted on."""

    __slots__ = ("node",)

    def __init__(self, node: BusNode) -> None:
        """Attach ``node``."""
        self.node = node

    def handle_event(self, event: object, now: float) -> bool:
        """Take bus messages (received or undelivered) from the node's links."""
        received = received_from(event)
        if received is not None:
            peer, body = received
            if peer in self.node.links and is_bus_body(body):
                self.node.receive(peer, body, now)
                return True
            return False
        if isinstance(event, road_events.MessageExpired) and is_bus_body(event.body):
            self.node.undeliverable(event.remote, event.body, now)
            return True
        if isinstance(event, lane_events.YardUnreachable):
            bus = [message for message in event.messages if is_bus_body(message)]
            for message in bus:
                self.node.undeliverable(event.yard, message, now)
            return len(bus) == len(event.messages)
        return False

    def get_timer(self) -> float | None:
        """The node's next deadline."""
        return self.node.get_timer()

    def handle_timer(self, now: float) -> None:
        """Let the node's timers fire."""
        self.node.handle_timer(now)

    def pump(self, now: float) -> int:  # noqa: ARG002
        """The node sends through its links as it goes: nothing waits here."""
        return 0
