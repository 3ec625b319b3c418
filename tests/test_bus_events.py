"""Bus events: published through main, delivered by topic prefix, with per-publisher numbers."""

from __future__ import annotations

from raetlike.bus import BusMessage, EventGap, MessageType, encode
from tests.buskit import make_bus


def test_events_reach_exactly_the_subscribers_whose_prefix_matches() -> None:
    bus = make_bus(("alpha", "beta", "gamma"))
    kvs: list[BusMessage] = []
    jobs: list[BusMessage] = []
    on_main: list[BusMessage] = []
    bus.nodes["alpha"].subscribe("kvs.", kvs.append, now=bus.net.now)
    bus.nodes["beta"].subscribe("job.", jobs.append, now=bus.net.now)
    bus.nodes["main"].subscribe("", on_main.append, now=bus.net.now)
    bus.net.run_for(1.0)
    bus.nodes["main"].publish("kvs.put", {"key": "a"}, now=bus.net.now)
    bus.nodes["gamma"].publish("job.done", 7, now=bus.net.now)
    bus.nodes["beta"].publish("log.line", "x", now=bus.net.now)
    bus.net.run_for(1.0)
    assert [(e.topic, e.payload, e.userid) for e in kvs] == [("kvs.put", {"key": "a"}, "main")]
    assert [(e.topic, e.payload, e.userid) for e in jobs] == [("job.done", 7, "gamma")]
    assert sorted(e.topic for e in on_main) == ["job.done", "kvs.put", "log.line"]
    # main forwards only what a link subscribed to
    assert bus.nodes["gamma"].stats.events_delivered == 0


def test_a_publisher_subscribed_to_its_own_topic_gets_the_event_back_through_main() -> None:
    bus = make_bus()
    got: list[BusMessage] = []
    bus.nodes["alpha"].subscribe("heartbeat", got.append, now=bus.net.now)
    bus.net.run_for(1.0)
    bus.nodes["alpha"].publish("heartbeat", 1, now=bus.net.now)
    assert got == []  # not delivered locally before main has seen it
    bus.run_until(lambda: bool(got))
    assert got[0].sequence == 1


def test_unsubscribing_stops_delivery_below_main() -> None:
    bus = make_bus()
    got: list[BusMessage] = []
    bus.nodes["alpha"].subscribe("kvs.", got.append, now=bus.net.now)
    bus.net.run_for(1.0)
    bus.nodes["main"].publish("kvs.put", 1, now=bus.net.now)
    bus.net.run_for(1.0)
    bus.nodes["alpha"].unsubscribe("kvs.", got.append, now=bus.net.now)
    bus.net.run_for(1.0)
    sent_before = bus.nodes["main"].stats.sent
    bus.nodes["main"].publish("kvs.put", 2, now=bus.net.now)
    bus.net.run_for(1.0)
    assert [e.payload for e in got] == [1]
    assert bus.nodes["main"].stats.sent - sent_before <= 2  # keepalives only, no event


def test_a_repeated_event_is_delivered_once_and_a_skipped_number_is_reported() -> None:
    bus = make_bus()
    got: list[BusMessage] = []
    bus.nodes["main"].subscribe("x", got.append, now=bus.net.now)
    for sequence in (1, 1, 3):
        event = BusMessage(MessageType.EVENT, "x.y", sequence, sequence=sequence)
        bus.stacks["alpha"].transmit(encode(event), to="main", now=bus.net.now)
    bus.net.run_for(1.0)
    assert [e.payload for e in got] == [1, 3]
    assert bus.nodes["main"].stats.duplicates == 1
    assert bus.nodes["main"].next_event() == EventGap("alpha", 1)
