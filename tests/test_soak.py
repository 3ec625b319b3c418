"""A CI-sized soak between two processes (tools/soak.py): every echo exactly once, state bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
GROWTH_KIB = 10_000  # RSS growth allowed over the run: far below 1 kB per message


def soak(messages: int, mode: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "soak.py"), "--messages", str(messages),
         "--mode", mode, "--settle", "0.5", "--timeout", "60", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode in {0, 1}, result.stderr
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.parametrize(("mode", "messages"), [("fast", 5000), ("raet", 1000)])
def test_a_soak_between_two_processes_echoes_every_message_exactly_once_with_state_bounded(
        mode: str, messages: int) -> None:
    figures = soak(messages, mode)
    assert figures["echoed"] == messages
    assert figures["duplicates"] == 0
    assert figures["lost"] == 0
    assert figures["changed"] == 0
    assert figures["foreign"] == 0
    assert figures["expired"] == 0
    assert figures["ok"] is True
    state = figures["client_state_end"]
    assert state["tracked"] == 0
    assert state["outbox"] == 0
    # RAET mode remembers each finished transaction for done_memory (600 s) to drop its
    # late duplicates: at most one entry per message; fast mode keeps none
    assert state["done_transactions"] <= (messages if mode == "raet" else 0)
    for side in ("main", "client"):
        assert figures["rss_kib_end"][side] - figures["rss_kib_start"][side] < GROWTH_KIB
