"""The metrics endpoint's bounds, with real sockets on loopback: at most
METRICS_MAX_CONNECTIONS at once (more closed at once and counted), and each connection
has METRICS_TIMEOUT seconds for its whole request, however it trickles in."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from raetlike.metrics import (
    METRICS_MAX_CONNECTIONS,
    METRICS_PER_ADDRESS,
    METRICS_TIMEOUT,
    MetricsServer,
    Watch,
    serve_metrics,
)

DEADLINE = 20.0
HALF_REQUEST = b"GET /metrics HTTP/1.1\r\n"  # the headers never end


def _until(condition: Callable[[], bool], what: str, within: float = DEADLINE) -> float:
    """Seconds until ``condition()`` held; AssertionError after ``within``."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if condition():
            return time.monotonic() - start
        time.sleep(0.01)
    raise AssertionError(f"not within {within} s: {what}")


def _closed_by_peer(sock: socket.socket, within: float) -> float:
    """Seconds until the server closed ``sock`` (EOF or reset); AssertionError after ``within``."""
    start = time.monotonic()
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"still open after {within} s") from None
    return time.monotonic() - start


def _scrape(host: str, port: int) -> bytes:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=DEADLINE) as answer:
        body: bytes = answer.read()
        return body


def _page(host: str, port: int) -> dict[str, float]:
    """A scrape's samples by name: with a Watch of no stacks, the endpoint's own counters
    (``raetlike_metrics_connections_refused_total``, ``_timed_out_total``, ``_failed_total``)
    and nothing else."""
    samples = {}
    for line in _scrape(host, port).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name.removeprefix("raetlike_metrics_connections_")] = float(value)
    return samples


def _idle(host: str, port: int, count: int, *, sources: int = 1,
          first: int = 1) -> list[socket.socket]:
    """``count`` connections that send half a request, from ``sources`` loopback addresses
    in turn (127.0.0.FIRST, ...)."""
    sockets = []
    for n in range(count):
        source = (f"127.0.0.{first + n % sources}", 0)
        sock = socket.create_connection((host, port), timeout=DEADLINE, source_address=source)
        sock.sendall(HALF_REQUEST)
        sockets.append(sock)
    return sockets


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[tuple[MetricsServer, str, int]]:
    options = getattr(request, "param", {})
    server, (host, port) = serve_metrics(("127.0.0.1", 0), Watch(), **options)
    yield server, host, port
    server.shutdown()
    server.server_close()


def test_connections_beyond_the_bound_are_closed_at_once_and_counted(
        served: tuple[MetricsServer, str, int]) -> None:
    server, host, port = served
    threads = threading.active_count()
    held = _idle(host, port, METRICS_MAX_CONNECTIONS, sources=METRICS_MAX_CONNECTIONS, first=10)
    _until(lambda: server.busy() == METRICS_MAX_CONNECTIONS, "every slot taken")
    extra = _idle(host, port, 5, sources=5, first=40)
    for sock in extra:
        assert _closed_by_peer(sock, within=METRICS_TIMEOUT / 2) < METRICS_TIMEOUT / 2
    assert server.refused == 5
    assert server.busy() == METRICS_MAX_CONNECTIONS
    assert threading.active_count() <= threads + METRICS_MAX_CONNECTIONS
    for sock in held + extra:
        sock.close()
    _until(lambda: server.busy() == 0, "the slots freed")
    page = _page(host, port)  # a Watch with no stacks: the endpoint's counters alone
    assert set(page) == {"refused_total", "timed_out_total", "failed_total"}
    assert page["refused_total"] == 5


@pytest.mark.parametrize("served", [{"max_connections": 4, "timeout": 0.5}], indirect=True)
def test_an_idle_connection_is_closed_after_the_timeout(
        served: tuple[MetricsServer, str, int]) -> None:
    server, host, port = served
    fds = len(os.listdir("/proc/self/fd"))
    held = _idle(host, port, 4)
    for sock in held:
        assert _closed_by_peer(sock, within=DEADLINE) < DEADLINE
        sock.close()
    _until(lambda: server.timed_out == 4 and server.busy() == 0, "all four timed out")
    assert server.refused == 0
    _until(lambda: len(os.listdir("/proc/self/fd")) <= fds, "the server's sockets closed")
    page = _page(host, port)
    assert (page["timed_out_total"], page["refused_total"]) == (4, 0)


@pytest.mark.parametrize("served", [{"max_connections": 2, "timeout": 1.0}], indirect=True)
def test_a_request_trickling_in_is_cut_off_at_the_deadline_not_kept_alive(
        served: tuple[MetricsServer, str, int]) -> None:
    server, host, port = served
    sock = socket.create_connection((host, port), timeout=DEADLINE)
    sock.sendall(HALF_REQUEST)
    start = time.monotonic()
    cut = False
    while time.monotonic() - start < DEADLINE:
        try:
            sock.sendall(b"X")  # one header byte every 0.1 s: never idle for a whole timeout
        except OSError:
            cut = True
            break
        sock.settimeout(0.1)
        try:
            if sock.recv(4096) == b"":
                cut = True
                break
        except TimeoutError:
            pass
        except ConnectionResetError:
            cut = True
            break
    elapsed = time.monotonic() - start
    sock.close()
    assert cut
    assert elapsed < 1.0 + 2.0  # the deadline counts from the accept, not from the last byte
    _until(lambda: server.timed_out == 1 and server.busy() == 0, "the trickle counted")


def test_garbage_and_resets_are_counted_never_printed(
        served: tuple[MetricsServer, str, int], capfd: pytest.CaptureFixture[str]) -> None:
    server, host, port = served
    for _ in range(5):
        sock = socket.create_connection((host, port), timeout=DEADLINE)
        sock.sendall(b"\x00\xff garbage\r\n\r\n")
        _closed_by_peer(sock, within=DEADLINE)
        sock.close()
    for _ in range(5):  # a reset in the middle of the request
        sock = socket.create_connection((host, port), timeout=DEADLINE)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    _until(lambda: server.busy() == 0, "every connection done")
    page = _page(host, port)
    assert (page["refused_total"], page["failed_total"]) == (0, server.failed)
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out
    assert "Exception occurred" not in err + out


class _BigPage(Watch):
    """A page of some megabytes, more than the loopback buffers hold."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("big", "a big page", labels=["n"])
        for n in range(200_000):
            family.add_metric([str(n)], n)
        yield family


def test_a_client_that_never_reads_the_answer_is_cut_off_and_counted_not_printed(
        capfd: pytest.CaptureFixture[str]) -> None:
    server, (host, port) = serve_metrics(("127.0.0.1", 0), _BigPage(), timeout=0.5)
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, port))
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")  # a whole request; then no reading
        _until(lambda: server.busy() == 1, "the request taken")
        _until(lambda: server.busy() == 0, "the answer given up")
        assert server.timed_out == 1
        sock.close()
    finally:
        server.shutdown()
        server.server_close()
    out, err = capfd.readouterr()
    assert "Traceback" not in err + out


def test_one_address_holds_at_most_its_share_and_a_scrape_from_another_gets_through(
        served: tuple[MetricsServer, str, int]) -> None:
    server, host, port = served
    held = _idle(host, port, METRICS_PER_ADDRESS, first=2)  # all from 127.0.0.2
    _until(lambda: server.busy() == METRICS_PER_ADDRESS, "its share taken")
    [extra] = _idle(host, port, 1, first=2)
    assert _closed_by_peer(extra, within=METRICS_TIMEOUT / 2) < METRICS_TIMEOUT / 2
    assert server.refused == 1
    assert _page(host, port)["refused_total"] == 1  # from 127.0.0.1, while 127.0.0.2 idles
    for sock in [*held, extra]:
        sock.close()
    _until(lambda: server.busy() == 0, "the slots freed")
    assert server._by_address == {}  # nothing left counted against an address
