"""Profile the pipeline's first and second run over a journal: Spark's jobs and the JVM's CPU.

Usage::

    .venv/bin/python tools/profile_pipeline.py JOURNAL [--java-options "-XX:..."]
        [--conf KEY=VALUE ...]

``JOURNAL`` is a journal directory, e.g. the ``interval`` one that
``tools/bench_journal.py --records 1000000 --pipeline --dir D`` leaves in
``D``.  The script starts local Spark as ``raetlike pipeline`` does (with
Spark's event log on, uncompressed, in a temporary directory), reads and counts
the journal twice as the bench does, then runs the pipeline twice into a fresh
output directory.  It prints:

- each run's seconds, and for the first run the CPU seconds of the driver
  JVM's threads by kind (``/proc/PID/task/*/stat``: tasks, the JIT's compiler
  threads, GC, ...), so the JIT's share can be seen;
- every Spark job of both runs from the event log: its start and end from the
  first run's start, its stages' task count, run time and CPU time.

``--java-options`` replaces the JVM options the pipeline would choose (the
GC, JIT tiers; the log settings are kept); ``--conf`` sets Spark settings
before the session starts.  Local Spark only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

_THREAD_DIGITS = re.compile(r"[0-9]+")


def _jvm_pids() -> list[int]:
    """The local driver JVM (the gateway pyspark started: a child of this process)."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    return [int(pid) for pid in children if "java" in Path(f"/proc/{pid}/comm").read_text()]


def _thread_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds per kind of thread (its name with digits folded) of ``pids``."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu: dict[str, float] = collections.defaultdict(float)
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:  # the thread ended
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            cpu[_THREAD_DIGITS.sub("#", name)] += (int(fields[11]) + int(fields[12])) / ticks
    return cpu


def _jobs(event_dir: Path, since_ms: float) -> list[str]:
    """One line per Spark job submitted after ``since_ms`` (epoch ms), from the event log."""
    logs = sorted(event_dir.rglob("events*")) or sorted(p for p in event_dir.iterdir()
                                                        if p.is_file())
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, tuple[int, int, int]] = {}
    for log in logs:
        with log.open() as lines:
            for line in lines:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerJobStart":
                    jobs[event["Job ID"]] = {"start": event["Submission Time"],
                                             "stages": event["Stage IDs"]}
                elif kind == "SparkListenerJobEnd":
                    jobs[event["Job ID"]]["end"] = event["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    info = event["Stage Info"]
                    metrics = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}
                    stages[info["Stage ID"]] = (
                        int(info.get("Number of Tasks", 0)),
                        int(metrics.get("internal.metrics.executorRunTime", 0) or 0),
                        int(metrics.get("internal.metrics.executorCpuTime", 0) or 0) // 10**6)
    out = []
    for job_id, job in sorted(jobs.items()):
        if job["start"] < since_ms:
            continue
        done = [stages[s] for s in job["stages"] if s in stages]
        out.append(f"job {job_id:3} {(job['start'] - since_ms) / 1000:7.2f}-"
                   f"{(job.get('end', since_ms) - since_ms) / 1000:7.2f} s  "
                   + "; ".join(f"{tasks} tasks, run {run} ms, CPU {cpu} ms"
                               for tasks, run, cpu in done))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("journal", type=Path)
    parser.add_argument("--java-options", help="JVM options in place of the pipeline's own")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable)")
    args = parser.parse_args()
    if not args.journal.is_dir():
        parser.error(f"{args.journal} is not a directory")
    confs = []
    for setting in args.conf:
        key, equals, value = setting.partition("=")
        if not equals or not key.startswith("spark."):
            parser.error(f"--conf takes spark.KEY=VALUE, not {setting!r}")
        confs.append((key, value))

    from pyspark.sql import SparkSession  # noqa: PLC0415 - PySpark only here

    from raetlike.pipeline import PipelineOptions, run_pipeline, spark_session  # noqa: PLC0415
    from raetlike.pipeline._frames import hour_directories, read_json_journal  # noqa: PLC0415

    work = Path(tempfile.mkdtemp(prefix="profile-pipeline-"))
    events = work / "events"
    events.mkdir()
    settings = [("spark.eventLog.enabled", "true"), ("spark.eventLog.compress", "false"),
                ("spark.eventLog.dir", events.as_uri()), *confs]
    original = SparkSession.Builder.config

    def config(self: SparkSession.Builder, key: Any = None, value: Any = None,
               *rest: Any, **named: Any) -> SparkSession.Builder:
        if key == "spark.driver.extraJavaOptions":  # set once, by spark_session
            if args.java_options is not None:
                value = " ".join([*(o for o in str(value).split() if o.startswith("-Dlog4j2")),
                                  args.java_options])
            for extra, setting in settings:
                self = original(self, extra, setting)
        return original(self, key, value, *rest, **named)

    try:
        SparkSession.Builder.config = config  # type: ignore[method-assign]
        spark = spark_session()
        SparkSession.Builder.config = original  # type: ignore[method-assign]
        hours = hour_directories([args.journal])
        for label in ("one pass", "a second pass (warm)"):
            started = time.perf_counter()
            read_json_journal(spark, hours).count()
            print(f"{label}: {time.perf_counter() - started:.2f} s")
        pids = _jvm_pids()
        since_ms = time.time() * 1000
        before = _thread_cpu(pids)
        first = run_pipeline(PipelineOptions((args.journal,), work / "out"), spark)
        after = _thread_cpu(pids)
        spent = {name: after[name] - before.get(name, 0.0) for name in after}
        print(f"first run: {first.seconds:.2f} s; the JVM's CPU {sum(spent.values()):.2f} s:")
        for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {seconds:6.2f} s  {name}")
        second = run_pipeline(PipelineOptions((args.journal,), work / "out"), spark)
        print(f"second run: {second.seconds:.2f} s")
        spark.stop()
        print("Spark jobs of both runs (seconds from the first run's start):")
        print("\n".join(_jobs(events, since_ms)))
    finally:
        SparkSession.Builder.config = original  # type: ignore[method-assign]
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
