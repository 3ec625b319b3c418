"""Errors a user meets: one line, ``raetlike CMD: error: ...`` naming the option
or path, one JSON object with --json, and nothing created before it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from raetlike.cli import main
from raetlike.errors import LocalProtocolError
from road.config import RoadConfig
from tests.flokit import free_udp_ports, road_plan
from tests.test_cli import _run

LONG = "a" * 100


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_keys_json_on_a_missing_keep_prints_one_json_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "list", "--keep", str(tmp_path / "none"), "--json"]) == 1
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer == {"ok": False, "error": f"{tmp_path / 'none'}: no such keep directory"}
    assert _one_line(captured.err).startswith("raetlike keys: error: ")


def test_flo_json_on_a_bind_error_prints_one_json_object(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    master_port, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, master_port, minion_port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", master_port))
        status = main(["-q", "flo", str(plan), "--json"])
    captured = capsys.readouterr()
    assert status == 1
    answer = json.loads(captured.out)
    assert answer["ok"] is False
    assert f"cannot bind UDP 127.0.0.1:{master_port}" in answer["error"]
    assert _one_line(captured.err).startswith("raetlike flo: error: cannot bind UDP")


def test_a_bad_journal_path_names_the_option_and_creates_no_keep(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    result = _run("estate", "x", "--port", "0", "--host", "127.0.0.1", "--keep", str(keep),
                  "--journal", "/proc/nope/journal")
    assert result.returncode == 1
    assert _one_line(result.stderr).startswith(
        "raetlike estate: error: --journal /proc/nope/journal: ")
    assert not keep.exists()


def test_a_lane_path_too_long_for_a_socket_is_one_line_and_creates_nothing(
        tmp_path: Path) -> None:
    keep, lanes = tmp_path / "keep", tmp_path / "lanes"
    result = _run("estate", "x", "--port", "0", "--host", "127.0.0.1", "--keep", str(keep),
                  "--lane", LONG, "--dir", str(lanes))
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert line.startswith("raetlike estate: error: lane socket path ")
    assert "a UNIX socket path holds at most 107" in line
    assert not keep.exists()
    assert not lanes.exists()
    result = _run("yard", "w", "--lane", LONG, "--dir", str(lanes))
    assert result.returncode == 1
    assert _one_line(result.stderr).startswith("raetlike yard: error: lane socket path ")
    assert not lanes.exists()


def test_a_udp_port_in_use_is_one_line_and_creates_no_keep(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        keep = tmp_path / "keep"
        result = _run("estate", "x", "--port", str(port), "--host", "127.0.0.1",
                      "--keep", str(keep))
    assert result.returncode == 1
    assert _one_line(result.stderr) == (f"raetlike estate: error: cannot bind UDP "
                                        f"127.0.0.1:{port}: Address already in use")
    assert not keep.exists()


def test_a_missing_libsodium_is_one_line_naming_the_package(tmp_path: Path) -> None:
    """In a private mount namespace the system's libsodium is made unloadable for real."""
    import ctypes.util  # noqa: PLC0415
    import os  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from tests.test_cli import ROOT, _env  # noqa: PLC0415

    name = ctypes.util.find_library("sodium")
    library = next((str(p) for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                     "/lib/x86_64-linux-gnu", "/usr/lib", "/usr/local/lib")
                    if name and (p := Path(d) / name).exists()), None)
    if os.geteuid() != 0 or shutil.which("unshare") is None or library is None:
        pytest.skip("needs root and unshare to hide the system's libsodium in a mount namespace")
    real = os.path.realpath(library)
    script = (f"mount --bind /dev/null {real} && exec {sys.executable} -m raetlike "
              "ping 127.0.0.1:9")
    result = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60,
                            check=False)
    if "mount" in result.stderr and "permission denied" in result.stderr.lower():
        pytest.skip(f"cannot make a mount namespace here: {result.stderr.strip()}")
    assert result.returncode == 1, result.stderr
    line = _one_line(result.stderr)
    assert line.startswith("raetlike ping: error: libsodium not found: ")
    assert "apt-get install libsodium23" in line


def test_a_bad_durable_sync_is_one_line_naming_the_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["estate", "e", "--port", "0", "--durable", "--durable-sync", "sometimes"])
    assert exited.value.code == 2
    line = _one_line(capsys.readouterr().err.splitlines()[-1])
    assert "--durable-sync" in line
    assert "'sometimes' is not 'always', 'never' or milliseconds" in line


def test_a_durable_store_in_use_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from raetlike.durable._road import _lock  # noqa: PLC0415 - the lock a live estate holds

    store = tmp_path / "store"
    held = _lock(store)
    try:
        status = main(["-q", "estate", "e", "--host", "127.0.0.1", "--port", "0",
                       "--keep", str(tmp_path / "keep"), "--durable", str(store)])
    finally:
        held.close()
    assert status == 1
    line = _one_line(capsys.readouterr().err)
    assert line == (f"raetlike estate: error: {store}: the durable store is in use by "
                    "another process")


@pytest.mark.parametrize("period", ["nan", "inf", "0.01"])
def test_a_presence_period_not_a_finite_number_of_at_least_005_s_is_one_line(
        period: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # (a bad --auto after it: an estate that took
        # the period would stop on that one instead of running)
        main(["estate", "e", "--port", "0", "--presence-period", period, "--auto", "bogus"])
    assert exited.value.code == 2
    line = _one_line(capsys.readouterr().err.splitlines()[-1])
    assert "--presence-period" in line
    assert period in line


@pytest.mark.parametrize("period", [float("nan"), float("inf"), 0.0, -1.0])
def test_road_config_refuses_a_period_not_a_finite_positive_number(period: float) -> None:
    with pytest.raises(LocalProtocolError, match=r"RoadConfig\.period must be a finite"):
        RoadConfig(period=period)
