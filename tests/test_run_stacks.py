"""Road stacks and tasks on one loop, on virtual time over in-memory sockets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from raetlike.run import Loop, TaskBody, Until
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.runkit import MemoryDriver, MemoryNet, VirtualClock, VirtualSelector

MAIN = ("127.0.0.1", 7530)
MINION = ("127.0.0.1", 7531)
NOBODY = ("127.0.0.1", 7599)


class Estates:
    """A main and a minion estate serviced by one virtual-time loop."""

    def __init__(self) -> None:
        self.clock = VirtualClock(start=1000.0)
        self.selector = VirtualSelector(self.clock)
        self.loop = Loop(self.clock, self.selector)
        self.net = MemoryNet()
        self.seen: dict[str, list[Any]] = {"main": [], "minion": []}
        config = RoadConfig(auto=AutoMode.ALWAYS)
        self.main = RoadStack(LocalEstate("main", main=True), config,
                              MemoryKeep(AutoMode.ALWAYS), now=self.clock())
        self.minion = RoadStack(LocalEstate("minion"), config,
                                MemoryKeep(AutoMode.ALWAYS), now=self.clock())
        self.loop.add(MemoryDriver(self.net, self.main, MAIN), self.seen["main"].append)
        self.loop.add(MemoryDriver(self.net, self.minion, MINION), self.seen["minion"].append)

    def of(self, who: str, kind: type) -> list[Any]:
        return [event for event in self.seen[who] if isinstance(event, kind)]

    def join(self) -> TaskBody:
        """A task: join main from the minion and wait for the allow."""
        self.minion.join(MAIN, now=self.clock())
        allowed = yield Until(lambda: bool(self.of("minion", events.Allowed)), timeout=30.0)
        return allowed


@pytest.fixture
def estates() -> Iterator[Estates]:
    pair = Estates()
    yield pair
    pair.loop.close()


def test_a_task_joins_and_sends_and_sees_the_ack_on_virtual_time(estates: Estates) -> None:
    def client() -> TaskBody:
        joined = yield from estates.join()
        assert joined
        message_id = estates.minion.transmit({"greeting": "hello"}, to="main")
        sent = yield Until(lambda: any(e.message_id == message_id
                                       for e in estates.of("minion", events.MessageSent)),
                           timeout=10.0)
        return sent

    assert estates.loop.run_task(client(), timeout=60.0) is True
    received = estates.of("main", events.MessageReceived)
    assert [event.body for event in received] == [{"greeting": "hello"}]
    assert estates.clock.now - 1000.0 < 1.0  # instant link: no timer had to fire


def test_a_joined_idle_pair_wakes_only_for_presence_checks(estates: Estates) -> None:
    estates.loop.run_task(estates.join(), timeout=60.0)
    waits_before = len(estates.selector.waits)
    rounds_before = estates.loop.rounds

    def idle() -> TaskBody:
        yield 60.0

    estates.loop.run_task(idle())
    sleeps = estates.selector.waits[waits_before:]
    # Four rounds a second, measured (240 in 60 s): the main's presence check (a fast-link
    # ping, every period of 1 s), the minion reading it and acking at once (a short
    # datagram), the main reading the ack, and the minion's own presence timer, set
    # before the ping came: the ping moved its check 1.5 s on (FastLink._heard does not
    # re-arm the timer, for speed), so the timer finds nothing due and re-arms.  A spin
    # or a timer that fired without re-arming would show as thousands.
    assert estates.loop.rounds - rounds_before <= 60 * 4
    assert sum(sleeps) == pytest.approx(60.0)
    assert min(s for s in sleeps if s > 0) > 0.1
    assert estates.of("minion", events.RemoteLost) == []


def test_shutdown_hands_back_queued_messages_as_message_expired(estates: Estates) -> None:
    estates.loop.run_task(estates.join(), timeout=60.0)
    estates.minion.add_remote(NOBODY, name="nobody")
    first = estates.minion.transmit({"n": 1}, to="nobody")
    second = estates.minion.transmit({"n": 2}, to="nobody")
    estates.loop.run_once(max_wait=0.0)

    report = estates.loop.shutdown()

    assert report.signal is None
    assert [(e.remote, e.message_id, e.body) for e in report.undelivered] == [
        ("nobody", first, {"n": 1}), ("nobody", second, {"n": 2})]
    assert all(isinstance(e, events.MessageExpired) for e in report.undelivered)
    assert report.undelivered[0] in estates.seen["minion"]  # handlers saw them too
    assert estates.main.closed
    assert estates.minion.closed
    assert all(driver.closed for driver in estates.net.drivers.values())


def test_shutdown_closes_waiting_tasks_and_names_them(estates: Estates) -> None:
    cleaned: list[str] = []

    def waiter() -> TaskBody:
        try:
            yield 3600.0
        finally:
            cleaned.append("waiter")

    estates.loop.spawn(waiter(), name="waiter")
    estates.loop.run_once(max_wait=0.0)
    report = estates.loop.shutdown()
    assert report.tasks_unfinished == ("waiter",)
    assert cleaned == ["waiter"]
