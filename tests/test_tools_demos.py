"""Each demo script under tools/ runs to the end, exits 0 and prints what it exchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

EXPECTED = {
    "demo_estates.py": ["received {'event': 'started', 'from': 'minion'}",
                        "received {'event': 'welcome', 'to': 'minion'}"],
    "demo_yards.py": ["alpha -> ['blob', 'job'] in 4 page(s)", "beta -> ['done'] in 1 page(s)"],
    "demo_manor.py": ["answer 42 routed", "estate='main', yard='echo'"],
    "demo_asyncio.py": ["beta got {'job': 1} from alpha",
                        "main got {'event': 'started'} from minion",
                        "minion got {'event': 'welcome'} from main"],
}


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_demo_script_runs_and_shows_the_exchange(script: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / script)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    for text in EXPECTED[script]:
        assert text in result.stdout
    assert "undelivered" not in result.stdout + result.stderr
