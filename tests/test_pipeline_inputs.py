"""What the pipeline reads, and that it never shows a verdict over nothing (issue 14):
a directory of journals is read as those journals, no segments or no records
exits 1 with the reason, -q leaves stderr empty, a terminal shows progress."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from raetlike.cli import main
from raetlike.journal import JournalWriter
from raetlike.pipeline import PipelineOptions, run_pipeline
from raetlike.pipeline._frames import NoJournalError, find_journals
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture
from tests.test_cli import ROOT, _env

DEADLINE = 240.0  # a cold Spark start on a busy machine


def _journal(directory: Path, node: str, count: int, *, start: float = HOUR_START) -> None:
    with JournalWriter(directory, node) as writer:
        for n in range(1, count + 1):
            writer.append(record(n, node=node, source=f"to-{node}", received=start + n,
                                 sent=start + n - 0.002))


def test_a_directory_of_journals_stands_for_them_and_garbage_is_refused(tmp_path: Path) -> None:
    _journal(tmp_path / "journal" / "alpha", "alpha", 3)
    _journal(tmp_path / "journal" / "beta", "beta", 3)
    (tmp_path / "journal" / "notes").mkdir()
    assert find_journals([tmp_path / "journal"]) == [tmp_path / "journal" / "alpha",
                                                     tmp_path / "journal" / "beta"]
    assert find_journals([tmp_path / "journal" / "beta"]) == [tmp_path / "journal" / "beta"]
    with pytest.raises(NoJournalError, match="no journal segments"):
        find_journals([tmp_path / "journal" / "notes"])
    with pytest.raises(NoJournalError, match="no such journal directory"):
        find_journals([tmp_path / "nope"])


def test_the_demos_parent_directory_is_read_as_every_estates_journal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:  # noqa: F811
    _journal(tmp_path / "journal" / "alpha", "alpha", 5)
    _journal(tmp_path / "journal" / "beta", "beta", 7)
    assert main(["-q", "pipeline", str(tmp_path / "journal"), "--out", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out.startswith("12 records (0 skipped lines)")
    assert "exactly once" in (tmp_path / "r" / "report.html").read_text()


def test_a_directory_without_segments_exits_1_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["pipeline", str(tmp_path / "empty"), "--out", str(tmp_path / "r")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"raetlike pipeline: error: {tmp_path / 'empty'}: no journal segments "
                    "(no date=YYYY-MM-DD/hour=HH/*.jsonl in it or in its subdirectories)")
    assert not (tmp_path / "r").exists()


def test_the_converter_is_chosen_by_name_and_spark_s_reader_makes_the_same_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:  # noqa: F811
    _journal(tmp_path / "j", "alpha", 6)
    with pytest.raises(SystemExit) as exited:
        main(["pipeline", str(tmp_path / "j"), "--out", str(tmp_path / "r"),
              "--converter", "duckdb"])
    assert exited.value.code == 2
    assert "--converter: invalid choice: 'duckdb'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="converter must be one of arrow, spark, not 'duckdb'"):
        PipelineOptions((tmp_path / "j",), tmp_path / "r", converter="duckdb")
    for converter in ("arrow", "spark"):
        out = tmp_path / converter
        assert main(["-q", "pipeline", str(tmp_path / "j"), "--out", str(out),
                     "--converter", converter]) == 0
        assert capsys.readouterr().out.startswith("6 records (0 skipped lines)")
    summaries = [json.loads((tmp_path / name / "summary.json").read_text())
                 for name in ("arrow", "spark")]
    for summary in summaries:
        summary.pop("generated", None)
    assert summaries[0] == summaries[1]


def test_zero_records_exit_1_and_the_report_shows_no_green_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:  # noqa: F811
    _journal(tmp_path / "j", "alpha", 4)
    late = str(HOUR_START + 3 * 3600)
    assert main(["-q", "pipeline", str(tmp_path / "j"), "--out", str(tmp_path / "r"),
                 "--since", late]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("raetlike pipeline: error: no records between --since and "
                              "--until in ")
    html = (tmp_path / "r" / "report.html").read_text()
    assert "exactly once" not in html
    assert "No records: nothing was audited." in html
    result = run_pipeline(PipelineOptions((tmp_path / "j",), tmp_path / "r2",
                                          since=float(late)), spark)
    assert result.records == 0
    assert "class=good" not in result.report.read_text()


def _command(journal: Path, out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "raetlike", *flags, "pipeline", str(journal),
            "--out", str(out), "--master", "local[1]"]


def test_quiet_leaves_stderr_empty_on_a_real_run(tmp_path: Path) -> None:
    _journal(tmp_path / "j", "alpha", 50)
    result = subprocess.run(_command(tmp_path / "j", tmp_path / "r", "-q"), capture_output=True,
                            text=True, env=_env(), cwd=ROOT, timeout=DEADLINE, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("50 records")


def test_a_terminal_shows_stages_tasks_and_records_as_spark_runs(tmp_path: Path) -> None:
    _journal(tmp_path / "j", "alpha", 2000)
    leader, follower = pty.openpty()
    process = subprocess.Popen(_command(tmp_path / "j", tmp_path / "r"), stdin=follower,
                               stdout=follower, stderr=follower, env=_env(), cwd=ROOT)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + DEADLINE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif process.poll() is not None:
                break
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        os.close(leader)
    text = seen.decode(errors="replace")
    assert process.returncode == 0, text
    assert "\rpipeline: " in text, text
    assert " tasks" in text, text
    assert "2,000 records" in text, text
    assert "report: " in text
