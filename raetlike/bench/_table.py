"""The bench result as a text table: figures per scenario, goals marked, ratios, notes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raetlike.bench._goals import goals, ratios

__all__ = ["format_table"]

COLUMNS = (("raw_udp", "raw UDP"), ("pyzmq_curve", "pyzmq+CURVE"), ("fast", "fast"),
           ("raet_mode", "RAET mode"), ("raet_0_6_8", "RAET 0.6.8"))
ROWS = (("one-way msgs/s (100 B)", "one_way_msgs_per_s", 0),
        ("  sender CPU us/msg", "one_way_cpu_sender_us", 1),
        ("  receiver CPU us/msg", "one_way_cpu_receiver_us", 1),
        ("  a burst of 5,000, new", "burst_msgs_per_s", 0),
        ("  first, fresh processes", "first_burst_msgs_per_s", 0),
        ("  the main journaling", "one_way_journal_msgs_per_s", 0),
        ("  not, alternated with it", "one_way_alongside_msgs_per_s", 0),
        ("  sender durable, 10 ms", "one_way_durable_sender_msgs_per_s", 0),
        ("  both ends durable, 10 ms", "one_way_durable_msgs_per_s", 0),
        ("  durable, fsync each", "one_way_durable_always_msgs_per_s", 0),
        ("  in memory, alternated", "one_way_durable_alongside_msgs_per_s", 0),
        ("echo msgs/s (window 32)", "echo_msgs_per_s", 0),
        ("RTT p50 ms", "rtt_p50_ms", 3),
        ("RTT p99 ms", "rtt_p99_ms", 3),
        ("1 MB message s", "one_mb_s", 3),
        ("10 MB message s", "ten_mb_s", 3),
        ("N estates join+allow s", "joins_s", 2))
_NAME = 26
_CELL = 13


def _cell(figures: Any, key: str, digits: int) -> str:
    if not isinstance(figures, Mapping) or key not in figures:
        return "-"
    value = figures[key]
    if value is None:  # measured, but it ran past the cap
        return f"> {figures.get('cap_s', 0):g} s"
    return f"{value:,.{digits}f}"


_LANE_COLUMNS = (("raw", "raw UXD"), ("zmq", "pyzmq ipc"), ("pages", "lane pages"),
                 ("lane", "lane batches"))
_LANE_ROWS = (("lane one-way msgs/s", "per_second", 0),
              ("  sender CPU us/msg", "sender_us", 1),
              ("  receiver CPU us/msg", "receiver_us", 1))


def _lane_rows(lanes: Any) -> list[str]:
    """The lanes' figures (UNIX datagram sockets, one host) under their own header."""
    if not isinstance(lanes, Mapping):
        return [f"lanes: {lanes}"] if isinstance(lanes, str) else []
    lines = [f"{'lanes (UXD, 100 B)':{_NAME}}" + "".join(
        f"{title:>{_CELL}}" for _, title in _LANE_COLUMNS)]
    for label, key, digits in _LANE_ROWS:
        cells = [lanes.get(f"{name}_{key}") for name, _ in _LANE_COLUMNS]
        lines.append(f"{label:{_NAME}}" + "".join(
            f"{'-' if value is None else f'{value:,.{digits}f}':>{_CELL}}" for value in cells))
    return lines


def _mark(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "not judged"}[met]


def format_table(result: Mapping[str, Any]) -> str:
    """The figures as a text table, then each goal (met / MISSED), ratios and notes."""
    lines = [f"{'':{_NAME}}" + "".join(f"{title:>{_CELL}}" for _, title in COLUMNS)]
    estates = next((f["joins"] for f in map(result.get, ("fast", "raet_mode"))
                    if isinstance(f, Mapping) and "joins" in f), None)
    for label, key, digits in ROWS:
        shown = f"{estates:,} estates join+allow s" if key == "joins_s" and estates else label
        lines.append(f"{shown:{_NAME}}" + "".join(
            f"{_cell(result.get(scenario), key, digits):>{_CELL}}" for scenario, _ in COLUMNS))
    lines.extend(_lane_rows(result.get("lanes")))
    lines.append("goals:")
    for goal in goals(result):
        shown = "-" if goal.value is None else f"{goal.value:.2f}"
        note = f"  ({goal.note})" if goal.note else ""
        lines.append(f"  {goal.name}: {shown} (goal {goal.bound}) {_mark(goal.met)}{note}")
    lines.append("ratios:")
    lines.extend(f"  {ratio.name}: {ratio.value:.2f}x" for ratio in ratios(result)
                 if ratio.value is not None)
    notes = [f"  {title}: {result[scenario]}" for scenario, title in COLUMNS
             if isinstance(result.get(scenario), str)]
    for scenario, title in (("raw_udp", "raw UDP"),):
        figures = result.get(scenario)
        if isinstance(figures, Mapping) and (figures.get("one_way_lost") or
                                             figures.get("ten_mb_lost")):
            notes.append(f"  {title}: {figures.get('one_way_lost', 0)} small and "
                         f"{figures.get('ten_mb_lost', 0)} big datagrams lost")
    footer = (f"(median of {result.get('repeat')} runs; road's fast mode ran "
              f"{result.get('build', 'pure Python')})")
    return "\n".join([*lines, *(["notes:", *notes] if notes else []), footer])
