"""A SparkSession for the pipeline: local, quiet and small by default; any master on request.

Under ``spark-submit`` the session comes from the submitted configuration
(master, memory, ...) and only settings left unset there get our defaults.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "inheriting", "spark_session"]

_T = TypeVar("_T")

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"

_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

_DEFAULTS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "false",  # tiny shuffles; streaming disables it anyway
    "spark.driver.memory": "2g",  # a million records' conversion and audit, without GC thrash
    # 64 MiB journal segments are read as two splits each, so both cores parse one hour
    "spark.sql.files.maxPartitionBytes": str(32 << 20),
}

_LOCAL_ONLY = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def _log4j2_file(level: str) -> Path:
    text = _LOG4J2.replace("{level}", level)
    path = Path(tempfile.gettempdir()) / f"raetlike-log4j2-{level}-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _without_stderr(builder: SparkSession.Builder) -> SparkSession:
    """Start the session with the JVM's stderr on /dev/null (its banner, the JVM's own
    warnings); ours is back as soon as the JVM has started.  Spark's failures still
    reach the caller, as the exceptions py4j raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def spark_session(master: str | None = None, app_name: str = "raetlike-pipeline", *,
                  short_jobs: bool = False, quiet: bool = False) -> SparkSession:
    """The active session if any, else a new one (``local[*]`` unless a master is configured).

    The driver runs here whatever the master (client mode), and logs through
    our log4j2 settings: warnings and errors, no banner; ``quiet`` leaves only
    errors, and the JVM's own stderr (banner, warnings) is discarded.
    ``short_jobs`` (tests) limits the local driver JVM to its first JIT tier:
    faster for many tiny jobs, slower for big ones.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: its JVM is already up
        SparkContext._ensure_initialized()
    conf = SparkConf()  # with the JVM up, this carries spark-submit's settings
    chosen = master or conf.get("spark.master") or DEFAULT_MASTER
    local = chosen.startswith("local")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(chosen)
    settings = dict(_DEFAULTS)
    level = "error" if quiet else "warn"
    settings["spark.driver.extraJavaOptions"] = (
        f"-Dlog4j2.configurationFile=file:{_log4j2_file(level)}"
        # tests' tiny jobs start faster on the serial collector and the first JIT tier;
        # a million records run faster on the parallel one
        + ((" -XX:+UseSerialGC -XX:TieredStopAtLevel=1" if short_jobs else " -XX:+UseParallelGC")
           if local else ""))
    if local:
        settings.update(_LOCAL_ONLY)
    for key, value in settings.items():
        if not conf.contains(key):
            builder = builder.config(key, value)
    log.info("pipeline: starting Spark (master %s)", chosen)
    session = _without_stderr(builder) if quiet else builder.getOrCreate()
    session.sparkContext.setLogLevel(level.upper())
    return session


def inheriting(spark: SparkSession) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """A wrapper for work handed to a thread pool: it runs with the calling thread's Spark
    local properties (job group, description, scheduler pool), as
    :class:`pyspark.InheritableThread` does for a thread, so the jobs a pool thread starts
    belong to the caller's job group (counted and cancelled with it).  The pool thread's
    properties are emptied afterwards."""
    context = spark.sparkContext._jsc.sc()  # as InheritableThread does
    properties = context.getLocalProperties().clone()

    def wrap(work: Callable[..., _T]) -> Callable[..., _T]:
        def run(*args: Any, **kwargs: Any) -> _T:
            # a copy each: Spark sets properties of its own (the SQL execution id) on them
            context.setLocalProperties(properties.clone())
            try:
                return work(*args, **kwargs)
            finally:
                context.getLocalProperties().clear()
        return run
    return wrap
