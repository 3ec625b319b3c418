"""Road: a sans-IO UDP stack of estates (see docs/road.md and docs/design.md).

>>> from road import LocalEstate, RoadConfig, RoadStack, events
"""

from __future__ import annotations

from road import _build

_build.choose()  # before any compiled module is imported (docs/performance.md)

from road import events  # noqa: E402
from road.config import LocalEstate, RoadConfig  # noqa: E402
from road.stack import RoadStack  # noqa: E402
from road.stats import Drop, RoadStats  # noqa: E402

__all__ = ["Drop", "LocalEstate", "RoadConfig", "RoadStack", "RoadStats", "events"]
