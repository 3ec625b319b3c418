"""Road: a sans-IO UDP stack of estates (see docs/design.md)."""

from __future__ import annotations

__all__: list[str] = []
