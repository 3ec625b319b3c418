"""The LaneStack outbox: gone and busy yards, back-off, YardUnreachable, backpressure."""

from __future__ import annotations

import errno

import pytest

from lane import LaneConfig, events
from raetlike.errors import BackpressureError
from tests.lanekit import LaneNet

CONFIG = LaneConfig(gone_retry=0.1, busy_retry=0.002, max_retry=0.4, unreachable_after=2.0)


def test_a_message_to_a_yard_that_is_gone_waits_and_is_delivered_whole_when_it_returns() -> None:
    net = LaneNet()
    a, b = net.yard("a", config=CONFIG), net.yard("b")
    net.kill(b)
    a.transmit({"first": "f" * 150_000}, to="b", now=net.now)
    a.transmit({"second": 2}, to="b", now=net.now)
    net.flush()
    assert net.refusals[0] == (b.path, errno.ECONNREFUSED)
    assert a.get_timer() == pytest.approx(0.1)
    # the back-off doubles up to max_retry while the yard stays gone
    retries = []
    while net.now <= 1.5:
        before, at = len(net.refusals), net.now
        net.step(1.0)
        if len(net.refusals) > before:
            retries.append(at)
    assert retries[:5] == pytest.approx([0.1, 0.3, 0.7, 1.1, 1.5])
    b2 = net.yard("b")
    net.run_until(lambda: len(net.received(b2)) == 2, timeout=1.0)
    assert [sorted(m.body) for m in net.received(b2)] == [["first"], ["second"]]
    assert a.stats.messages_sent == 2
    assert a.stats.retries >= 5
    assert a.yards["b"].failing_since is None
    assert net.of_type(a, events.YardUnreachable) == []


def test_a_yard_that_stays_gone_hands_back_every_undelivered_message() -> None:
    net = LaneNet()
    a = net.yard("a", config=CONFIG)
    first = a.transmit({"n": 1}, to="nobody")
    second = a.transmit({"n": 2, "pad": "x" * 100_000}, to="nobody")
    net.run_until(lambda: bool(net.of_type(a, events.YardUnreachable)), timeout=5.0)
    [gone] = net.of_type(a, events.YardUnreachable)
    assert gone.yard == "nobody"
    assert gone.message_ids == (first, second)
    assert [m["n"] for m in gone.messages] == [1, 2]
    assert gone.reason == "No such file or directory"
    assert 2.0 <= net.now <= 2.0 + CONFIG.max_retry + 0.01
    assert a.stats.messages_undelivered == 2
    assert a.get_timer() is None
    assert net.refusals[0][1] == errno.ENOENT


def test_a_busy_yard_gets_the_rest_of_a_book_after_a_short_back_off() -> None:
    net = LaneNet()
    a, b = net.yard("a", config=CONFIG), net.yard("b")
    net.capacity[b.path] = 3
    message = {"pad": "b" * 600_000}
    a.transmit(message, to="b", now=net.now)
    a.transmit({"after": True}, to="b", now=net.now)
    net.run_until(lambda: len(net.received(b)) == 2, timeout=1.0)
    assert [m.body for m in net.received(b)] == [message, {"after": True}]
    assert {error for _, error in net.refusals} == {errno.EAGAIN}
    assert b.stats.binder.missed_first_page == 0
    assert net.now < 0.05  # the yard kept taking pages: the back-off never grew


def test_a_main_yard_hands_back_the_count_of_routed_pages_it_could_not_deliver() -> None:
    net = LaneNet()
    main = net.yard("main", main=True, config=CONFIG)
    a, b = net.yard("a", config=LaneConfig(main_yard="main")), net.yard("b")
    b.add_yard("a")
    net.kill(b)
    a.transmit({"n": 1}, to="b")
    net.run_until(lambda: bool(net.of_type(main, events.YardUnreachable)), timeout=5.0)
    [gone] = net.of_type(main, events.YardUnreachable)
    assert (gone.yard, gone.messages, gone.forwarded_pages) == ("b", (), 1)
    assert main.stats.forwarded_pages_undelivered == 1


def test_a_full_outbox_is_backpressure_to_the_caller() -> None:
    net = LaneNet()
    a = net.yard("a", config=LaneConfig(outbox_limit=2))
    a.transmit({"n": 1}, to="b")
    a.transmit({"n": 2}, to="b")
    with pytest.raises(BackpressureError, match="outbox to yard b is full"):
        a.transmit({"n": 3}, to="b")
    assert [m.message_id for m in a.yards["b"].outbox] == [1, 2]


def test_closing_hands_back_what_was_not_sent() -> None:
    net = LaneNet()
    a = net.yard("a")
    a.transmit({"n": 1}, to="b")
    a.close(now=net.now)
    [gone] = net.of_type(a, events.YardUnreachable)
    assert (gone.messages, gone.reason) == (({"n": 1},), "stack closed")
