"""``raetlike chaos`` between real processes on 127.0.0.1: estate <-> chaos <-> ping."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raetlike.run import Loop
from raetlike.udp import UdpDriver, parse_host_port
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from road.stats import Drop

ROOT = Path(__file__).resolve().parent.parent
START = 10.0  # seconds a process gets to print its address
DAMAGE = (Drop.MALFORMED, Drop.BAD_SIGNATURE, Drop.BAD_COAT, Drop.BAD_BODY,
          Drop.UNKNOWN_REMOTE, Drop.STALE_KEY, Drop.REPLAYED)
"""Why a stack drops a datagram with flipped bits (one it can tell is damaged).

In fast mode a flipped bit in the frame header lands on the receiver id, the
key id or the packet number, and is dropped for that reason."""


def _raetlike(*args: str) -> list[str]:
    return [sys.executable, "-m", "raetlike", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Process:
    """A ``raetlike`` process whose first stdout line names its address; SIGTERM stops it."""

    def __init__(self, log: Path, prefix: str, *args: str) -> None:
        self.log = log
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(_raetlike(*args), stdout=subprocess.PIPE,
                                            stderr=stderr, env=_env(), cwd=ROOT)
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            assert selector.select(START), f"no address line: {log.read_text()}"
        self.first_line = self.process.stdout.readline().decode().strip()
        assert self.first_line.startswith(prefix), (self.first_line, log.read_text())
        self.address = self.first_line.removeprefix(prefix).split()[0]

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> tuple[int, str]:
        """Signal it, wait; (exit status, the rest of stdout)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        out, _ = self.process.communicate(timeout=10)
        return self.process.returncode, out.decode()


class Chaos(Process):
    """An ``raetlike chaos`` process on port 0 in front of ``forward``."""

    def __init__(self, log: Path, forward: str, *impairments: str) -> None:
        super().__init__(log, "chaos listening on ", "chaos", "--listen", "127.0.0.1:0",
                         "--forward", forward, *impairments)

    def counters(self, sig: signal.Signals = signal.SIGTERM) -> dict[str, dict[str, int]]:
        """Stop it; the counters from its last stdout line."""
        code, out = self.stop(sig)
        assert code == 0, self.log.read_text()
        lines = out.strip().splitlines()
        assert lines[0].startswith("upstream: received "), out
        assert lines[1].startswith("downstream: received "), out
        counters: dict[str, dict[str, int]] = json.loads(lines[-1])
        return counters


@pytest.fixture(scope="module")
def echo_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    base = tmp_path_factory.mktemp("chaos")
    estate = Process(base / "main.log", "estate main listening on ", "estate", "main",
                     "--host", "127.0.0.1", "--port", "0", "--main", "--echo",
                     "--auto", "once", "--keep", str(base / "keep"))
    yield estate
    code, _ = estate.stop()
    assert code == 0, estate.log.read_text()


def _ping(address: str, count: int, timeout: float = 12.0, window: int = 16) -> dict[str, Any]:
    result = subprocess.run(
        _raetlike("-q", "ping", address, "--count", str(count), "--size", "64", "--json",
                  "--timeout", str(timeout), "--window", str(window)),
        capture_output=True, text=True, timeout=timeout + 10, env=_env(), cwd=ROOT, check=False)
    assert result.returncode == 0, (result.stdout, result.stderr)
    figures: dict[str, Any] = json.loads(result.stdout)
    return figures


def test_chaos_prints_its_bound_address_first_and_relays_both_ways(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as far, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        far.bind(("127.0.0.1", 0))
        far.settimeout(5)
        client.settimeout(5)
        chaos = Chaos(tmp_path / "chaos.log", f"127.0.0.1:{far.getsockname()[1]}")
        host, port = parse_host_port(chaos.address)
        assert host == "127.0.0.1"
        assert port != 0
        for index in range(20):
            client.sendto(b"ping %d" % index, (host, port))
            data, relay_side = far.recvfrom(100)
            assert data == b"ping %d" % index
            far.sendto(b"pong %d" % index, relay_side)
            assert client.recvfrom(100) == (b"pong %d" % index, (host, port))
        counters = chaos.counters(signal.SIGINT)
    assert counters["upstream"]["received"] == counters["upstream"]["forwarded"] == 20
    assert counters["downstream"]["received"] == counters["downstream"]["forwarded"] == 20
    assert counters["upstream"]["lost"] == counters["downstream"]["lost"] == 0


def test_each_client_gets_its_own_upstream_socket(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as far, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as first, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as second:
        far.bind(("127.0.0.1", 0))
        for sock in (far, first, second):
            sock.settimeout(5)
        chaos = Chaos(tmp_path / "chaos.log", f"127.0.0.1:{far.getsockname()[1]}")
        relay = parse_host_port(chaos.address)
        first.sendto(b"from first", relay)
        data_1, side_1 = far.recvfrom(100)
        second.sendto(b"from second", relay)
        data_2, side_2 = far.recvfrom(100)
        assert (data_1, data_2) == (b"from first", b"from second")
        assert side_1 != side_2
        far.sendto(b"to second", side_2)
        far.sendto(b"to first", side_1)
        assert second.recvfrom(100)[0] == b"to second"
        assert first.recvfrom(100)[0] == b"to first"
        chaos.counters()


@pytest.mark.parametrize(("impairment", "counter"), [
    ("--loss", "lost"), ("--duplicate", "duplicated"), ("--reorder", "reordered"),
])
def test_every_echo_comes_back_through_5_percent_impairment(
        echo_main: Process, tmp_path: Path, impairment: str, counter: str) -> None:
    chaos = Chaos(tmp_path / "chaos.log", echo_main.address, impairment, "0.05",
                  "--jitter", "1", "--seed", "11")
    # one in flight: fast mode coalesces a window of 16 into ~30 datagrams each way, where
    # 5% sometimes hits none; one at a time puts ~200 each way on the relay
    figures = _ping(chaos.address, count=200, window=1)
    counters = chaos.counters()
    assert figures["echoed"] == 200
    assert counters["upstream"][counter] > 0
    assert counters["downstream"][counter] > 0


def test_corrupted_datagrams_are_dropped_and_counted_by_the_stack_and_all_messages_arrive(
        echo_main: Process, tmp_path: Path) -> None:
    # 20%: fast mode coalesces, so few datagrams come back; some must be damaged
    # while the client still listens (later ones are counted by the relay only)
    chaos = Chaos(tmp_path / "chaos.log", echo_main.address, "--corrupt", "0.2",
                  "--seed", "3")
    stack = RoadStack(LocalEstate("corrupted-client"), RoadConfig(auto=AutoMode.ONCE),
                      keep=MemoryKeep(AutoMode.ONCE), now=time.monotonic())
    loop = Loop()
    loop.add(UdpDriver(stack, "127.0.0.1", 0))
    echoed: set[int] = set()
    allowed: list[str] = []

    def take_events() -> bool:
        """Take the stack's events (always True, to chain in a condition)."""
        while (event := stack.next_event()) is not None:
            if isinstance(event, events.Allowed):
                allowed.append(event.remote)
            elif isinstance(event, events.MessageReceived):
                assert event.body["seq"] not in echoed, "an echo delivered twice"
                echoed.add(event.body["seq"])
        return True

    count = 150
    try:
        stack.join(parse_host_port(chaos.address), now=time.monotonic())
        assert loop.run_until(lambda: take_events() and bool(allowed), timeout=8)
        # in rounds of two, each waiting for its echoes: fast mode coalesces, so one burst
        # of 150 (or rounds of ten) came back in ~20 datagrams, too few for 20% to hit
        # reliably; rounds of two bring back ~140 (0.8^140: never none)
        for start in range(0, count, 2):
            for seq in range(start, start + 2):
                stack.transmit({"seq": seq, "pad": "x" * 64}, to=allowed[0],
                               now=time.monotonic())
            assert loop.run_until(
                lambda end=start + 2: take_events() and len(echoed) == end,  # type: ignore[misc]
                timeout=10)
    finally:
        stack.close(now=time.monotonic())
        loop.close()
    counters = chaos.counters()
    assert echoed == set(range(count))
    assert counters["downstream"]["corrupted"] > 0
    damaged = sum(stack.stats.dropped[reason] for reason in DAMAGE)
    assert 0 < damaged <= counters["downstream"]["corrupted"]


def test_ping_through_corruption_still_gets_every_echo(
        echo_main: Process, tmp_path: Path) -> None:
    chaos = Chaos(tmp_path / "chaos.log", echo_main.address, "--corrupt", "0.05",
                  "--seed", "4")
    # two in flight: fast mode coalesces a window of 16 into ~60 datagrams in all, where
    # 5% sometimes hits none; two at a time puts a few hundred on the relay
    figures = _ping(chaos.address, count=200, window=2)
    counters = chaos.counters()
    assert figures["echoed"] == 200
    assert counters["upstream"]["corrupted"] + counters["downstream"]["corrupted"] > 0


def test_delay_shows_in_the_round_trip(echo_main: Process, tmp_path: Path) -> None:
    chaos = Chaos(tmp_path / "chaos.log", echo_main.address, "--delay", "50")
    figures = _ping(chaos.address, count=5)
    chaos.counters()
    assert figures["rtt_p50_ms"] >= 100  # 50 ms each way


@pytest.mark.parametrize("argument", [
    ("--loss", "1.5"), ("--corrupt", "-0.1"), ("--delay", "-3"), ("--forward", "127.0.0.1:0"),
])
def test_bad_chaos_arguments_are_usage_errors(argument: tuple[str, str]) -> None:
    args = {"--listen": "127.0.0.1:0", "--forward": "127.0.0.1:7530"}
    args[argument[0]] = argument[1]
    result = subprocess.run(_raetlike("chaos", *(x for kv in args.items() for x in kv)),
                            capture_output=True, text=True, timeout=20, env=_env(), cwd=ROOT,
                            check=False)
    assert result.returncode == 2
    assert argument[0] in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
