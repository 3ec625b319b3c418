"""``raetlike estate``, ``yard`` and ``keys`` refuse unsafe lane and keep directories.

Each refusal is one line on stderr (``raetlike None: error: ...``) naming the path
and the fix, and exit status 1; the same commands work on a safe directory.
Ownership by another user needs root (to chown); without it those cases skip.
"""

from __future__ import annotations

import os
import selectors
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START = 10.0  # seconds a process gets to print its first line
OTHER_UID = 54321
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can chown to another uid")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def refused(*args: str) -> str:
    """Run ``raetlike ARGS``; it must fail with status 1 and one error line, returned."""
    result = subprocess.run([sys.executable, "-m", "raetlike", "-q", *args], capture_output=True,
                            text=True, timeout=30, env=_env(), cwd=ROOT, check=False)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@contextmanager
def running(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``raetlike ARGS`` until the block ends; yields its first stdout line."""
    process = subprocess.Popen([sys.executable, "-m", "raetlike", "-q", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env or _env(), cwd=ROOT)
    assert process.stdout is not None
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            assert selector.select(START), "the process printed nothing"
        line = process.stdout.readline().strip()
        assert line, process.communicate(timeout=10)
        yield line
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
        assert process.returncode == 0, err


def a_directory(path: Path, mode: int) -> Path:
    path.mkdir(parents=True)
    path.chmod(mode)
    return path


def estate(keep: Path, *args: str) -> tuple[str, ...]:
    return ("estate", "main", "--main", "--host", "127.0.0.1", "--port", "0",
            "--keep", str(keep), *args)


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_an_estate_refuses_a_keep_directory_others_may_write(tmp_path: Path, mode: int) -> None:
    keep = a_directory(tmp_path / "keep", mode)
    assert refused(*estate(keep)) == (
        f"raetlike estate: error: keep directory {keep} is mode {mode:04o}, writable by group or "
        f"others: fix: chmod 700 {keep}")
    assert list(keep.iterdir()) == []  # no keys were written there


def test_an_estate_refuses_its_own_keep_once_others_may_write_it(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    with running(*estate(keep)) as line:
        assert line.startswith("estate main listening on 127.0.0.1:")
    (keep / "main" / "role").chmod(0o777)
    assert refused(*estate(keep)).endswith(f"fix: chmod 700 {keep / 'main' / 'role'}")
    (keep / "main" / "role").chmod(0o700)
    (keep / "main" / "role" / "local" / "role.json").chmod(0o644)
    assert refused(*estate(keep)).endswith(
        f"may read the private keys in it: fix: chmod 600 {keep / 'main/role/local/role.json'}")


@as_root
def test_an_estate_run_as_root_refuses_a_keep_planted_by_another_user(tmp_path: Path) -> None:
    base = a_directory(tmp_path / "shared", 0o755)
    planted = a_directory(base / "main", 0o700)  # made first by someone else
    os.chown(planted, OTHER_UID, OTHER_UID)
    assert refused(*estate(base)) == (
        f"raetlike estate: error: keep directory {planted} is owned by uid {OTHER_UID}, "
        f"not by uid 0 (the running user): fix: chown 0 {planted} (or use a directory of "
        "your own)")
    assert list(planted.iterdir()) == []


def test_keys_refuses_a_keep_others_may_write(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    with running(*estate(keep)):
        pass
    (keep / "main").chmod(0o770)
    assert refused("keys", "list", "--keep", str(keep)).endswith(
        f"fix: chmod 700 {keep / 'main'}")


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_yard_refuses_a_lane_directory_others_may_write(tmp_path: Path, mode: int) -> None:
    lanes = a_directory(tmp_path / "lanes", mode)
    assert refused("yard", "worker", "--lane", "jobs", "--dir", str(lanes)) == (
        f"raetlike yard: error: lane directory {lanes} is mode {mode:04o}, writable by group or "
        f"others: fix: chmod 700 {lanes}")
    assert list(lanes.iterdir()) == []  # no socket bound where others could replace it


def test_a_manor_refuses_a_lane_directory_others_may_write(tmp_path: Path) -> None:
    lanes = a_directory(tmp_path / "lanes", 0o777)
    line = refused(*estate(tmp_path / "keep", "--lane", "jobs", "--dir", str(lanes)))
    assert line == (f"raetlike estate: error: lane directory {lanes} is mode 0777, writable "
                    f"by group or others: fix: chmod 700 {lanes}")


@as_root
def test_a_yard_refuses_a_lane_directory_another_user_made_first(tmp_path: Path) -> None:
    lanes = a_directory(tmp_path / "lanes", 0o700)
    os.chown(lanes, OTHER_UID, OTHER_UID)
    assert refused("yard", "worker", "--lane", "jobs", "--dir", str(lanes)) == (
        f"raetlike yard: error: lane directory {lanes} is owned by uid {OTHER_UID}, not by uid 0 "
        f"(the running user): fix: chown 0 {lanes} (or use a directory of your own)")


def test_a_yard_makes_a_missing_lane_directory_0700_and_listens_there(tmp_path: Path) -> None:
    lanes = tmp_path / "lanes"
    with running("yard", "worker", "--lane", "jobs", "--dir", str(lanes)) as line:
        assert line == f"yard worker listening on {lanes / 'jobs.worker.uxd'}"
        assert stat.S_IMODE(lanes.stat().st_mode) == 0o700


def test_a_yard_without_dir_listens_in_the_users_runtime_directory(tmp_path: Path) -> None:
    runtime = a_directory(tmp_path / "run", 0o700)
    env = _env(XDG_RUNTIME_DIR=str(runtime))
    with running("yard", "worker", "--lane", "jobs", env=env) as line:
        assert line == f"yard worker listening on {runtime / 'raetlike' / 'jobs.worker.uxd'}"
        assert stat.S_IMODE((runtime / "raetlike").stat().st_mode) == 0o700
