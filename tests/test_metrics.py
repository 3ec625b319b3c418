"""Metrics and live stats: per-remote counters in the road stack, Prometheus
metrics served by prometheus_client (--metrics), JSON stats lines
(--stats-every, SIGUSR1)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from raetlike.metrics import Watch, serve_metrics
from raetlike.wire.kinds import PacketKind, TransactionKind
from road import events
from road.stack import RoadStack
from road.stats import Drop, RemoteStats
from tests.roadkit import MAIN, MINION, Pair, allowed_pair, numbered
from tests.test_cli import ROOT, Estate, _env, _raetlike, _run
from tests.test_road_fast import fast_pair

DEADLINE = 20.0


def _remote(stack: RoadStack, name: str) -> RemoteStats:
    (found,) = [r for r in stack.remote_stats() if r.name == name]
    return found


def _exchange(pair: Pair, count: int) -> None:
    for body in numbered(count, 200):
        pair.minion.transmit(body, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == count)


@pytest.mark.parametrize(("make", "mode"), [(allowed_pair, "raet"), (fast_pair, "fast")])
def test_remote_stats_count_traffic_rtt_and_queue_in_both_modes(make: object, mode: str) -> None:
    pair = make()  # type: ignore[operator]
    _exchange(pair, 40)
    main_side = _remote(pair.main, "minion")
    minion_side = _remote(pair.minion, "main")
    assert main_side.mode == minion_side.mode == mode
    assert main_side.allowed
    assert minion_side.allowed
    assert main_side.bytes_in > 40 * 200
    assert minion_side.bytes_out >= main_side.bytes_in  # the link lost nothing
    assert main_side.datagrams_in > 0
    assert main_side.bytes_out > 0
    assert minion_side.rtt is not None
    assert 0 < minion_side.rtt < 1.0
    assert minion_side.queued == 0  # all acknowledged
    assert minion_side.last_heard is not None
    assert 0 <= minion_side.last_heard < 5.0
    assert main_side.dropped == {}
    assert minion_side.address == MAIN


def test_queue_depth_counts_messages_not_yet_acknowledged() -> None:
    pair = allowed_pair()
    for body in numbered(300, 100):
        pair.minion.transmit(body, to="main")
    assert _remote(pair.minion, "main").queued == 300
    pair.run_until(lambda: len(pair.events(MINION, events.MessageSent)) == 300, timeout=120)
    assert _remote(pair.minion, "main").queued == 0


def test_garbage_from_a_remotes_address_is_counted_stack_wide_not_against_the_remote() -> None:
    pair = allowed_pair()
    before = pair.main.stats.dropped[Drop.MALFORMED]
    pair.main.receive_datagram(b"\x00garbage", MINION, pair.net.now)
    assert pair.main.stats.dropped[Drop.MALFORMED] == before + 1
    assert _remote(pair.main, "minion").dropped == {}  # unauthenticated: could be anyone


def test_a_replayed_signed_packet_is_a_drop_against_the_remote_it_proves_to_come_from() -> None:
    pair = allowed_pair()
    _exchange(pair, 3)
    sent = pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, source=MINION)
    assert sent
    for datagram in sent:
        pair.main.receive_datagram(datagram.data, MINION, pair.net.now)
    pair.net.run_for(1.0)
    dropped = _remote(pair.main, "minion").dropped
    assert sum(dropped.values()) >= len(sent), dropped
    assert len(pair.events(MAIN, events.MessageReceived)) == 3


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback only
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _found(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
           **labels: str) -> list[float]:
    return [v for (n, ls), v in samples.items()
            if n == name and all((k, w) in ls for k, w in labels.items())]


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
           **labels: str) -> float:
    found = _found(samples, name, **labels)
    assert found, f"no {name} {labels} in {sorted({n for n, _ in samples})}"
    return sum(found)


def test_prometheus_scrape_reads_the_counters_the_stacks_keep() -> None:
    pair = fast_pair()
    _exchange(pair, 20)
    server, (host, port) = serve_metrics(("127.0.0.1", 0), Watch(road=pair.main))
    try:
        samples = _scrape(f"http://{host}:{port}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    remote = {"estate": "main", "remote": "minion"}
    assert _value(samples, "raetlike_remote_bytes_received_total", **remote) > 20 * 200
    assert _value(samples, "raetlike_remote_mode", **remote, mode="fast") == 1
    assert _value(samples, "raetlike_remote_allowed", **remote) == 1
    assert _value(samples, "raetlike_road_messages_received_total", estate="main") == 20
    assert _value(samples, "raetlike_road_remotes", estate="main") == 1


def test_a_watch_with_no_stacks_yet_scrapes_only_the_endpoint_s_counters() -> None:
    server, (host, port) = serve_metrics(("127.0.0.1", 0), Watch())
    try:
        assert _scrape(f"http://{host}:{port}/metrics") == {
            (f"raetlike_metrics_connections_{name}_total", ()): 0.0
            for name in ("refused", "timed_out", "failed")}
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {DEADLINE} s: {what}")


def _json_lines(log: Path) -> list[dict[str, Any]]:
    """The whole JSON lines written so far (one still being written is left for later)."""
    return [json.loads(text) for text in log.read_text().split("\n")[:-1]
            if text.startswith("{")]


@pytest.fixture
def watched_main(tmp_path: Path) -> Iterator[tuple[Estate, str]]:
    estate = Estate(tmp_path, "main", "--main", "--echo", "--auto", "once",
                    "--keep", str(tmp_path / "keep"), "--metrics", "127.0.0.1:0",
                    "--stats-every", "0.3")
    assert estate.process.stdout is not None
    line = estate.process.stdout.readline().decode().strip()  # printed with the first line
    assert line.startswith("metrics on http://127.0.0.1:"), line
    yield estate, line.removeprefix("metrics on ")
    estate.stop()


def test_a_running_estate_serves_metrics_and_stats_lines(
    watched_main: tuple[Estate, str],
) -> None:
    estate, url = watched_main
    result = _run("ping", estate.address, "--count", "100", "--json", "--timeout", "20")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["echoed"] == 100
    host, _, port = estate.address.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as hostile:
        hostile.sendto(b"\x00not a packet", (host, int(port)))

    def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return _scrape(url)

    # no series for a reason before its first drop: wait for it to appear
    _wait_for(lambda: sum(_found(scraped(), "raetlike_road_dropped_total",
                                 reason="malformed")) >= 1, "the garbage datagram counted")
    samples = scraped()
    received = _value(samples, "raetlike_remote_bytes_received_total", estate="main")
    assert received > 100 * 64
    assert _value(samples, "raetlike_remote_mode", estate="main", mode="fast") >= 1
    assert _value(samples, "raetlike_road_messages_received_total", estate="main") == 100
    assert _value(samples, "raetlike_remote_allowed", estate="main") == 1

    # --stats-every: JSON lines on stderr, with the remote's counters
    def stats_lines() -> list[dict[str, object]]:
        return _json_lines(estate.log)

    _wait_for(lambda: any(line["road"]["messages_received"] == 100  # type: ignore[index]
                          for line in stats_lines()), "a stats line after the ping")
    last = stats_lines()[-1]
    assert last["estate"] == "main"
    (ping_remote,) = last["remotes"]  # type: ignore[misc]
    assert ping_remote["mode"] == "fast"
    assert ping_remote["bytes_in"] > 0


def test_sigusr1_writes_a_stats_line_at_once(tmp_path: Path) -> None:
    estate = Estate(tmp_path, "main", "--main", "--keep", str(tmp_path / "keep"))
    try:
        assert _json_lines(estate.log) == []
        estate.process.send_signal(signal.SIGUSR1)
        _wait_for(lambda: len(_json_lines(estate.log)) == 1, "a stats line after SIGUSR1")
        (line,) = _json_lines(estate.log)
        assert line["estate"] == "main"
        assert line["remotes"] == []
        assert "dropped" in line["road"]
    finally:
        assert estate.stop() == 0


def test_a_yard_serves_lane_metrics(tmp_path: Path) -> None:
    lanes = tmp_path / "lanes"
    lanes.mkdir(mode=0o700)
    process = subprocess.Popen(
        _raetlike("yard", "worker", "--lane", "jobs", "--dir", str(lanes), "--main",
                  "--metrics", "127.0.0.1:0"),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("yard worker listening on "), first
        second = process.stdout.readline().strip()
        assert second.startswith("metrics on http://127.0.0.1:"), second
        samples = _scrape(second.removeprefix("metrics on "))
        assert _value(samples, "raetlike_lane_messages_received_total", yard="worker") == 0
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_metrics_on_an_address_in_use_is_one_line_and_creates_no_keep(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        keep = tmp_path / "keep"
        result = _run("estate", "main", "--main", "--port", "0", "--host", "127.0.0.1",
                      "--keep", str(keep), "--metrics", f"127.0.0.1:{port}")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"raetlike estate: error: --metrics 127.0.0.1:{port}: cannot bind")
    assert not keep.exists()


def test_a_manor_serves_its_road_lane_and_manor_metrics_together(tmp_path: Path) -> None:
    lanes = tmp_path / "lanes"
    estate = Estate(tmp_path, "main", "--main", "--keep", str(tmp_path / "keep"),
                    "--lane", "home", "--dir", str(lanes), "--metrics", "127.0.0.1:0")
    try:
        assert estate.process.stdout is not None
        line = estate.process.stdout.readline().decode().strip()
        assert line.startswith("metrics on http://127.0.0.1:"), line
        samples = _scrape(line.removeprefix("metrics on "))
        assert _value(samples, "raetlike_road_remotes", estate="main") == 0
        assert _value(samples, "raetlike_lane_messages_received_total", yard="main") == 0
        assert _value(samples, "raetlike_manor_received_total", estate="main") == 0
    finally:
        assert estate.stop() == 0
