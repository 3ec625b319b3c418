"""Routes: the ``(estate, yard, share)`` triples RAET apps put in a message body.

A routed message is a mapping with a ``route`` entry::

    {"route": {"src": [estate, yard, share], "dst": [estate, yard, share]}, ...}

as RAET's tests and salt's manor write it.  An empty part (``None`` or ``""``)
takes a default where the message is routed: the local estate, the manor's
(main) yard, no share.  Pure functions, no stacks here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from raetlike.errors import RaetError
from raetlike.names import safe_name

__all__ = [
    "ROUTE",
    "ERROR",
    "Problem",
    "RouteError",
    "Triple",
    "Route",
    "parse_route",
    "with_route",
    "error_body",
    "is_error",
]

ROUTE = "route"
"""The body key holding the route."""
ERROR = "error"
"""The body key of an error message the manor sends back."""


class Problem(StrEnum):
    """Why a message could not be routed (the ``error.reason`` of the error body)."""

    BAD_ROUTE = "bad route"
    UNKNOWN_ESTATE = "unknown estate"
    UNKNOWN_YARD = "unknown yard"
    BUSY = "busy"
    UNDELIVERABLE = "undeliverable"


class RouteError(RaetError, ValueError):
    """A ``route`` entry that is not two triples of names."""


def _part(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    raise RouteError(f"a route part must be a string or null, not {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Triple:
    """One end of a route."""

    estate: str | None = None
    """The estate's name; None: the estate where the message is being routed."""
    yard: str | None = None
    """The yard's name; None: that estate's manor (main) yard."""
    share: str | None = None
    """A name inside the yard (a queue, a handler); passed along untouched."""

    @classmethod
    def parse(cls, value: Any) -> Triple:
        """A triple from its wire form (a list of three); RouteError otherwise."""
        if not isinstance(value, list | tuple) or len(value) != 3:
            raise RouteError(f"a route end must be a list of 3, not {value!r:.60}")
        return cls(_part(value[0]), _part(value[1]), _part(value[2]))

    def to_wire(self) -> list[str | None]:
        """The wire form: ``[estate, yard, share]``."""
        return [self.estate, self.yard, self.share]

    def __str__(self) -> str:
        """``estate/yard/share`` with ``-`` for empty parts (for logs and error details).

        The parts are a sender's claim (a share always is, a yard from the
        road too), so each goes through :func:`~raetlike.names.safe_name`: one
        with a line break, an escape sequence or any other unprintable
        character shows quoted with escapes, a long one cut short.
        """
        return "/".join("-" if not part else safe_name(part)
                        for part in (self.estate, self.yard, self.share))


@dataclass(frozen=True, slots=True)
class Route:
    """Where a message comes from and goes to."""

    source: Triple
    """``src``."""
    destination: Triple
    """``dst``."""

    def to_wire(self) -> dict[str, list[str | None]]:
        """The wire form: ``{"src": [...], "dst": [...]}``."""
        return {"src": self.source.to_wire(), "dst": self.destination.to_wire()}

    def reversed(self) -> Route:
        """The route of a reply."""
        return Route(self.destination, self.source)


def parse_route(body: Any) -> Route | None:
    """The route of ``body``; None when it carries none; RouteError when it is malformed."""
    if not isinstance(body, Mapping) or ROUTE not in body:
        return None
    route = body[ROUTE]
    if not isinstance(route, Mapping):
        raise RouteError(f"route must be a mapping, not {type(route).__name__}")
    if "src" not in route or "dst" not in route:
        raise RouteError("route needs both src and dst")
    return Route(Triple.parse(route["src"]), Triple.parse(route["dst"]))


def with_route(body: Mapping[str, Any], route: Route) -> dict[str, Any]:
    """A copy of ``body`` with its route replaced by ``route``."""
    copy = dict(body)
    copy[ROUTE] = route.to_wire()
    return copy


def is_error(body: Any) -> bool:
    """Whether ``body`` is an error message (never answered with another error)."""
    return isinstance(body, Mapping) and isinstance(body.get(ERROR), Mapping)


def error_body(route: Route, problem: Problem, detail: str,
               original: Any = None) -> dict[str, Any]:
    """An error message travelling on ``route``, naming ``problem``.

    ``original`` is the route of the message that failed, in its wire form as
    received, so the sender can tell which of its messages it was.
    """
    return {
        ROUTE: route.to_wire(),
        ERROR: {"reason": str(problem), "detail": detail, "route": original},
    }
