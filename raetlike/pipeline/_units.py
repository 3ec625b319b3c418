"""Numbers as people read them: counts, bytes, durations, rates, times (pure, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["NONE", "count", "size", "duration_ms", "seconds", "rate", "moment", "flag"]

NONE = "\u2013"  # an en dash: no value


def count(value: float | None) -> str:
    """``1,234,567``; a fraction only where a count has one (an average)."""
    if value is None:
        return NONE
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}"


def size(value: float | None) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``12.3 MiB``."""
    if value is None:
        return NONE
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def duration_ms(value: float | None) -> str:
    """A duration given in milliseconds: ``85 µs``, ``1.24 ms``, ``3.2 s``, ``4 min 5 s``."""
    if value is None:
        return NONE
    ms = float(value)
    if abs(ms) < 1:
        return f"{ms * 1000:.0f} µs"
    if abs(ms) < 1000:
        return f"{ms:.3g} ms" if abs(ms) < 100 else f"{ms:.0f} ms"
    return seconds(ms / 1000)


def seconds(value: float) -> str:
    """A span in seconds: ``0.5 s``, ``42 s``, ``4 min 5 s``, ``2 h 3 min``."""
    if value < 60:
        return f"{value:.3g} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def rate(value: float | None) -> str:
    """Per second: ``850/s``, ``12.5k/s``, ``1.2M/s``."""
    if value is None:
        return NONE
    amount = float(value)
    if abs(amount) >= 1e6:
        return f"{amount / 1e6:.3g}M/s"
    if abs(amount) >= 1e3:
        return f"{amount / 1e3:.3g}k/s"
    return f"{amount:.3g}/s"


def moment(epoch: float | None) -> str:
    """A wall time in UTC: ``2026-11-24 02:11:32 UTC``."""
    if epoch is None:
        return NONE
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def flag(value: object) -> str:
    """A yes/no cell: ``✓`` or ``✗`` (never Python's ``True``)."""
    return "✓" if value else "✗"
