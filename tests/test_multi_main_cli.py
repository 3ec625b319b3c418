"""``raetlike estate --join A --join B --multi ...`` over real sockets on 127.0.0.1 (port 0).

Two real main estates and a minion joined to both; the active main is killed
and the minion moves.  Every wait is a deadline loop on the minion's log.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.cli import main
from tests.test_cli import Estate

DEADLINE = 30.0  # generous: the machine may be busy; the protocol needs ~3.5 s


@pytest.fixture
def mains(tmp_path: Path) -> Iterator[dict[str, Estate]]:
    keep = str(tmp_path / "keep")
    started = {name: Estate(tmp_path, name, "--main", "--auto", "once", "--bus", "--keep", keep)
               for name in ("alpha", "beta")}
    yield started
    for estate in started.values():
        estate.stop()


def _minion(tmp_path: Path, mains: dict[str, Estate], *args: str) -> Estate:
    joins = [part for estate in mains.values() for part in ("--join", estate.address)]
    return Estate(tmp_path, "minion", "--bus", "--keep", str(tmp_path / "keep"), *joins, *args)


def test_a_failover_minion_moves_to_the_other_main_when_the_active_one_is_killed(
        tmp_path: Path, mains: dict[str, Estate]) -> None:
    minion = _minion(tmp_path, mains, "--multi", "failover")
    try:
        assert minion.wait_for_log("main alpha active (first up", DEADLINE) or \
            minion.wait_for_log("main beta active (first up", 1.0), minion.log.read_text()
        assert minion.wait_for_log("allowed alpha", DEADLINE)
        assert minion.wait_for_log("allowed beta", DEADLINE)
        first = "alpha" if "main alpha active (first up" in minion.log.read_text() else "beta"
        other = "beta" if first == "alpha" else "alpha"
        killed_at = time.monotonic()
        mains[first].process.send_signal(signal.SIGKILL)
        mains[first].process.wait(timeout=10)
        assert minion.wait_for_log(f"main {other} active (lost, was {first}", DEADLINE), \
            minion.log.read_text()
        moved_after = time.monotonic() - killed_at
        assert moved_after < DEADLINE
        assert f"bus minion: remote {other} linked" in minion.log.read_text()
    finally:
        assert minion.stop() == 0


def test_a_hot_minion_picks_up_a_main_that_starts_later(tmp_path: Path) -> None:
    keep = str(tmp_path / "keep")
    alpha = Estate(tmp_path, "alpha", "--main", "--auto", "once", "--bus", "--keep", keep)
    beta = Estate(tmp_path, "beta", "--main", "--auto", "once", "--bus", "--keep", keep)
    beta_address = beta.address
    beta.stop()  # its port is known; it is down when the minion starts
    minion = Estate(tmp_path, "minion", "--bus", "--keep", keep, "--join", alpha.address,
                    "--join", beta_address, "--multi", "hot")
    later = None
    try:
        assert minion.wait_for_log("remote alpha linked (upstream)", DEADLINE), \
            minion.log.read_text()
        host, port = beta_address.rsplit(":", 1)
        later = Estate(tmp_path, "beta", "--main", "--auto", "once", "--bus", "--keep", keep,
                       "--host", host, "--port", port)
        assert minion.wait_for_log("remote beta linked (upstream)", DEADLINE), \
            minion.log.read_text()
    finally:
        assert minion.stop() == 0
        alpha.stop()
        if later is not None:
            later.stop()


@pytest.mark.parametrize(("args", "named"), [
    (["--join", "127.0.0.1:1", "--multi", "hot"], "--multi"),
    (["--multi", "failover"], "--multi"),
    (["--join", "127.0.0.1:1", "--join", "127.0.0.1:1"], "twice"),
    (["--join", "127.0.0.1:1", "--join", "127.0.0.1:2", "--multi", "hot", "--failback", "5"],
     "--failback"),
    (["--join", "127.0.0.1:1", "--join", "127.0.0.1:2", "--durable"], "--durable"),
    (["--join", "127.0.0.1:1", "--join", "127.0.0.1:2", "--multi", "cold"], "--multi"),
])
def test_multi_main_usage_errors_are_one_line_naming_the_option(
        args: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["estate", "x", "--port", "0", *args])
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert named in lines[0]
