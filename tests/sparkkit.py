"""One local Spark session for the whole test run, tuned for speed (see SPARK.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

from raetlike.pipeline import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test run's SparkSession (local[2])."""
    session = spark_session("local[2]", app_name="raetlike-tests", short_jobs=True)
    yield session
    session.stop()
