"""A process behind on its socket reads before it times anything out (UdpDriver.holds_timers).

A main of 5,000 hot estates on a loaded machine had its 8 MB receive buffer full (tens of
thousands of datagrams dropped) while its timers declared estates lost whose answers sat in
that queue, and sent the redos, probes and signed checks that filled it further
(docs/relay.md).  While a batch ends with datagrams still waiting, the loop leaves the
stack's timers until the socket is drained, but runs them at least every TIMER_HOLD s.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from raetlike.run import Loop
from raetlike.udp import BATCH, TIMER_HOLD, UdpDriver
from tests.test_udp_batch_end import Sink


class Due(Sink):
    """A sink whose timer is always due; counts the times it was let run."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def get_timer(self) -> float | None:
        return 0.0

    def handle_timer(self, _now: float) -> None:
        self.timers += 1


def _queued(driver: UdpDriver, peer: socket.socket, count: int) -> None:
    for number in range(count):
        peer.sendto(b"%d" % number, driver.address)
    deadline = time.monotonic() + 5.0
    stack = driver.stack
    assert isinstance(stack, Due)
    # (loopback queues a datagram as sendto returns; wait for the first all the same)
    while time.monotonic() < deadline:
        try:
            probe = socket.socket(fileno=socket.dup(driver.fileno()))
            try:
                if probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                    return
            finally:
                probe.detach()
        except BlockingIOError:
            time.sleep(0.01)
    raise AssertionError("nothing queued")


@contextlib.contextmanager
def _looped() -> Iterator[tuple[Due, UdpDriver, socket.socket, Loop, list[float]]]:
    """A Due stack's UdpDriver on a loop whose clock is ``now[0]`` (10.0), and a peer."""
    stack = Due()
    driver = UdpDriver(stack)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    now = [10.0]
    loop = Loop(lambda: now[0])
    loop.add(driver)
    try:
        yield stack, driver, peer, loop, now
    finally:
        loop.close()
        peer.close()


def test_a_backlog_holds_the_timers_till_it_is_read_or_for_timer_hold_at_most() -> None:
    with _looped() as (stack, driver, peer, loop, now):
        _queued(driver, peer, 3 * BATCH + 100)
        runs = []
        for at in (10.0, 10.1, 10.2, 10.3):
            now[0] = at
            loop.run_once(max_wait=0.0)
            runs.append(stack.timers)
        assert len(stack.got) == 3 * BATCH + 100
        # the first round's timers run (none ran before), the two behind held, the drained
        # round runs them (was: every round)
        assert runs == [1, 1, 1, 2]
        # a flood that never drains holds them TIMER_HOLD at most
        _queued(driver, peer, 4 * BATCH)
        for at in (20.0, 20.0 + TIMER_HOLD / 2, 20.0 + TIMER_HOLD):
            now[0] = at
            loop.run_once(max_wait=0.0)
            runs.append(stack.timers)
        assert runs[4:] == [3, 3, 4]


def test_a_batch_that_read_the_last_datagram_holds_nothing() -> None:
    """Exactly BATCH datagrams leave the socket empty: no backlog, the timers run (a held
    timer with no read to come spun the loop until TIMER_HOLD passed: 256 garbage
    datagrams a second kept a core busy and the timers at one run a second)."""
    with _looped() as (stack, driver, peer, loop, now):
        _queued(driver, peer, BATCH)
        deadline = time.monotonic() + 5.0
        while len(stack.got) < BATCH:  # (reads the batch; the first round's timers run)
            loop.run_once(max_wait=0.0)
            assert time.monotonic() < deadline
        assert len(stack.got) == BATCH
        runs = stack.timers
        now[0] = 10.1
        loop.run_once(max_wait=0.0)
        assert stack.timers == runs + 1
