"""``raetlike ping --lane LANE --yard NAME`` against a ``raetlike yard NAME --echo`` process."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.cli import main
from raetlike.cli.ping import PingError, ping_yard

ROOT = Path(__file__).resolve().parent.parent
START = 10.0  # seconds a yard process gets to print its socket path


def _raetlike(*args: str) -> list[str]:
    return [sys.executable, "-m", "raetlike", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_raetlike(*args), capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def lane_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lane") / "uxd"


@pytest.fixture(scope="module")
def echo_yard(lane_dir: Path) -> Iterator[str]:
    """A ``raetlike yard echo --lane jobs --echo`` process; yields its socket path."""
    with (lane_dir.parent / "echo.log").open("wb") as log:
        process = subprocess.Popen(
            _raetlike("yard", "echo", "--lane", "jobs", "--dir", str(lane_dir), "--echo"),
            stdout=subprocess.PIPE, stderr=log, env=_env(), cwd=ROOT)
    assert process.stdout is not None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(START), (lane_dir.parent / "echo.log").read_text()
        line = process.stdout.readline().decode().strip()
        assert line.startswith("yard echo listening on "), line
        yield line.rsplit(" ", 1)[-1]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        process.stdout.close()


def test_ping_gets_every_echo_from_an_echo_yard_and_reports_json(
        echo_yard: str, lane_dir: Path) -> None:
    result = _run("ping", "--lane", "jobs", "--dir", str(lane_dir), "--yard", "echo",
                  "--count", "500", "--size", "100", "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["ok"] is True
    assert figures["target"] == echo_yard
    assert figures["remote"] == "echo"
    assert (figures["count"], figures["echoed"], figures["size"]) == (500, 500, 100)
    assert figures["messages_per_second"] > 0
    assert 0 < figures["rtt_p50_ms"] <= figures["rtt_p99_ms"] <= figures["rtt_max_ms"]


def test_ping_prints_one_line_naming_the_yard_without_json(
        echo_yard: str, lane_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "ping", "--lane", "jobs", "--dir", str(lane_dir), "--yard", "echo",
                 "--count", "20"])
    assert code == 0
    assert capsys.readouterr().out.startswith(f"20/20 echoed by echo at {echo_yard}")


def test_a_multi_page_message_comes_back_whole(echo_yard: str, lane_dir: Path) -> None:
    result = ping_yard("echo", lane="jobs", directory=str(lane_dir), count=2,
                       size=1_000_000, window=1, timeout=20)
    assert result.count == 2
    assert len(result.round_trips) == 2
    assert result.target == echo_yard


def test_pinging_a_yard_nobody_runs_fails_at_once_with_its_path(
        echo_yard: str, lane_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-q", "ping", "--lane", "jobs", "--dir", str(lane_dir), "--yard", "nobody",
                 "--json"])
    assert code == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False
    assert f"no yard nobody listening at {lane_dir / 'jobs.nobody.uxd'}" in captured.err


def test_a_yard_that_does_not_echo_makes_the_ping_time_out(lane_dir: Path) -> None:
    process = subprocess.Popen(
        _raetlike("yard", "quiet", "--lane", "jobs", "--dir", str(lane_dir)),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT)
    assert process.stdout is not None
    try:
        assert process.stdout.readline().decode().startswith("yard quiet listening on ")
        with pytest.raises(PingError, match=r"timed out after 0\.5 s: 0 of 3 echoes back"):
            ping_yard("quiet", lane="jobs", directory=str(lane_dir), count=3, timeout=0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        process.stdout.close()


@pytest.mark.parametrize(("args", "complaint"), [
    (["ping"], "give HOST:PORT, or --lane LANE --yard NAME"),
    (["ping", "--lane", "jobs"], "--lane needs --yard NAME"),
    (["ping", "127.0.0.1:7530", "--lane", "jobs", "--yard", "echo"], "not both"),
    (["ping", "127.0.0.1:7530", "--yard", "echo"], "--yard and --dir go with --lane"),
    (["ping", "--lane", "a.b", "--yard", "echo"], "must not hold dots"),
])
def test_a_ping_target_given_wrongly_is_a_usage_error(
        args: list[str], complaint: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err
