"""tools/attack.py (issue 13's measuring harness) still runs end to end and prints figures.

Only the tool is checked here, never the victim: these figures must come out the same
way whether the estate under attack is vulnerable or fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "attack.py"


def run_tool(*args: str, timeout: float = 120) -> dict[str, Any]:
    result = subprocess.run([sys.executable, str(TOOL), "--tree", str(ROOT), "--json", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    figures: dict[str, Any] = json.loads(lines[0])
    assert figures["attack"] == args[0]
    assert figures["tree"] == str(ROOT)
    return figures


def is_figure(value: object) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def test_reflect_reports_answer_bytes_per_attacker_byte_for_each_case() -> None:
    figures = run_tool("reflect", "--seconds", "1.5")
    cases = ["auto_never_request", "auto_once_request", "auto_once_request_and_ack"]
    for case in cases:
        row = figures[case]
        assert row["attacker_bytes"] > 0
        assert row["answer_bytes"] >= 0
        assert is_figure(row["ratio"])
        assert isinstance(row["by_kind"], dict)


def test_flood_reports_ping_figures_and_the_garbage_sent() -> None:
    figures = run_tool("flood", "--seconds", "1.5", "--rate", "2000", "--ping-count", "10")
    assert figures["garbage_datagrams"] > 0
    assert figures["garbage_bytes"] > 0
    assert is_figure(figures["answer_bytes_per_attacker_byte"])
    assert is_figure(figures["victim_cpu_percent"])
    for key in ("ping_p50_quiet_ms", "ping_p50_during_flood_ms"):
        assert key in figures  # a number, or the reason no ping completed
    assert figures["pings_during_flood"]["runs"] >= 1


def test_reassembly_in_fast_mode_seals_its_datagrams_with_the_peer_s_own_link() -> None:
    figures = run_tool("reassembly", "--parts", "d", "--fast-datagrams", "5", "--wait", "0.5")
    assert figures["d_fast"]["datagrams"] == 5
