"""tools/loopback_hot.py, small: two main processes, 20 hot estates in two workers, a fan-out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_twenty_hot_estates_join_both_mains_and_all_answer_the_fan_out() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "loopback_hot.py"), "--estates", "20",
         "--workers", "2", "--idle", "1", "--timeout", "120", "--json"],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["all_ready"], figures
    assert figures["fan_out_answered"] == 20
    assert figures["fan_out_errors"] == 0
    assert 0 < figures["join_s"] < 120
    assert all(0 < rss < 1000 for rss in figures["main_rss_mb"])
    assert all(0 <= cpu < 200 for cpu in figures["main_idle_cpu_percent"])
