"""ioflo houses: road and lane stacks driven by FloScript plans (see docs/flo.md).

Importing this package makes ioflo 2.0.3 importable on Python 3.11 (see
:mod:`raetlike.flo._compat`) and registers the deeds, so a plan can say
``do raetlike road stack service``.  Run a plan with :func:`run_plan` or
``raetlike flo PLAN.flo``; with ioflo's own command line, pass
``--behaviors raetlike.flo``.
"""

from __future__ import annotations

from raetlike.flo import _compat  # noqa: F401 - first: every submodule imports ioflo after it
from raetlike.flo._deed import RaetlikeDeed
from raetlike.flo.lane import (
    LANE_INODE,
    RaetlikeLaneStackCloser,
    RaetlikeLaneStackPrinter,
    RaetlikeLaneStackSender,
    RaetlikeLaneStackService,
    RaetlikeLaneStackSetup,
)
from raetlike.flo.road import (
    ROAD_INODE,
    RaetlikeRoadStackAllower,
    RaetlikeRoadStackCloser,
    RaetlikeRoadStackJoiner,
    RaetlikeRoadStackMains,
    RaetlikeRoadStackPrinter,
    RaetlikeRoadStackSender,
    RaetlikeRoadStackService,
    RaetlikeRoadStackSetup,
)
from raetlike.flo.runner import DEFAULT_PERIOD, PlanError, PlanOutcome, run_plan

__all__ = [
    "DEFAULT_PERIOD",
    "LANE_INODE",
    "ROAD_INODE",
    "PlanError",
    "PlanOutcome",
    "RaetlikeDeed",
    "RaetlikeLaneStackCloser",
    "RaetlikeLaneStackPrinter",
    "RaetlikeLaneStackSender",
    "RaetlikeLaneStackService",
    "RaetlikeLaneStackSetup",
    "RaetlikeRoadStackAllower",
    "RaetlikeRoadStackCloser",
    "RaetlikeRoadStackJoiner",
    "RaetlikeRoadStackMains",
    "RaetlikeRoadStackPrinter",
    "RaetlikeRoadStackSender",
    "RaetlikeRoadStackService",
    "RaetlikeRoadStackSetup",
    "run_plan",
]
