"""PySpark analysis of delivery journals: traffic, latency, resends and a delivery audit.

See docs/pipeline.md.  Using this package's names imports PySpark (the ``spark`` extra);
nothing else in raetlike does.  They are imported when first used (PEP 562), so a Spark
task's worker that imports only :mod:`raetlike.pipeline._arrow` does not pay for PySpark's
SQL modules and matplotlib (half a second).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raetlike.pipeline._job import (
        DEFAULT_INTERVAL,
        PipelineOptions,
        PipelineResult,
        follow_journals,
        run_pipeline,
    )
    from raetlike.pipeline._session import DEFAULT_MASTER, spark_session
    from raetlike.pipeline._tables import TABLES

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MASTER",
    "TABLES",
    "PipelineOptions",
    "PipelineResult",
    "follow_journals",
    "run_pipeline",
    "spark_session",
]

_HOMES = {"DEFAULT_INTERVAL": "_job", "PipelineOptions": "_job", "PipelineResult": "_job",
          "follow_journals": "_job", "run_pipeline": "_job", "DEFAULT_MASTER": "_session",
          "spark_session": "_session", "TABLES": "_tables"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
