"""What the demo counts: per kind of traffic, deliveries, failures, bytes and latencies."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DemoFigures", "Kind", "body_size"]


@dataclass
class Kind:
    """Counters of one kind of traffic."""

    expected: int = 0
    done: int = 0
    failed: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0
    latencies: list[float] = field(default_factory=list)

    def row(self, name: str) -> dict[str, Any]:
        """This kind as a table row."""
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) if ordered else None
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else None
        return {"kind": name, "expected": self.expected, "done": self.done,
                "failed": self.failed, "bytes_sent": self.sent_bytes,
                "bytes_received": self.received_bytes,
                "p50_ms": None if p50 is None else round(p50 * 1000, 2),
                "p99_ms": None if p99 is None else round(p99 * 1000, 2)}


@dataclass
class DemoFigures:
    """What the demo counted."""

    kinds: dict[str, Kind] = field(default_factory=lambda: {
        name: Kind() for name in ("messages", "events", "requests", "surveys")})
    retries: int = 0
    problems: list[str] = field(default_factory=list)

    def complete(self) -> bool:
        """Whether every expected delivery happened."""
        return all(k.done >= k.expected for k in self.kinds.values())

    def progress(self) -> str:
        """One line: done/expected per kind."""
        return "  ".join(f"{name} {k.done}/{k.expected}" for name, k in self.kinds.items())


def body_size(body: Any) -> int:
    """The size of ``body`` as compact JSON, the bytes the figures count."""
    return len(json.dumps(body, separators=(",", ":"), default=str))

