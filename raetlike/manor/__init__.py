"""The manor: an estate's road and its lane's main yard, routing ``(estate, yard, share)``.

See docs/manor.md.
"""

from __future__ import annotations

from raetlike.manor._house import MANOR_YARD, ManorHouse
from raetlike.manor._manor import (
    Delivered,
    Manor,
    ManorEvent,
    ManorStats,
    Undelivered,
    Via,
)
from raetlike.manor._route import (
    Problem,
    Route,
    RouteError,
    Triple,
    error_body,
    is_error,
    parse_route,
    with_route,
)

__all__ = [
    "Manor",
    "ManorHouse",
    "MANOR_YARD",
    "ManorEvent",
    "Delivered",
    "Undelivered",
    "ManorStats",
    "Via",
    "Problem",
    "Route",
    "RouteError",
    "Triple",
    "error_body",
    "is_error",
    "parse_route",
    "with_route",
]
