"""Who takes part in the demo: its estates, lanes and yards, by name."""

from __future__ import annotations

__all__ = ["APP_YARD", "ECHO_YARD", "HUB_YARD", "MAIN", "MAIN_LANE", "MINIONS"]

MAIN = "main"
MINIONS = ("minion1", "minion2", "minion3")
MAIN_LANE = "home"
ECHO_YARD = "echo"
APP_YARD = "app"
HUB_YARD = "hub"
