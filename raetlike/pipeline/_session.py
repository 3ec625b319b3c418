"""A SparkSession for the pipeline: local, quiet and small by default; any master on request.

Under ``spark-submit`` the session comes from the submitted configuration
(master, memory, ...) and only settings left unset there get our defaults.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "spark_session"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"

_LOG4J2 = """\
rootLogger.level = warn
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
}

_LOCAL_ONLY = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def _log4j2_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"raetlike-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return path


def spark_session(master: str | None = None, app_name: str = "raetlike-pipeline", *,
                  short_jobs: bool = False) -> SparkSession:
    """The active session if any, else a new one (``local[*]`` unless a master is configured).

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
    if local:
        settings.update(_LOCAL_ONLY)
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{_log4j2_file()} -XX:+UseSerialGC"
            + (" -XX:TieredStopAtLevel=1" if short_jobs else ""))
    for key, value in settings.items():
        if not conf.contains(key):
            builder = builder.config(key, value)
    log.info("pipeline: starting Spark (master %s)", chosen)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
