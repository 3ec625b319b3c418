"""The compiled build of road's fast mode (mypyc, setup.py) and its pure-Python twin.

The suite runs whichever build is installed; the test below runs the road tests again on
the other path, so CI tests both (docs/performance.md, "The compiled build").
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

from road._build import build

ROOT = Path(__file__).resolve().parent.parent
PURE = bool(os.environ.get("RAETLIKE_PURE_PYTHON"))


def test_fast_mode_runs_compiled_unless_the_pure_path_is_asked_for() -> None:
    """A failed or missing compiled build must not pass unnoticed (set RAETLIKE_PURE_PYTHON=1
    to run on the pure path on purpose)."""
    assert build() == ("pure Python" if PURE else "mypyc")


@pytest.mark.skipif(PURE, reason="this run is the pure path already")
def test_the_road_tests_pass_on_the_pure_path_too() -> None:
    env = {**os.environ, "RAETLIKE_PURE_PYTHON": "1"}
    tests = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_road_*.py")
                   if "interop" not in path.name)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/test_compiled_build.py", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def _fresh_build_module(tmp_path: Path) -> object:
    """road/_build.py loaded on its own, looking at ``tmp_path`` instead of road/."""
    spec = importlib.util.spec_from_file_location("_build_under_test",
                                                  ROOT / "road" / "_build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._HERE = tmp_path  # type: ignore[attr-defined]
    module._RECORD = tmp_path / "_compiled_sources.json"  # type: ignore[attr-defined]
    return module


def test_a_source_edited_since_the_build_runs_as_python_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAETLIKE_PURE_PYTHON", raising=False)
    source = tmp_path / "_fast_thing.py"
    source.write_text("VALUE = 1\n")
    record = {"_fast_thing": hashlib.sha256(source.read_bytes()).hexdigest()}
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
    assert "_fast_thing changed since the compiled build" in caplog.text
