"""Road: a sans-IO UDP stack of estates (see docs/road.md and docs/design.md).

>>> from road import LocalEstate, RoadConfig, RoadStack, events
"""

from __future__ import annotations

import raetlike  # noqa: F401 - first: it chooses the compiled or pure build (raetlike._native)
from road import events
from road.config import LocalEstate, RoadConfig
from road.stack import RoadStack
from road.stats import Drop, RoadStats

__all__ = ["Drop", "LocalEstate", "RoadConfig", "RoadStack", "RoadStats", "events"]
