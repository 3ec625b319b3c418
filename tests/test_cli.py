"""The ``raetlike`` command line over real sockets on 127.0.0.1 (port 0)."""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.cli import build_parser, main
from raetlike.cli.estate import EstateOptions, _Estate
from road.persist import open_estate

ROOT = Path(__file__).resolve().parent.parent
START = 10.0  # seconds an estate process gets to print its address


def _raetlike(*args: str) -> list[str]:
    return [sys.executable, "-m", "raetlike", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_raetlike(*args), capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT, check=False)


class Estate:
    """An ``raetlike estate`` process, stopped with SIGTERM at the end."""

    def __init__(self, tmp_path: Path, name: str, *args: str) -> None:
        self.log = tmp_path / f"{name}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                _raetlike("estate", name, "--host", "127.0.0.1", "--port", "0", *args),
                stdout=subprocess.PIPE, stderr=log, env=_env(), cwd=ROOT)
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            assert selector.select(START), f"no address line: {self.log.read_text()}"
        self.first_line = self.process.stdout.readline().decode().strip()
        prefix = f"estate {name} listening on "
        assert self.first_line.startswith(prefix), self.log.read_text()
        self.address = self.first_line.removeprefix(prefix)

    def wait_for_log(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text():
                return True
            time.sleep(0.02)
        return text in self.log.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return code


@pytest.fixture
def echo_main(tmp_path: Path) -> Iterator[Estate]:
    estate = Estate(tmp_path, "main", "--main", "--echo", "--auto", "once",
                    "--keep", str(tmp_path / "keep"))
    yield estate
    estate.stop()


def test_ping_gets_every_echo_from_an_echo_estate_and_reports_json(echo_main: Estate) -> None:
    result = _run("ping", echo_main.address, "--count", "200", "--size", "64", "--json",
                  "--timeout", "20")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["ok"] is True
    assert figures["echoed"] == figures["count"] == 200
    assert figures["remote"] == "main"
    assert figures["messages_per_second"] > 0
    assert 0 < figures["rtt_p50_ms"] <= figures["rtt_p99_ms"]
    assert echo_main.wait_for_log("estate main: allowed ping-", 5)
    assert echo_main.stop() == 0
    assert "estate main: stopped" in echo_main.log.read_text()


def test_estate_prints_its_bound_address_first(echo_main: Estate) -> None:
    host, _, port = echo_main.address.rpartition(":")
    assert host == "127.0.0.1"
    assert 0 < int(port) < 65536


def test_ping_to_a_silent_port_fails_with_one_line_within_its_timeout() -> None:
    import socket  # noqa: PLC0415 - only this test needs a port nobody answers on

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = _run("ping", f"127.0.0.1:{port}", "--timeout", "1.5")
        elapsed = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "timed out after 1.5 s" in lines[0]
    assert elapsed < 1.5 + 5  # the interpreter's start-up on top of the timeout


def test_a_main_estate_leaves_a_join_pending_by_default_and_logs_the_command_that_accepts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keep = tmp_path / "keep"

    def listed() -> dict[str, list[str]]:
        assert main(["keys", "list", "--keep", str(keep), "--json"]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    estate = Estate(tmp_path, "main", "--main", "--echo", "--keep", str(keep))  # no --auto
    try:
        pinger = subprocess.Popen(
            _raetlike("ping", estate.address, "--count", "5", "--timeout", "25", "--json"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
        assert estate.wait_for_log("is pending; accept it with: ", 10), estate.log.read_text()
        before = listed()
        (role,) = before["pending"]
        assert role.startswith("ping-")
        assert before["accepted"] == []
        (line,) = [line for line in estate.log.read_text().splitlines() if "pending" in line]
        assert " WARNING raetlike.cli.estate: estate main: join from " in line
        told = line.partition(" is pending; accept it with: ")[2]
        assert told == f"raetlike keys accept {role} --keep {keep / 'main'}"
        assert re.search(rf"join from '{role}' \(role '{role}', 127\.0\.0\.1:\d+\) is", line)
        assert pinger.poll() is None  # still waiting on the operator
        accepted = _run(*shlex.split(told)[1:])  # exactly as the log says
        assert accepted.returncode == 0, accepted.stderr
        out, err = pinger.communicate(timeout=30)
        assert pinger.returncode == 0, err
        assert json.loads(out)["echoed"] == 5
        after = listed()
        assert after["accepted"] == [role]
        assert after["pending"] == []
    finally:
        assert estate.stop() == 0


def test_keys_reject_and_delete_change_what_list_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_estate(tmp_path, "main", main=True, host_address=("127.0.0.1", 0))

    def keys(*args: str) -> tuple[int, str, str]:
        code = main(["keys", *args])
        out, err = capsys.readouterr()
        return code, out, err

    assert keys("reject", "intruder", "--keep", str(tmp_path))[0] == 0
    code, out, _ = keys("list", "--keep", str(tmp_path / "main"), "--json")
    assert json.loads(out)["rejected"] == ["intruder"]
    assert keys("delete", "intruder", "--keep", str(tmp_path))[0] == 0
    code, out, _ = keys("list", "--keep", str(tmp_path), "--json")
    assert json.loads(out)["rejected"] == []
    code, _, err = keys("delete", "intruder", "--keep", str(tmp_path))
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "intruder" in err


def test_keys_needs_to_know_which_estate_when_the_keep_holds_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("alpha", "beta"):
        open_estate(tmp_path, name, main=False, host_address=("127.0.0.1", 0))
    assert main(["keys", "list", "--keep", str(tmp_path)]) == 1
    assert "--estate" in capsys.readouterr().err
    assert main(["keys", "list", "--keep", str(tmp_path), "--estate", "beta", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["estate"] == "beta"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["estate", "x", "--port", "70000"], "--port"),
        (["estate", "x", "--port", "http"], "--port"),
        (["estate", "x"], "--port"),
        (["estate", "x", "--port", "1", "--join", "host:port"], "--join"),
        (["ping", "nohost:"], "HOST:PORT"),
        (["ping", "127.0.0.1:1", "--count", "0"], "--count"),
        (["estate", "x", "--port", "1", "--auto", "sometimes"], "--auto"),
        (["keys", "promote"], "action"),
        (["estate", "x", "--port", "1", "--bus-keepalive", "30"], "--bus-keepalive needs --bus"),
        (["estate", "x", "--port", "1", "--bus", "--bus-keepalive", "0.01"], "too small"),
        (["estate", "x", "--port", "1", "--bus", "--bus-keepalive", "1e308"], "too large"),
        (["estate", "x", "--port", "1", "--presence-period", "86401"], "too large"),
        (["frobnicate"], "COMMAND"),
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_argument(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert named in lines[0]


def test_usage_errors_exit_2_from_the_installed_command_too() -> None:
    result = _run("ping", "127.0.0.1:99999")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "HOST:PORT" in line
    assert "99999" in line


def test_a_corrupt_keep_is_a_one_line_failure_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_estate(tmp_path, "main", main=True, host_address=("127.0.0.1", 0))
    (tmp_path / "main" / "local" / "estate.json").write_text("[]")
    capsys.readouterr()  # what making the keep logged
    code = main(["estate", "main", "--port", "0", "--host", "127.0.0.1", "--keep", str(tmp_path)])
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "estate.json" in lines[0]


@pytest.mark.parametrize("command", ["estate", "ping", "keys", "demo"])
def test_help_shows_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert "example" in capsys.readouterr().out


def test_demo_accepts_a_pending_minion_delivers_everything_and_exits_0(tmp_path: Path) -> None:
    result = _run("demo", "--quick", "--no-pipeline", "--out", str(tmp_path), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pipeline: skipped (--no-pipeline)" in result.stdout
    assert sorted(p.name for p in (tmp_path / "journal").iterdir()) == [
        "main", "minion1", "minion2", "minion3"]
    assert "minion3 is still pending; accepting it through the keep" in result.stdout
    assert "all minions joined and allowed" in result.stdout
    for row in ("messages     90/90", "events       48/48", "requests     24/24",
                "surveys        6/6"):
        assert row in result.stdout
    assert "\r" not in result.stdout  # no live line when stdout is not a terminal



@pytest.mark.parametrize(
    ("args", "verbose", "quiet"),
    [(["-v", "keys", "list"], 1, 0), (["keys", "list", "-vv"], 2, 0), (["-q", "demo"], 0, 1)],
)
def test_verbosity_flags_count_before_or_after_the_command(
    args: list[str], verbose: int, quiet: int
) -> None:
    parsed = build_parser().parse_args(args)
    assert (parsed.verbose, parsed.quiet) == (verbose, quiet)


def test_bus_keepalive_sets_the_bus_nodes_interval_and_three_times_it_as_the_timeout(
        tmp_path: Path) -> None:
    parsed = build_parser().parse_args(["estate", "m", "--port", "0", "--main", "--bus",
                                        "--bus-keepalive", "30"])
    assert parsed.bus_keepalive == 30.0
    running = _Estate(EstateOptions(name="m", host="127.0.0.1", port=0, main=True,
                                    keep_dir=tmp_path / "keep", bus=True, bus_keepalive=30.0),
                      time.monotonic)
    try:
        assert running.bus is not None
        config = running.bus.node.config
        assert (config.keepalive_interval, config.keepalive_timeout) == (30.0, 90.0)
    finally:
        running.close()
