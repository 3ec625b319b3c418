"""The report's plots, drawn by matplotlib's SVG backend (no display, no files read).

Each function returns an SVG document as text, ready to write to a file or to
put inline in the HTML page.  Text stays text (``svg.fonttype = none``), so
the page is small and selectable.  Every drawn point carries an id
(``rate-point-N``, ``latency-bar-N``, ``quantile-point-N``), so a test in a
real browser can count what was drawn.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, cast

import matplotlib as mpl

mpl.use("svg")  # before pyplot: never a display

from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

from raetlike.pipeline import _units as units

__all__ = ["latency_plot", "quantile_plot", "rate_plot", "time_step"]

_STYLE: Any = {
    "svg.fonttype": "none",
    "svg.hashsalt": "raetlike",  # the same ids for the same data: reproducible files
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_SIZE = (8.0, 3.2)
_TICK_STEPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900,
               1800, 3600, 7200, 10800, 21600, 43200, 86400)
"""Round time steps (seconds) for the rate plot's x ticks: 5 s, 10 min, 1 h, ..."""


def time_step(span: float, most: int = 8) -> float:
    """The smallest round step that puts at most ``most`` ticks on ``span`` seconds."""
    for step in _TICK_STEPS:
        if span / step <= most:
            return step
    return _TICK_STEPS[-1] * (span // (_TICK_STEPS[-1] * most) + 1)


_LINE = "#1f5fa8"
_QUANTILES = (("p50", "#1f5fa8", "o"), ("p90", "#e08a1e", "s"), ("p99", "#b3261e", "D"))
"""How each quantile is drawn in the latency-by-kind and by-pair plots: name, colour, marker."""


def _duration_tick(value: float, _: object) -> str:
    return "0" if value == 0 else units.duration_ms(value)


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # no XML prologue or doctype: it goes inline


def rate_plot(edges: Sequence[float], per_second: Sequence[float], window: float) -> str:
    """Delivered messages per second in each window (``edges``: window starts, epoch s).

    The x axis counts from the first window's start, in round steps of the
    window's unit; the label names that start in UTC.
    """
    with plt.rc_context(cast(Any, _STYLE)):
        figure, axes = plt.subplots(figsize=_SIZE)
        start = edges[0] if edges else 0.0
        offsets = [edge - start + window / 2 for edge in edges]
        if offsets:
            (line,) = axes.plot(offsets, list(per_second), color=_LINE, linewidth=1.5)
            line.set_gid("rate-line")
            for index, (when, value) in enumerate(zip(offsets, per_second, strict=True)):
                point = axes.plot([when], [value], linestyle="none", marker="o", markersize=3.5,
                                  color=_LINE)[0]
                point.set_gid(f"rate-point-{index}")
            end = max(offsets[-1] + window / 2, window)
            axes.set_xlim(0, end)
            axes.xaxis.set_major_locator(MultipleLocator(time_step(end)))
        else:
            axes.text(0.5, 0.5, "no records", ha="center", va="center",
                      transform=axes.transAxes)
        axes.set_ylim(bottom=0)
        axes.xaxis.set_major_formatter(FuncFormatter(lambda v, _: units.seconds(v)))
        axes.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: units.rate(v)))
        axes.set_ylabel("messages delivered per second")
        axes.set_xlabel(f"time since {units.moment(start)}, in {units.seconds(window)} windows"
                        if edges else "time")
        axes.set_title("Delivery rate over time")
        return _svg(figure)


def latency_plot(labels: Sequence[str], counts: Sequence[int]) -> str:
    """Messages per latency bucket (``labels`` name the buckets, in order)."""
    with plt.rc_context(cast(Any, _STYLE)):
        figure, axes = plt.subplots(figsize=_SIZE)
        if labels:
            bars = axes.bar(range(len(labels)), list(counts), color=_LINE, width=0.8)
            for index, bar in enumerate(bars):
                bar.set_gid(f"latency-bar-{index}")
            axes.set_xticks(range(len(labels)), list(labels), rotation=30, ha="right")
        else:
            axes.text(0.5, 0.5, "no timed messages", ha="center", va="center",
                      transform=axes.transAxes)
        axes.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 2.5, 5, 10]))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: units.count(v)))
        axes.set_ylabel("messages")
        axes.set_xlabel("latency (received - sent)")
        axes.set_title("Latency distribution")
        axes.grid(axis="x", visible=False)
        return _svg(figure)


def quantile_plot(title: str, labels: Sequence[str],
                  quantiles: Sequence[tuple[float, float, float]]) -> str:
    """Latency p50, p90 and p99 (ms) of each row (a kind or an estate pair), one row a line.

    The three markers of a row sit on a thin line from p50 to p99, so a long
    tail reads as a long line.
    """
    rows = len(labels)
    with plt.rc_context(cast(Any, _STYLE)):
        figure, axes = plt.subplots(figsize=(_SIZE[0], max(1.6, 0.9 + 0.32 * rows)))
        point = 0
        for row, values in enumerate(quantiles):
            axes.plot([values[0], values[2]], [row, row], color="#999999", linewidth=1,
                      zorder=1)
            for (name, colour, marker), value in zip(_QUANTILES, values, strict=True):
                drawn = axes.plot([value], [row], linestyle="none", marker=marker,
                                  markersize=5, color=colour, label=name if row == 0 else None,
                                  zorder=2)[0]
                drawn.set_gid(f"quantile-point-{point}")
                point += 1
        if rows:
            axes.set_yticks(range(rows), list(labels))
            axes.set_ylim(rows - 0.5, -0.5)  # the first row on top, as in the table
            axes.set_xlim(left=0)
            axes.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3, frameon=False,
                        fontsize=9)
        else:
            axes.text(0.5, 0.5, "no timed messages", ha="center", va="center",
                      transform=axes.transAxes)
        axes.xaxis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]))
        axes.xaxis.set_major_formatter(FuncFormatter(_duration_tick))
        axes.set_xlabel("latency (received - sent)")
        axes.set_title(title, loc="left")
        axes.grid(axis="y", visible=False)
        return _svg(figure)
