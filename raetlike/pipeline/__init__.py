"""PySpark analysis of delivery journals: traffic, latency, resends and a delivery audit.

See docs/pipeline.md.  Importing this package imports PySpark (the ``spark``
extra); nothing else in raetlike does.
"""

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
