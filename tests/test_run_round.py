"""What one round of the loop does and does not do: timers asked once, interest changed
only on change, no opening flush when no code ran between rounds, the epoll selector."""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lane import LaneStack, LocalYard, events
from raetlike.run import EpollSelector, Loop, TaskBody
from tests.runkit import MemoryDriver, MemoryNet, VirtualClock, VirtualSelector


class CountingLane:
    """A real lane stack, wrapped to count how often the loop asks for its timer (compiled,
    LaneStack cannot be subclassed from Python)."""

    def __init__(self, local: LocalYard, now: float) -> None:
        self.stack = LaneStack(local, now=now)
        self.timer_asks = 0

    def get_timer(self) -> float | None:
        self.timer_asks += 1
        return self.stack.get_timer()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stack, name)


class Pair:
    """Two lane yards on one virtual-time loop over in-memory sockets."""

    def __init__(self) -> None:
        self.clock = VirtualClock(start=50.0)
        self.selector = VirtualSelector(self.clock)
        self.loop = Loop(self.clock, self.selector)
        self.net = MemoryNet()
        self.a = CountingLane(LocalYard("a", "round", "/lanes"), now=self.clock())
        self.b = CountingLane(LocalYard("b", "round", "/lanes"), now=self.clock())
        self.got: list[events.Event] = []
        # a lane's addresses are socket paths: here plain names
        self.a_driver = MemoryDriver(self.net, self.a, "a")  # type: ignore[arg-type]
        self.b_driver = MemoryDriver(self.net, self.b, "b")  # type: ignore[arg-type]
        self.loop.add(self.a_driver)
        self.loop.add(self.b_driver, self.got.append)
        self.a.add_yard("b", path="b")


@pytest.fixture
def pair() -> Iterator[Pair]:
    made = Pair()
    yield made
    made.loop.close()


def test_an_idle_round_asks_each_stack_for_its_timer_once(pair: Pair) -> None:
    for _ in range(10):
        pair.loop.run_once(max_wait=1.0)
    assert pair.a.timer_asks == 10
    assert pair.b.timer_asks == 10
    assert pair.selector.waits == [1.0] * 10  # idle: every round slept its whole wait


def test_a_stack_whose_socket_was_read_is_asked_again_in_that_round(pair: Pair) -> None:
    pair.a.transmit({"n": 1}, to="b", now=pair.clock())
    pair.loop.run_once(max_wait=1.0)  # a sends; b's socket is read in this round
    assert pair.a.timer_asks == 1
    assert pair.b.timer_asks == 2
    assert [type(event) for event in pair.got] == [events.YardAdded, events.MessageReceived]


def test_write_interest_changes_only_when_a_driver_starts_or_stops_waiting_to_write(
        pair: Pair) -> None:
    fd = pair.a_driver.fileno()
    for _ in range(3):
        pair.loop.run_once(max_wait=0.1)
    assert pair.selector.modified == []
    pair.a_driver.writes_pending = True
    for _ in range(3):
        pair.loop.run_once(max_wait=0.1)
    assert pair.selector.modified == [(fd, selectors.EVENT_READ | selectors.EVENT_WRITE)]
    pair.a_driver.writes_pending = False
    for _ in range(3):
        pair.loop.run_once(max_wait=0.1)
    assert pair.selector.modified[1:] == [(fd, selectors.EVENT_READ)]


def test_run_once_flushes_before_and_after_but_run_task_only_once_before_its_first_round(
        pair: Pair) -> None:
    pair.loop.run_once(max_wait=0.1)
    assert pair.a_driver.sends == 2  # commands may have come between rounds

    def three_rounds() -> TaskBody:
        for _ in range(3):
            yield None

    rounds = pair.loop.rounds
    pair.loop.run_task(three_rounds())
    ran = pair.loop.rounds - rounds
    assert pair.a_driver.sends - 2 == ran + 1


def test_a_message_given_inside_a_task_still_goes_out_in_that_round(pair: Pair) -> None:
    def sender() -> TaskBody:
        pair.a.transmit({"from": "task"}, to="b", now=pair.clock())
        yield None

    def one_round() -> TaskBody:
        yield None

    pair.loop.run_task(sender())
    pair.loop.run_task(one_round())  # b reads what the task's round sent
    bodies = [event.body for event in pair.got if isinstance(event, events.MessageReceived)]
    assert bodies == [{"from": "task"}]


@pytest.fixture
def sockets() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    yield left, right
    left.close()
    right.close()


def test_the_epoll_selector_hands_back_the_data_of_ready_descriptors(
        sockets: tuple[socket.socket, socket.socket]) -> None:
    left, right = sockets
    selector = EpollSelector()
    try:
        selector.register(right.fileno(), selectors.EVENT_READ, "right")
        assert selector.ready(0.0) == []
        left.send(b"x")
        assert selector.ready(1.0) == ["right"]
        selector.modify(right.fileno(), selectors.EVENT_READ | selectors.EVENT_WRITE, "both")
        assert [key.data for key, _ in selector.select(0.0)] == ["both"]
        assert selector.unregister(right.fileno()) == "both"
        assert selector.ready(0.0) == []
    finally:
        selector.close()


def test_the_epoll_selector_waits_out_a_sub_millisecond_timeout_instead_of_polling() -> None:
    selector = EpollSelector()
    try:
        began = time.perf_counter()
        for _ in range(5):
            assert selector.ready(0.0002) == []
        assert time.perf_counter() - began >= 5 * 0.0002
    finally:
        selector.close()


def test_a_real_loop_round_with_nothing_to_do_sleeps_its_wait() -> None:
    loop = Loop()
    try:
        assert isinstance(loop._selector, EpollSelector)  # the default on Linux
        began = time.perf_counter()
        loop.run_once(max_wait=0.05)
        assert time.perf_counter() - began >= 0.05
    finally:
        loop.close()
