"""The compiled build (mypyc, setup.py: road's fast mode, the lane, the durable store;
hand-written C: libsodium without ctypes, the lane driver's batched syscalls) and its
pure-Python twin.

The suite runs whichever build is installed; a test below runs the road, lane and durable
tests again on the pure path, so CI tests both (docs/performance.md, "The compiled build").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raetlike import crypto
from raetlike._native import build

ROOT = Path(__file__).resolve().parent.parent
PURE = bool(os.environ.get("RAETLIKE_PURE_PYTHON"))


def test_fast_mode_runs_compiled_unless_the_pure_path_is_asked_for() -> None:
    """A failed or missing compiled build must not pass unnoticed (set RAETLIKE_PURE_PYTHON=1
    to run on the pure path on purpose)."""
    assert build() == ("pure Python" if PURE else "mypyc")
    import lane.stack  # noqa: PLC0415 - the lane is compiled with it

    assert lane.stack.__file__ is not None
    assert lane.stack.__file__.endswith(".py") is PURE


def test_libsodium_is_called_without_ctypes_unless_the_pure_path_is_asked_for() -> None:
    """setup.py builds raetlike/_csodium.c; a failed build, or a binding that did not find
    libnacl's libsodium, must not pass unnoticed."""
    assert crypto._COMPILED is not PURE
    if not PURE:
        from raetlike import _csodium  # noqa: PLC0415 - only built on the compiled path

        assert crypto._aead_seal is _csodium.aead_seal
        assert crypto._verify is _csodium.verify


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="recvmmsg/sendmmsg: Linux")
def test_the_lane_driver_batches_its_syscalls_unless_the_pure_path_is_asked_for() -> None:
    """raetlike._cmmsg (setup.py's C part for recvmmsg/sendmmsg) must not go missing
    unnoticed either."""
    from raetlike import uxd  # noqa: PLC0415 - imported here, where it is what is tested

    assert uxd.BATCHED is not PURE


@pytest.mark.skipif(PURE, reason="this run is the pure path already")
def test_the_road_lane_and_durable_tests_pass_on_the_pure_path_too() -> None:
    env = {**os.environ, "RAETLIKE_PURE_PYTHON": "1"}
    # what the compiled modules serve: road's fast mode, the lane and its driver, the
    # durable store and the crypto facade (the kill -9 runs of test_durable_crash.py take
    # minutes; their store is tested here all the same)
    patterns = ("test_road_*.py", "test_lane_*.py", "test_durable_*.py", "test_crypto.py",
                "test_fuzz_stacks.py")
    tests = sorted(str(path.relative_to(ROOT)) for pattern in patterns
                   for path in (ROOT / "tests").glob(pattern)
                   if "interop" not in path.name and path.name != "test_durable_crash.py")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/test_compiled_build.py", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def _fresh_build_module(tmp_path: Path) -> object:
    """raetlike/_native.py loaded on its own, looking at ``tmp_path`` for the sources."""
    spec = importlib.util.spec_from_file_location("_native_under_test",
                                                  ROOT / "raetlike" / "_native.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._ROOT = tmp_path  # type: ignore[attr-defined]
    module._RECORD = tmp_path / "_compiled_sources.json"  # type: ignore[attr-defined]
    return module


def test_a_source_edited_since_the_build_runs_as_python_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAETLIKE_PURE_PYTHON", raising=False)
    (tmp_path / "road").mkdir()
    source = tmp_path / "road" / "_fast_thing.py"
    source.write_text("VALUE = 1\n")
    record = {"road._fast_thing": hashlib.sha256(source.read_bytes()).hexdigest()}
    (tmp_path / "_compiled_sources.json").write_text(json.dumps(record))
    unchanged = _fresh_build_module(tmp_path)
    before = list(sys.meta_path)
    unchanged.choose()  # type: ignore[attr-defined]
    assert sys.meta_path == before  # matching sources: the compiled modules run

    source.write_text("VALUE = 2\n")
    edited = _fresh_build_module(tmp_path)
    caplog.set_level(logging.WARNING)
    try:
        edited.choose()  # type: ignore[attr-defined]
        finder = sys.meta_path[0]
        assert finder is edited._PURE_FINDER  # type: ignore[attr-defined]
        spec = finder.find_spec("road._fast_thing")
        assert spec is not None
        assert spec.origin == str(source)
        assert finder.find_spec("road.stack") is None  # only the compiled ones
    finally:
        sys.meta_path.remove(edited._PURE_FINDER)  # type: ignore[attr-defined]
    assert "road._fast_thing changed since the compiled build" in caplog.text
