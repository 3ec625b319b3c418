"""Routed channels: bus links and SP channels to a yard on some estate, through the manors."""

from __future__ import annotations

from raetlike import aio
from raetlike.demo._errors import DemoError
from raetlike.manor import Route, Triple, with_route
from raetlike.sp import Payload

__all__ = ["RoutedChannel", "channel_name"]


class RoutedChannel:
    """A yard on some estate, reached through this lane's manor: an SP channel and bus link.

    ``send`` puts the payload into a routed message (``route.dst`` is the far
    yard) and gives it to the manor (the main yard ``main`` of this lane).
    """

    __slots__ = ("far", "priority", "yard")

    def __init__(self, yard: aio.Yard, far: Triple) -> None:
        self.yard = yard
        self.far = far
        self.priority = 0

    @property
    def name(self) -> str:
        """``estate/yard``: the far yard's name on the bus and on SP endpoints."""
        return channel_name(self.far)

    @property
    def alive(self) -> bool:
        """While our own yard is open (reachability shows only when the manor answers)."""
        return not self.yard.stack.closed

    @property
    def userid(self) -> str:
        """The far yard, as the manors stamped it."""
        return self.name

    @property
    def role(self) -> str:
        """The far yard's name."""
        return self.name

    def send(self, payload: Payload) -> bool:
        """Route ``payload`` (a mapping) to the far yard through our manor."""
        if not isinstance(payload, dict):
            raise DemoError("a routed channel carries mapping payloads only")
        self.yard.transmit(with_route(payload, Route(Triple(), self.far)), to="main")
        return True


def channel_name(triple: Triple) -> str:
    """``estate/yard`` of a route end."""
    return f"{triple.estate}/{triple.yard}"
