"""``raetlike demo``: four manors, seven yards, every kind of traffic, a table.

On loopback, with temporary keeps, socket directories and free ports:

- estate processes (``python -m raetlike estate ... --lane ...``): ``main`` (a
  manor with its main yard, ``--auto never``, ``--echo``) and three minions,
  each a manor of its own lane;
- yard processes (``python -m raetlike yard echo --echo``), one per minion lane;
- in this process, on asyncio (:mod:`raetlike.aio`): the yard ``hub`` on main's
  lane and the yard ``app`` on each minion's lane.

The minions join main; main's keep leaves them pending until the demo accepts
them through the keep (``minion3`` visibly later).  Then the ``app`` yards send
routed messages yard to yard across estates (to the echo yards of the other
minions and to main's manor, answered with the route reversed), publish and
receive bus events, call each other's bus services (through the hub), and the
hub surveys the apps (SP SURVEYOR/RESPONDENT) — bus and SP both travel over
:class:`RoutedChannel`, a channel that is a ``(estate, yard)`` reached through
the manors.  A live line shows progress on a terminal; a table ends the run.

Every estate journals its deliveries (docs/journal.md) under the demo's
output directory, which outlives the demo; at the end the Spark pipeline
(docs/pipeline.md) runs over those journals and the demo prints where its
report is.  Routed messages carry ``_sent`` (for latency); those between the
apps and main's manor also carry ``_seq``, one numbered stream per direction
(source shares), for the delivery audit.
"""

from __future__ import annotations

from raetlike.demo._errors import DemoError
from raetlike.demo._figures import DemoFigures
from raetlike.demo._pipeline import PipelineFigures
from raetlike.demo._routed import RoutedChannel
from raetlike.demo._run import run_demo

__all__ = ["DemoError", "DemoFigures", "PipelineFigures", "RoutedChannel", "run_demo"]
