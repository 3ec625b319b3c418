"""Lane: yards on UNIX-domain datagram sockets (see docs/lane.md)."""

from __future__ import annotations

import raetlike  # noqa: F401 - first: it chooses the compiled or pure build (raetlike._native)
from lane import events
from lane.stack import BUSY_ERRORS, LaneConfig, LaneStack
from lane.stats import Drop, LaneStats
from lane.yard import LocalYard, RemoteYard, new_yard_session, yard_path

__all__ = [
    "LaneStack",
    "LaneConfig",
    "LocalYard",
    "RemoteYard",
    "LaneStats",
    "Drop",
    "BUSY_ERRORS",
    "events",
    "new_yard_session",
    "yard_path",
]
