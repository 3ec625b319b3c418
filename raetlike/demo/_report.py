"""What the demo shows: progress lines (a live status line on a terminal) and the table."""

from __future__ import annotations

from typing import Any, TextIO

__all__ = ["Screen", "table"]


class Screen:
    """Plain lines, or on a terminal also one live status line redrawn in place."""

    def __init__(self, out: TextIO, *, live: bool) -> None:
        self.out = out
        self.live = live
        self.status = ""

    def line(self, text: str) -> None:
        if self.live and self.status:
            self.out.write("\r\033[K")
        self.out.write(text + "\n")
        self.status = ""
        self.out.flush()

    def show(self, status: str) -> None:
        if self.live and status != self.status:
            self.out.write(f"\r\033[K{status}")
            self.out.flush()
            self.status = status


def table(rows: list[dict[str, Any]]) -> str:
    """The traffic rows as a text table, one line each under a header."""
    header = ("kind", "delivered", "failed", "bytes out", "bytes in", "p50 ms", "p99 ms")
    lines = [header]
    lines.extend(
        (row["kind"], f"{row['done']}/{row['expected']}", str(row["failed"]),
                      str(row["bytes_sent"]), str(row["bytes_received"]),
                      "-" if row["p50_ms"] is None else f"{row['p50_ms']:.2f}",
                      "-" if row["p99_ms"] is None else f"{row['p99_ms']:.2f}")
        for row in rows)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [" ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                     for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
            for line in lines]
    return "\n".join(text) + "\n"
