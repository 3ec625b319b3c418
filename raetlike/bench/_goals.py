"""The goals of issues #3 and #8 as ratios of bench figures, each marked met or missed."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JOINS_GOAL_ESTATES", "Goal", "Ratio", "goals", "ratios"]

JOINS_GOAL_ESTATES = 1000


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal: its value, the bound it is held to, and whether it is met (None: not judged)."""

    name: str
    value: float | None
    bound: str
    met: bool | None
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"name": self.name, "value": self.value, "bound": self.bound, "met": self.met,
                "note": self.note}


@dataclass(frozen=True, slots=True)
class Ratio:
    """An informational ratio with no goal attached."""

    name: str
    value: float | None


def _figure(result: Mapping[str, Any], scenario: str, key: str) -> float | None:
    figures = result.get(scenario)
    value = figures.get(key) if isinstance(figures, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "<": operator.lt}


def _judge(name: str, value: float | None, compare: str, bound: float,
           missing: str) -> Goal:
    if value is None:
        return Goal(name, None, f"{compare} {bound:g}", None, missing)
    return Goal(name, value, f"{compare} {bound:g}", _COMPARE[compare](value, bound))


def _joins_goal(result: Mapping[str, Any], scenario: str, label: str) -> Goal:
    name = f"{label}: N estates join+allow, s"
    estates = _figure(result, scenario, "joins")
    seconds = _figure(result, scenario, "joins_s")
    if estates is None:
        return Goal(name, None, "< 5", None, "not measured")
    if seconds is None:
        return Goal(name, None, "< 5", False, f"{estates:,.0f} estates: past the cap")
    if estates < JOINS_GOAL_ESTATES:
        return Goal(name, seconds, "< 5", None,
                    f"{estates:,.0f} estates; judged at {JOINS_GOAL_ESTATES:,} only")
    return _judge(name, seconds, "<", 5.0, "")


def goals(result: Mapping[str, Any]) -> list[Goal]:
    """Every goal the issues state, judged on ``result`` (a :func:`run_bench` mapping)."""
    def figure(scenario: str, key: str) -> float | None:
        return _figure(result, scenario, key)

    zmq_missing = "pyzmq+CURVE not measured"
    legacy_missing = "RAET 0.6.8 not measured"
    return [
        _judge("fast one-way / pyzmq+CURVE one-way",
               _ratio(figure("fast", "one_way_msgs_per_s"),
                      figure("pyzmq_curve", "one_way_msgs_per_s")), ">=", 1.0, zmq_missing),
        _judge("fast RTT p50 / pyzmq+CURVE RTT p50",
               _ratio(figure("fast", "rtt_p50_ms"), figure("pyzmq_curve", "rtt_p50_ms")),
               "<=", 1.0, zmq_missing),
        _judge("fast RTT p50 / raw UDP RTT p50",
               _ratio(figure("fast", "rtt_p50_ms"), figure("raw_udp", "rtt_p50_ms")),
               "<=", 1.5, "missing figure"),
        _judge("fast 10 MB / raw UDP 10 MB",
               _ratio(figure("fast", "ten_mb_s"), figure("raw_udp", "ten_mb_s")),
               "<=", 2.0, "missing figure"),
        _judge("fast one-way, main journaling / not journaling (runs alternated)",
               _ratio(figure("fast", "one_way_journal_msgs_per_s"),
                      figure("fast", "one_way_alongside_msgs_per_s")), ">=", 0.9,
               "missing figure"),
        _judge("fast one-way, sender durable (fsync 10 ms) / in memory (runs alternated)",
               _ratio(figure("fast", "one_way_durable_sender_msgs_per_s"),
                      figure("fast", "one_way_durable_alongside_msgs_per_s")), ">=", 0.5,
               "missing figure"),
        _judge("fast one-way, both ends durable (fsync 10 ms) / in memory (runs alternated)",
               _ratio(figure("fast", "one_way_durable_msgs_per_s"),
                      figure("fast", "one_way_durable_alongside_msgs_per_s")), ">=", 0.5,
               "missing figure"),
        _joins_goal(result, "fast", "fast"),
        _joins_goal(result, "raet_mode", "RAET mode"),
        _judge("RAET mode one-way / RAET 0.6.8 one-way",
               _ratio(figure("raet_mode", "one_way_msgs_per_s"),
                      figure("raet_0_6_8", "one_way_msgs_per_s")), ">=", 8.0, legacy_missing),
        _judge("RAET mode echo / RAET 0.6.8 echo",
               _ratio(figure("raet_mode", "echo_msgs_per_s"),
                      figure("raet_0_6_8", "echo_msgs_per_s")), ">=", 8.0, legacy_missing),
        _judge("lane batches / pyzmq ipc one-way (median of rounds)",
               figure("lanes", "lane_to_zmq"), ">=", 1.0, "lanes or pyzmq not measured"),
        _judge("lane pages / raw UXD one-way (median of rounds)",
               figure("lanes", "pages_ratio"), ">=", 0.5, "lanes not measured"),
    ]


def ratios(result: Mapping[str, Any]) -> list[Ratio]:
    """Ratios shown for context, with no goal."""
    def figure(scenario: str, key: str) -> float | None:
        return _figure(result, scenario, key)

    return [
        Ratio("fast one-way / raw UDP one-way",
              _ratio(figure("fast", "one_way_msgs_per_s"),
                     figure("raw_udp", "one_way_msgs_per_s"))),
        Ratio("fast one-way: a burst of 5,000 on a new link / the stream",
              _ratio(figure("fast", "burst_msgs_per_s"),
                     figure("fast", "one_way_msgs_per_s"))),
        Ratio("fast one-way: the processes' first burst of 5,000 / the stream",
              _ratio(figure("fast", "first_burst_msgs_per_s"),
                     figure("fast", "one_way_msgs_per_s"))),
        Ratio("fast one-way / RAET mode one-way",
              _ratio(figure("fast", "one_way_msgs_per_s"),
                     figure("raet_mode", "one_way_msgs_per_s"))),
        Ratio("fast echo / RAET 0.6.8 echo",
              _ratio(figure("fast", "echo_msgs_per_s"), figure("raet_0_6_8", "echo_msgs_per_s"))),
        Ratio("RAET mode 1 MB / RAET 0.6.8 1 MB (s, lower is better)",
              _ratio(figure("raet_mode", "one_mb_s"), figure("raet_0_6_8", "one_mb_s"))),
    ]
