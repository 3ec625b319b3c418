"""The UDP driver sends while it receives: a slow batch never holds back what is ready to go."""

from __future__ import annotations

import socket
import time

from raetlike.udp import Address, UdpDriver


class SlowEcho:
    """A datagram stack that spends ``cost`` seconds on each datagram and answers each one."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.replies: list[tuple[bytes, Address]] = []
        self.flushed_after: list[int] = []  # datagrams received when each flush happened
        self.received = 0
        self.told: list[float] = []  # the times the driver gave, in call order

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        self.told.append(now)
        end = time.perf_counter() + self.cost
        while time.perf_counter() < end:
            pass
        self.received += 1
        self.replies.append((b"ack " + data, source))

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        self.told.append(now)
        self.flushed_after.append(self.received)
        out, self.replies = self.replies, []
        return out

    def get_timer(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass


def _batch(flush_after: float, count: int = 20,
           now: float = 0.0) -> tuple[SlowEcho, list[bytes]]:
    stack = SlowEcho(cost=0.0005)
    driver = UdpDriver(stack, flush_after=flush_after)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.settimeout(1.0)
    try:
        for number in range(count):
            peer.sendto(str(number).encode(), driver.address)
        time.sleep(0.05)  # all of them in the socket buffer: one readiness drains them
        assert driver.receive(now) == count
        driver.send(now)
        answers = [peer.recv(100) for _ in range(count)]
    finally:
        peer.close()
        driver.close()
    return stack, answers


def test_a_slow_batch_flushes_every_millisecond_or_so_not_only_at_its_end() -> None:
    stack, answers = _batch(flush_after=0.001)
    mid_batch = [received for received in stack.flushed_after if 0 < received < 20]
    assert len(mid_batch) >= 3  # 20 x 0.5 ms = 10 ms of receiving, a flush per ~1 ms
    assert answers == [b"ack " + str(number).encode() for number in range(20)]


def test_with_interleaving_off_the_batch_is_answered_only_after_it_ends() -> None:
    stack, answers = _batch(flush_after=0.0)
    assert stack.flushed_after == [20]
    assert len(answers) == 20


def test_the_stack_is_told_the_time_as_it_advances_through_a_slow_batch() -> None:
    stack, _ = _batch(flush_after=0.001, now=100.0)
    during = stack.told[:-1]  # the last is the caller's own send(now)
    assert during == sorted(during)
    assert during[0] == 100.0
    assert 100.0 + 19 * 0.0005 <= during[-1] < 100.0 + 1.0  # 20 datagrams of 0.5 ms each
