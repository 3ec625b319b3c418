"""Two small hand-written SVG charts (no plotting library): bars and a line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

__all__ = ["bar_chart", "line_chart"]

WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 32, 56


def _frame(title: str, x_label: str, y_label: str, body: list[str], y_max: float) -> str:
    plot_bottom = HEIGHT - BOTTOM
    ticks = []
    for step in range(5):
        value = y_max * step / 4
        y = plot_bottom - (plot_bottom - TOP) * step / 4
        ticks.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                     'stroke="#ddd"/>')
        ticks.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.4g}</text>')
    return "\n".join([
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">'),
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>',
        *ticks,
        *body,
        (f'<line x1="{LEFT}" y1="{plot_bottom}" x2="{WIDTH - RIGHT}" y2="{plot_bottom}" '
        'stroke="black"/>'),
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{plot_bottom}" stroke="black"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">{escape(x_label)}</text>',
        (f'<text x="14" y="{HEIGHT / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {HEIGHT / 2})">{escape(y_label)}</text>'),
        "</svg>",
    ]) + "\n"


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, x_label: str,
              y_label: str) -> str:
    """Vertical bars, one per label, on a linear axis from 0."""
    y_max = max([*values, 1])
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(values), 1)
    body = []
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        height = plot_height * value / y_max
        x = LEFT + index * slot
        body.append(f'<rect x="{x + slot * 0.1:.1f}" y="{HEIGHT - BOTTOM - height:.1f}" '
                    f'width="{slot * 0.8:.1f}" height="{height:.1f}" fill="#4477aa">'
                    f"<title>{escape(label)}: {value:g}</title></rect>")
        body.append(f'<text x="{x + slot / 2:.1f}" y="{HEIGHT - BOTTOM + 14}" '
                    f'text-anchor="middle" font-size="9">{escape(label)}</text>')
    return _frame(title, x_label, y_label, body, y_max)


def line_chart(points: Sequence[tuple[float, float]], *, title: str, x_label: str,
               y_label: str, x_format: Callable[[float], str] = lambda x: f"{x:g}") -> str:
    """A polyline through ``points`` (x ascending), with the first and last x labelled."""
    y_max = max([y for _, y in points] + [1])
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    body = []
    if points:
        x_low, x_high = points[0][0], points[-1][0]
        span = (x_high - x_low) or 1.0
        coords = " ".join(
            f"{LEFT + plot_width * (x - x_low) / span:.1f},"
            f"{HEIGHT - BOTTOM - plot_height * y / y_max:.1f}" for x, y in points)
        body.append(f'<polyline points="{coords}" fill="none" stroke="#4477aa" '
                    'stroke-width="2"/>')
        body.append(f'<text x="{LEFT}" y="{HEIGHT - BOTTOM + 14}">{escape(x_format(x_low))}</text>')
        body.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - BOTTOM + 14}" text-anchor="end">'
                    f"{escape(x_format(x_high))}</text>")
    return _frame(title, x_label, y_label, body, y_max)
