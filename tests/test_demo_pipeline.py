"""The demo's last step: its estates' journals through the Spark pipeline to a report."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from raetlike.demo import run_demo
from tests.sparkkit import spark  # noqa: F401 - the session fixture

MINIONS = 3
PINGS_QUICK = 10  # Plan.of(quick=True).pings


def test_the_quick_demo_journals_its_estates_and_reports_a_complete_audit(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811 - the fixture
    out = io.StringIO()
    status = run_demo(out, quick=True, as_json=True, out_dir=tmp_path, spark=spark)
    assert status == 0
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    pipeline = result["pipeline"]
    assert pipeline["ok"], pipeline
    assert Path(pipeline["report"]) == tmp_path / "report" / "report.html"
    assert (tmp_path / "report" / "report.html").read_text().startswith("<!")
    assert sorted(p.name for p in (tmp_path / "journal").iterdir()) == [
        "main", "minion1", "minion2", "minion3"]
    # each minion's app <-> main's manor, both directions: six numbered streams
    assert pipeline["audited_sources"] == 2 * MINIONS
    assert pipeline["complete_sources"] == 2 * MINIONS
    assert (pipeline["missing"], pipeline["duplicates"]) == (0, 0)
    delivered = sum(row["done"] for row in result["traffic"])
    assert pipeline["records"] >= PINGS_QUICK * 2 * MINIONS
    assert pipeline["records"] >= delivered // 2  # bus and SP bodies are journaled too
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["records"] == pipeline["records"]


def test_without_java_the_demo_says_why_in_one_line_and_still_exits_0(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "JAVA_HOME": str(tmp_path / "no-java")}
    result = subprocess.run(
        [sys.executable, "-m", "raetlike", "demo", "--quick", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=90, env=env, cwd=root, check=False)
    assert result.returncode == 0, result.stderr
    reasons = [line for line in result.stdout.splitlines()
               if line.startswith("pipeline: not run: ")]
    assert len(reasons) == 1, result.stdout
    assert "report:" not in result.stdout
    assert (tmp_path / "out" / "journal" / "main").is_dir()
