"""The UDP driver ends a batch when the socket is empty, and a datagram of no bytes waits for
the next batch (it reads as "nothing waiting"), never lost and never a busy loop."""

from __future__ import annotations

import socket
import time

from raetlike.udp import Address, UdpDriver


class Sink:
    """A datagram stack that keeps what it is given."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.told: list[float] = []  # the times the driver gave
        self.sources: set[Address] = set()

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        self.got.append(data)
        self.sources.add(source)
        self.told.append(now)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        self.told.append(now)
        return []

    def get_timer(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass


def _driver_and_peer() -> tuple[Sink, UdpDriver, socket.socket]:
    stack = Sink()
    return stack, UdpDriver(stack), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def test_a_batch_reads_every_waiting_datagram_and_an_empty_socket_reads_none() -> None:
    stack, driver, peer = _driver_and_peer()
    try:
        assert driver.receive(0.0) == 0
        for number in range(5):
            peer.sendto(b"d%d" % number, driver.address)
        time.sleep(0.05)
        assert driver.receive(0.0) == 5
        assert driver.receive(0.0) == 0
        assert stack.got == [b"d0", b"d1", b"d2", b"d3", b"d4"]
        assert stack.sources == {("127.0.0.1", peer.getsockname()[1])}  # (host, port)
    finally:
        peer.close()
        driver.close()


def test_a_datagram_of_no_bytes_ends_the_batch_and_the_next_batch_reads_it() -> None:
    stack, driver, peer = _driver_and_peer()
    try:
        for data in (b"first", b"", b"after"):
            peer.sendto(data, driver.address)
        time.sleep(0.05)
        read = 0
        for _ in range(3):  # at most one batch per datagram
            read += driver.receive(0.0)
            if read == 3:
                break
        assert read == 3
        assert stack.got == [b"first", b"", b"after"]
        assert driver.receive(0.0) == 0
    finally:
        peer.close()
        driver.close()
