"""EstateBus: which road remotes and lane yards become links, and who may speak as whom."""

from __future__ import annotations

from lane import events as lane_events
from raetlike.bus import BusMessage, BusNode, MessageType, encode
from raetlike.hosting import EstateBus
from road import events as road_events
from road.stack import LocalEstate, RoadStack
from tests.lanekit import LaneNet


def request(target: str) -> dict[str, object]:
    return encode(BusMessage(MessageType.REQUEST, "echo.ping", 1, matchtag=1, sequence=1,
                             target=target))


def leaf() -> tuple[EstateBus, RoadStack]:
    """A minion estate 'leaf' that knows the main estate 'hub', with a manor lane."""
    road = RoadStack(LocalEstate("leaf"))
    road.add_remote(("127.0.0.1", 9), name="hub")
    road.join(name="hub")  # we asked: it is our main (Remote.sought)
    road.remote("hub").main = True
    lane = LaneNet().yard("main", main=True)
    node = BusNode("leaf")
    node.serve("echo.", lambda r: r.payload)
    return EstateBus(node, road, lane), road


def test_an_allowed_main_remote_becomes_the_upstream_and_a_yard_a_link_on_its_first_message(
        ) -> None:
    bus, _road = leaf()
    assert not bus.handle_road_event(road_events.Allowed("hub", session_id=1), 0.0)
    assert bus.node.upstream == "hub"
    taken = bus.handle_lane_event(lane_events.MessageReceived(
        "asker", request("leaf"), yard_session="s", pages=1), 0.0)
    assert taken
    assert sorted(bus.node.links) == ["asker", "hub"]
    assert bus.node.stats.handled == 1


def test_a_yard_named_like_a_remote_estate_is_dropped_not_taken_for_it() -> None:
    bus, _road = leaf()
    bus.handle_road_event(road_events.Allowed("hub", session_id=1), 0.0)
    taken = bus.handle_lane_event(lane_events.MessageReceived(
        "hub", request("leaf"), yard_session="s", pages=1), 0.0)
    assert taken
    assert bus.refused == 1
    assert bus.node.stats.received == 0
    assert bus.node.stats.handled == 0


def test_a_remote_named_like_a_linked_yard_is_dropped_too() -> None:
    bus, road = leaf()
    bus.handle_lane_event(lane_events.MessageReceived(
        "worker", request("leaf"), yard_session="s", pages=1), 0.0)
    road.add_remote(("127.0.0.1", 10), name="worker")
    taken = bus.handle_road_event(road_events.MessageReceived(
        "worker", request("leaf"), session_id=1, transaction_id=1, segments=1), 0.0)
    assert taken
    assert bus.refused == 1
    assert bus.node.stats.handled == 1  # only the yard's request


def test_non_bus_events_are_left_to_the_estate() -> None:
    bus, _road = leaf()
    assert not bus.handle_road_event(road_events.MessageReceived(
        "hub", {"plain": 1}, session_id=1, transaction_id=1, segments=1), 0.0)
    assert not bus.handle_lane_event(lane_events.MessageReceived(
        "asker", {"plain": 1}, yard_session="s", pages=1), 0.0)
    assert bus.node.links == []
