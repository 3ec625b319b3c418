"""The pipeline on a real Spark standalone cluster: a master and one worker,
started on loopback from the installed pyspark, give the same figures as
local mode (issue 14).  Not marked slow: CI runs it (about 40 s)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyspark

from raetlike.pipeline._arrow import PART_FILE
from tests.test_cli import ROOT, _env
from tests.test_pipeline_inputs import _journal

DEADLINE = 120.0  # JVM starts on a busy machine
PIPELINE_DEADLINE = 300.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(path: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} within {DEADLINE} s:\n{path.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``spark://127.0.0.1:PORT`` with one worker (1 core, 1 GiB), and its environment."""
    root = tmp_path_factory.mktemp("cluster")
    home = Path(pyspark.__file__).parent
    env = {**_env(), "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(root / "log"), "SPARK_PID_DIR": str(root / "pid"),
           "SPARK_WORKER_DIR": str(root / "work"), "PYSPARK_PYTHON": sys.executable}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master_log, worker_log = root / "master.log", root / "worker.log"
    with master_log.open("wb") as log:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", "0"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    worker = None
    try:
        _wait_for(master_log, "I have been elected leader", master)
        with worker_log.open("wb") as log:
            worker = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", "0"],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        _wait_for(master_log, "Registering worker 127.0.0.1:", worker)
        yield {"url": url, "env": env, "root": root}
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def _pipeline(journal: Path, out: Path, env: dict[str, str], *master: str) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "raetlike", "-q", "pipeline", str(journal), "--out", str(out),
         *master], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=PIPELINE_DEADLINE, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # -q: not even Spark's banner under spark://
    return time.monotonic() - started


def test_a_standalone_cluster_gives_the_same_figures_as_local_mode(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    _journal(journal / "alpha", "alpha", 400)
    _journal(journal / "beta", "beta", 300)
    seconds = _pipeline(journal, tmp_path / "on-cluster", cluster["env"], "--master",
                        cluster["url"])
    _pipeline(journal, tmp_path / "local", cluster["env"], "--master", "local[2]")
    on_cluster = json.loads((tmp_path / "on-cluster" / "summary.json").read_text())
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    assert on_cluster["records"] == local["records"] == 700
    for key in ("skipped_lines", "latency", "audit", "estates", "histogram"):
        assert on_cluster[key] == local[key], key
    # the work really ran on the worker: it made an application directory for its executor
    assert any((cluster["root"] / "work").glob("app-*")), "no executor ran on the worker"
    # and pyarrow converted the segments there, in Python workers (it falls back to Spark's
    # reader with only a warning, which -q hides)
    store = tmp_path / "on-cluster" / "store"
    units = list(store.iterdir())
    assert units
    assert all((unit / "records" / PART_FILE).is_file() for unit in units), units
    print(f"pipeline on the standalone cluster: {seconds:.1f} s")  # noqa: T201 - in -s output
