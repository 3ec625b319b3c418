"""``raetlike bench``'s scenarios run for real at tiny sizes; goals judged as the issues say."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from raetlike._native import build
from raetlike.bench import format_table, run_bench
from raetlike.bench._common import BenchOptions, CpuMeter, cpu_seconds, pinned, spawn, stop
from raetlike.bench._goals import goals
from raetlike.bench._raet068 import run_plan
from raetlike.bench._raetlike import Client
from raetlike.bench._raw import raw_stream
from raetlike.bench._zmq import measure_zmq

TINY = BenchOptions(quick=True, repeat=1, estates=3, scale=1000, cap=30.0)


def test_a_raw_stream_whose_length_is_not_a_multiple_of_the_ack_interval_ends_at_once() -> None:
    process, line = spawn("from raetlike.bench import serve_udp; serve_udp()")
    try:
        start = time.perf_counter()
        stream = raw_stream(int(line), 1001, 100, window=64, ack_every=32)
        elapsed = time.perf_counter() - start
    finally:
        stop(process)
    assert stream.lost == 0
    assert elapsed < 0.4  # the old scheme waited a 1 s timeout for an ack that never came


def test_pyzmq_with_curve_measures_one_way_round_trips_and_a_big_message() -> None:
    pytest.importorskip("zmq")
    figures = measure_zmq(TINY)
    assert figures["one_way_msgs_per_s"] > 0
    assert 0 < figures["rtt_p50_ms"] <= figures["rtt_p99_ms"]
    assert figures["ten_mb_s"] > 0


def test_raet_0_6_8_main_and_joiner_run_one_way_echo_and_a_big_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the peers' temporary files
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and this process's
    results = run_plan([["one", 5, 128], ["echo", 3, 32], ["big", 20_000]], cap=20.0)
    assert results is not None
    assert [r["step"] for r in results] == ["one", "echo", "big"]
    assert all(r["seconds"] is not None and r["seconds"] > 0 for r in results)
    assert list(tmp_path.iterdir()) == []  # the peers' RAET keeps went with the run


def test_a_message_past_the_cap_is_none_and_its_cell_says_so() -> None:
    process, line = spawn("from raetlike.bench import serve_estate; serve_estate(False)")
    try:
        client = Client(int(line), fast=False)
        seconds = client.big(1_000_000, cap=0.05)  # RAET mode needs far longer than 50 ms
        client.close()
    finally:
        stop(process)
    assert seconds is None
    table = format_table({"raet_mode": {"ten_mb_s": seconds, "cap_s": 0.05}, "repeat": 1})
    assert "10 MB message s" in table
    assert "> 0.05 s" in table


def _result(**figures: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "raw_udp": {"one_way_msgs_per_s": 100_000.0, "rtt_p50_ms": 0.02, "ten_mb_s": 0.004},
        "pyzmq_curve": {"one_way_msgs_per_s": 40_000.0, "rtt_p50_ms": 0.02},
        "fast": {"one_way_msgs_per_s": 50_000.0, "rtt_p50_ms": 0.025, "ten_mb_s": 0.1,
                 "joins": 1000, "joins_s": 3.3},
        "raet_mode": {"one_way_msgs_per_s": 2000.0, "echo_msgs_per_s": 700.0,
                      "joins": 1000, "joins_s": 6.0},
        "raet_0_6_8": {"one_way_msgs_per_s": 250.0, "echo_msgs_per_s": 100.0},
        "repeat": 1,
    }
    base.update(figures)
    return base


def test_each_goal_is_met_or_missed_by_its_bound() -> None:
    judged = {goal.name: goal for goal in goals(_result())}
    assert judged["fast one-way / pyzmq+CURVE one-way"].met is True  # 1.25 >= 1
    assert judged["fast RTT p50 / raw UDP RTT p50"].met is True  # 1.25 <= 1.5
    assert judged["fast 10 MB / raw UDP 10 MB"].met is False  # 25 > 2
    assert judged["fast: N estates join+allow, s"].met is True  # 3.3 < 5
    assert judged["RAET mode: N estates join+allow, s"].met is False  # 6 >= 5
    assert judged["RAET mode one-way / RAET 0.6.8 one-way"].met is True  # 8 >= 8
    assert judged["RAET mode echo / RAET 0.6.8 echo"].met is False  # 7 < 8
    assert judged["RAET mode one-way / RAET 0.6.8 one-way"].value == pytest.approx(8.0)
    assert judged["fast RTT p50 / pyzmq+CURVE RTT p50"].met is False  # 1.25 > 1
    lanes = {goal.name: goal for goal in goals(_result(lanes={"lane_to_zmq": 1.1,
                                                              "pages_ratio": 0.4}))}
    assert lanes["lane batches / pyzmq ipc one-way (median of rounds)"].met is True
    assert lanes["lane pages / raw UXD one-way (median of rounds)"].met is False
    assert judged["lane pages / raw UXD one-way (median of rounds)"].met is None  # not run


def test_a_skipped_scenario_or_too_few_estates_leaves_its_goal_unjudged() -> None:
    result = _result(pyzmq_curve="skipped: pyzmq not installed",
                     fast={"one_way_msgs_per_s": 1.0, "joins": 200, "joins_s": 1.0})
    judged = {goal.name: goal for goal in goals(result)}
    assert judged["fast one-way / pyzmq+CURVE one-way"].met is None
    assert judged["fast: N estates join+allow, s"].met is None
    table = format_table(result)
    assert "pyzmq+CURVE: skipped: pyzmq not installed" in table
    assert "fast one-way / pyzmq+CURVE one-way: - (goal >= 1) not judged" in table
    assert "RAET mode echo / RAET 0.6.8 echo: 7.00 (goal >= 8) MISSED" in table


def test_run_bench_measures_every_scenario_and_reports_goals_in_its_json_mapping() -> None:
    result = run_bench(TINY)
    for scenario in ("raw_udp", "fast", "raet_mode", "raet_0_6_8"):
        assert result[scenario]["one_way_msgs_per_s"] > 0, scenario
    assert result["build"] == build()  # which build of fast mode ran, in the table's footer
    assert format_table(result).endswith(f"road's fast mode ran {build()})")
    assert result["raet_mode"]["joins_s"] is not None
    assert result["raet_mode"]["joins"] == 3
    assert result["raet_mode"]["ten_mb_s"] is not None
    assert result["fast"]["one_way_journal_msgs_per_s"] > 0  # to a main that journals
    assert result["fast"]["one_way_alongside_msgs_per_s"] > 0  # and, alternated, one not
    assert "one_way_journal_msgs_per_s" not in result["raet_mode"]
    for scenario in ("raw_udp", "fast", "raet_mode", "raet_0_6_8"):  # CPU per message, each side
        assert result[scenario]["one_way_cpu_sender_us"] > 0, scenario
        assert result[scenario]["one_way_cpu_receiver_us"] >= 0, scenario
    assert result["fast"]["burst_msgs_per_s"] > 0  # bursts on new links, warm processes
    assert result["fast"]["first_burst_msgs_per_s"] > 0  # and the processes' first
    lanes = result["lanes"]
    for kind in lanes["columns"]:  # raw UXD, pyzmq ipc (if installed), pages, batches
        assert lanes[f"{kind}_per_second"] > 0, kind
    assert {"raw", "pages", "lane"} <= set(lanes["columns"])
    assert "lane one-way msgs/s" in format_table(result)
    assert {goal["name"] for goal in result["goals"]} == {goal.name for goal in goals(result)}
    assert all(goal["met"] in (True, False, None) for goal in result["goals"])


def test_pinning_puts_the_bench_and_its_peer_on_two_cpus_and_restores_the_affinity() -> None:
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to pin apart")
    with pinned(True) as cpus:
        assert cpus.measuring is not None
        assert cpus.peer is not None
        assert cpus.measuring != cpus.peer
        assert os.sched_getaffinity(0) == {cpus.measuring}
        process, _line = spawn("from raetlike.bench import serve_udp; serve_udp()", cpus.peer)
        try:
            assert os.sched_getaffinity(process.pid) == {cpus.peer}
        finally:
            stop(process)
    assert os.sched_getaffinity(0) == allowed
    with pinned(False) as unpinned:
        assert unpinned.peer is None


@pytest.mark.parametrize("fast", [True, False])
def test_many_estates_from_one_address_join_the_bench_main_past_its_join_burst(
        fast: bool) -> None:
    """The join bench's estates all come from 127.0.0.1: its main must admit more than a
    main's default burst of joins from one address (20), or the figure measures the limit."""
    from raetlike.bench._raetlike import _peer, joins  # noqa: PLC0415
    from road.config import RoadConfig  # noqa: PLC0415

    count = 10 * RoadConfig().join_burst_per_source  # 90 s at the default rate: past the cap
    process, port = _peer(fast, None)
    try:
        seconds = joins(port, count, fast, cap=60.0)
    finally:
        process.kill()
        process.wait(timeout=10)
    assert seconds is not None


def test_the_cpu_meter_reads_both_sides() -> None:
    spin = "import time\nend = time.monotonic() + 5\nwhile time.monotonic() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        meter = CpuMeter(busy.pid)
        with meter.run(1000):
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                pass
        figures = meter.per_message()
    finally:
        busy.kill()
        busy.wait()
    # 0.2 s of spinning over 1,000 messages is 200 us each; a loaded machine gives less
    assert figures["one_way_cpu_sender_us"] > 5
    assert figures["one_way_cpu_receiver_us"] > 5  # the peer spun the whole time
    assert cpu_seconds(2 ** 22 + 12345) is None  # no such process: not readable
