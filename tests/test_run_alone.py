"""Drivers added ``alone``: a round visits only those read, due, handled or touched
(raetlike._run_visits), so many idle stacks on one loop cost nothing a round."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lane import LocalYard, events
from raetlike.run import Loop, TaskBody
from raetlike.wire.kinds import AutoMode
from road import events as road_events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.runkit import MemoryDriver, MemoryNet, VirtualClock, VirtualSelector
from tests.test_run_round import CountingLane

IDLE = 200


class Crowd:
    """Two talking lane yards and ``IDLE`` silent ones, all alone on one virtual-time loop."""

    def __init__(self) -> None:
        self.clock = VirtualClock(start=50.0)
        self.selector = VirtualSelector(self.clock)
        self.loop = Loop(self.clock, self.selector)
        self.net = MemoryNet()
        self.got: list[Any] = []
        self.a = CountingLane(LocalYard("a", "crowd", "/lanes"), now=self.clock())
        self.b = CountingLane(LocalYard("b", "crowd", "/lanes"), now=self.clock())
        self.a_driver = MemoryDriver(self.net, self.a, "a")  # type: ignore[arg-type]
        self.loop.add(self.a_driver, alone=True)
        self.loop.add(MemoryDriver(self.net, self.b, "b"), self.got.append,  # type: ignore[arg-type]
                      alone=True)
        self.idle = [CountingLane(LocalYard(f"i{n}", "crowd", "/lanes"), now=self.clock())
                     for n in range(IDLE)]
        self.idle_drivers = [MemoryDriver(self.net, yard, f"i{n}")  # type: ignore[arg-type]
                             for n, yard in enumerate(self.idle)]
        for driver in self.idle_drivers:
            self.loop.add(driver, alone=True)
        self.a.add_yard("b", path="b")
        self.loop.touch(self.a_driver)

    def received(self) -> list[Any]:
        return [event.body for event in self.got if isinstance(event, events.MessageReceived)]


@pytest.fixture
def crowd() -> Iterator[Crowd]:
    made = Crowd()
    yield made
    made.loop.close()


def test_rounds_of_two_talking_stacks_visit_none_of_the_idle_ones(crowd: Crowd) -> None:
    crowd.loop.run_once(max_wait=0.0)  # every stack is visited once, when added
    asks = [yard.timer_asks for yard in crowd.idle]
    sends = [driver.sends for driver in crowd.idle_drivers]
    for n in range(20):
        crowd.a.transmit({"n": n}, to="b", now=crowd.clock())
        crowd.loop.touch(crowd.a_driver)
        crowd.loop.run_once(max_wait=0.01)
    assert crowd.received() == [{"n": n} for n in range(20)]
    assert [yard.timer_asks for yard in crowd.idle] == asks
    assert [driver.sends for driver in crowd.idle_drivers] == sends


def test_a_command_given_outside_the_loop_goes_out_once_its_driver_is_touched(
        crowd: Crowd) -> None:
    crowd.loop.run_once(max_wait=0.0)
    crowd.a.transmit({"n": "untouched"}, to="b", now=crowd.clock())
    crowd.loop.run_once(max_wait=0.01)
    assert crowd.received() == []  # alone: the loop had no reason to visit a
    crowd.loop.touch(crowd.a_driver)
    crowd.loop.run_once(max_wait=0.01)
    crowd.loop.run_once(max_wait=0.01)
    assert crowd.received() == [{"n": "untouched"}]


def test_touching_a_driver_not_added_alone_is_harmless(crowd: Crowd) -> None:
    other = MemoryDriver(crowd.net, CountingLane(LocalYard("o", "crowd", "/lanes"),
                                                 now=crowd.clock()), "o")  # type: ignore[arg-type]
    crowd.loop.add(other)
    crowd.loop.touch(other)
    crowd.loop.run_once(max_wait=0.0)
    crowd.loop.remove(other)
    crowd.loop.remove(crowd.idle_drivers[0])  # an alone one leaves: never visited again
    crowd.loop.touch(crowd.idle_drivers[0])
    crowd.loop.run_once(max_wait=0.0)


class AlonePair:
    """A main and a minion road estate, both alone, on one virtual-time loop."""

    def __init__(self) -> None:
        self.clock = VirtualClock(start=1000.0)
        self.selector = VirtualSelector(self.clock)
        self.loop = Loop(self.clock, self.selector)
        self.net = MemoryNet()
        self.seen: list[Any] = []
        config = RoadConfig(auto=AutoMode.ALWAYS)
        self.main = RoadStack(LocalEstate("main", main=True), config,
                              MemoryKeep(AutoMode.ALWAYS), now=self.clock())
        self.minion = RoadStack(LocalEstate("minion"), config, MemoryKeep(AutoMode.ALWAYS),
                                now=self.clock())
        self.loop.add(MemoryDriver(self.net, self.main, ("127.0.0.1", 7530)), alone=True)
        self.minion_driver = self.loop.add(
            MemoryDriver(self.net, self.minion, ("127.0.0.1", 7531)), self.seen.append,
            alone=True)


def test_alone_road_estates_join_and_keep_presence_on_their_timers_alone() -> None:
    pair = AlonePair()
    try:
        pair.minion.join(("127.0.0.1", 7530), now=pair.clock())
        pair.loop.touch(pair.minion_driver)
        assert pair.loop.run_until(
            lambda: any(isinstance(e, road_events.Allowed) for e in pair.seen), timeout=30.0)
        rounds = pair.loop.rounds

        def idle() -> TaskBody:
            yield 60.0

        pair.loop.run_task(idle())
        # the same four rounds a second as when every driver is visited every round
        # (test_run_stacks): the heap wakes the loop for each presence check, no more
        assert pair.loop.rounds - rounds == 60 * 4
        assert not any(isinstance(e, road_events.RemoteLost) for e in pair.seen)
        assert pair.main.stats.fast_datagrams_sent >= 60  # the main's checks went, on time
    finally:
        pair.loop.close()


def test_an_alone_driver_removed_after_its_flush_is_never_watched_again(crowd: Crowd) -> None:
    crowd.loop.run_once(max_wait=0.0)
    gone = crowd.idle_drivers[0]

    def touch_it() -> TaskBody:  # a task (or a handler) gives its stack a command
        crowd.loop.touch(gone)
        return
        yield  # a generator

    crowd.loop.spawn(touch_it())
    crowd.loop.run_once(max_wait=0.0)  # flushed at the round's end, watched at the next
    gone.writes_pending = True  # the kernel refused a datagram (EAGAIN)
    crowd.loop.remove(gone)  # between rounds, as run_until's condition may
    crowd.loop.run_once(max_wait=0.0)
    # (epoll.modify of a removed descriptor raises FileNotFoundError out of the round;
    # the virtual selector would take it as registered again)
    assert gone.fileno() not in crowd.selector.keys
    assert all(fd != gone.fileno() for fd, _ in crowd.selector.modified)


class RaisingDriver(MemoryDriver):
    """A driver whose stack raises an event as it is flushed (as a road stack's
    MessageExpired when filling a fast window finds a message past its time)."""

    def send(self, now: float) -> int:
        sent = super().send(now)
        self.stack._events.append(events.YardUnreachable("b", (), (), 0, "flushed"))
        return sent


def test_an_event_raised_while_an_alone_driver_is_flushed_reaches_its_handler_that_round(
        crowd: Crowd) -> None:
    crowd.loop.run_once(max_wait=0.0)
    got: list[Any] = []
    stack = CountingLane(LocalYard("r", "crowd", "/lanes"), now=crowd.clock())
    driver = RaisingDriver(crowd.net, stack, "r")  # type: ignore[arg-type]
    crowd.loop.add(driver, got.append, alone=True)
    crowd.loop.run_once(max_wait=0.0)
    got.clear()

    def command() -> TaskBody:  # a task gives the stack a command: flushed at the round's end
        crowd.loop.touch(driver)
        return
        yield  # a generator

    crowd.loop.spawn(command())
    crowd.loop.run_once(max_wait=0.0)
    # before, it waited in the stack for the driver's next visit: none comes to an idle one
    assert [type(event) for event in got] == [events.YardUnreachable]
