"""Manor routing, sans-IO: a manor with real stacks, fed lane and road events by hand.

The road stacks' remotes are recorded but not joined, so what the manor
transmits on the road waits in the remote's outbox, where the tests read it;
the lane is a simulated lane (tests/lanekit.py) with real yards behind it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lane import LaneConfig
from lane import events as lane_events
from lane.yard import yard_path
from raetlike.durable import DurableRoad
from raetlike.manor import (
    Delivered,
    Manor,
    Problem,
    Route,
    RouteError,
    Triple,
    Undelivered,
    Via,
    error_body,
    parse_route,
)
from road import events as road_events
from road.stack import LocalEstate, RoadStack
from tests.lanekit import DIRECTORY, LaneNet


def _route(source: list[Any], destination: list[Any]) -> dict[str, Any]:
    return {"src": source, "dst": destination}


class Estate:
    """One estate's manor: a road stack with named remotes and a simulated lane."""

    def __init__(self, name: str, *, main: bool, remotes: dict[str, bool],
                 yards: tuple[str, ...] = ("echo",), lane: str = "moon",
                 lane_config: LaneConfig | None = None) -> None:
        self.net = LaneNet()
        self.road = RoadStack(LocalEstate(name, main=main))
        for port, (remote, is_main) in enumerate(remotes.items(), start=7600):
            record = self.road.add_remote(("127.0.0.1", port), name=remote)
            record.main = record.sought = is_main  # a main remote: the one we joined
        self.lane = self.net.yard("main", lane=lane, main=True, config=lane_config)
        self.yards = {yard: self.net.yard(yard, lane=lane) for yard in yards}
        self.manor = Manor(self.road, self.lane, yard_known=lambda yard: yard_path(
            DIRECTORY, lane, yard) in self.net.stacks)

    def from_yard(self, yard: str, body: Any) -> None:
        self.manor.handle_lane_event(lane_events.MessageReceived(yard, body, "0" * 18, 1), 0.0)

    def from_road(self, remote: str, body: Any) -> None:
        self.manor.handle_road_event(road_events.MessageReceived(remote, body, 1, 1, 1), 0.0)

    def on_road(self, remote: str) -> list[Any]:
        return [outgoing.body for outgoing in self.road.names[remote].outbox]

    def at_yard(self, yard: str) -> list[Any]:
        self.net.settle()
        return [event.body for event in self.net.received(self.yards[yard])]

    def manor_events(self) -> list[Any]:
        return list(iter(self.manor.next_event, None))


@pytest.fixture
def minion() -> Estate:
    return Estate("minion", main=False, remotes={"main": True}, yards=("asker",), lane="sun")


@pytest.fixture
def main() -> Estate:
    return Estate("main", main=True, remotes={"minion": False, "minion2": False})


# -- route parsing --------------------------------------------------------


def test_raet_route_bodies_parse_into_triples() -> None:
    body = {"route": _route(["mayor", "main", None], ["citizen", "other", None]),
            "content": "Hello all yards."}  # RAET 0.6.8's lane page test body
    assert parse_route(body) == Route(Triple("mayor", "main"), Triple("citizen", "other"))


def test_empty_strings_in_a_triple_are_defaults_like_null() -> None:
    assert Triple.parse(["", "", ""]) == Triple() == Triple.parse((None, None, None))


def test_a_body_without_a_route_has_none() -> None:
    assert parse_route({"content": 1}) is None
    assert parse_route(b"raw bytes") is None


@pytest.mark.parametrize("route", [
    "a string",
    {"src": [None, None, None]},
    {"src": [None, None], "dst": [None, None, None]},
    {"src": [None, None, None], "dst": [1, None, None]},
    {"src": "abc", "dst": [None, None, None]},
])
def test_malformed_routes_raise_route_error(route: Any) -> None:
    with pytest.raises(RouteError):
        parse_route({"route": route})


def test_an_error_body_names_the_problem_and_the_failed_route() -> None:
    failed = _route(["a", "b", None], ["c", "d", None])
    body = error_body(Route(Triple("c", "main"), Triple("a", "b")), Problem.UNKNOWN_YARD,
                      "no yard d", failed)
    assert body == {"route": _route(["c", "main", None], ["a", "b", None]),
                    "error": {"reason": "unknown yard", "detail": "no yard d", "route": failed}}


# -- lane to road, road to lane ----------------------------------------------


def test_a_yard_message_for_another_estate_goes_on_the_road_with_its_source_stamped(
        minion: Estate) -> None:
    minion.from_yard("asker", {"route": _route([None, None, "q"], ["main", "echo", "s"]),
                               "n": 1})
    assert minion.on_road("main") == [
        {"route": _route(["minion", "asker", "q"], ["main", "echo", "s"]), "n": 1}]
    assert minion.manor.stats.to_road == 1


def test_a_yard_cannot_claim_another_source_than_its_own(minion: Estate) -> None:
    minion.from_yard("asker", {"route": _route(["main", "boss", "q"], ["main", "echo", None])})
    assert minion.on_road("main")[0]["route"]["src"] == ["minion", "asker", "q"]


def test_a_road_message_for_a_yard_goes_down_the_lane(main: Estate) -> None:
    main.from_road("minion", {"route": _route(["minion", "asker", "q"], ["main", "echo", "s"]),
                              "n": 1})
    assert main.at_yard("echo") == [
        {"route": _route(["minion", "asker", "q"], ["main", "echo", "s"]), "n": 1}]
    assert main.manor.stats.to_lane == 1


def test_an_empty_destination_estate_means_this_one(main: Estate) -> None:
    main.from_road("minion", {"route": _route([None, "asker", None], [None, "echo", None])})
    assert main.at_yard("echo")[0]["route"] == _route(["minion", "asker", None],
                                                      ["main", "echo", None])


def test_an_empty_destination_yard_is_the_manor_itself(main: Estate) -> None:
    main.from_road("minion", {"route": _route([None, "asker", None], ["main", None, "x"]),
                              "n": 7})
    [delivered] = main.manor_events()
    assert delivered == Delivered(
        {"route": _route(["minion", "asker", None], ["main", "main", "x"]), "n": 7},
        Triple("minion", "asker"), Triple("main", "main", "x"), Via.ROAD, "minion", True)


def test_a_minion_cannot_speak_for_another_estate(main: Estate) -> None:
    main.from_road("minion", {"route": _route(["minion2", "x", None], ["main", "echo", None])})
    assert main.at_yard("echo")[0]["route"]["src"] == ["minion", "x", None]


def test_a_minion_that_joined_as_a_main_cannot_speak_for_another_estate(main: Estate) -> None:
    main.road.names["minion"].main = True  # its join claimed the main bit; we never joined it
    main.from_road("minion", {"route": _route(["minion2", "x", None], ["main", "echo", None])})
    assert main.at_yard("echo")[0]["route"]["src"] == ["minion", "x", None]


def test_the_main_estate_may_speak_for_the_estates_it_relays(minion: Estate) -> None:
    minion.from_road("main", {"route": _route(["minion2", "x", None], ["minion", "asker", None])})
    assert minion.at_yard("asker")[0]["route"]["src"] == ["minion2", "x", None]


def test_a_yard_to_yard_message_on_one_estate_goes_through_the_manor(main: Estate) -> None:
    main.from_yard("echo", {"route": _route([None, None, None], [None, "echo", None])})
    assert main.at_yard("echo")[0]["route"] == _route(["main", "echo", None],
                                                      ["main", "echo", None])


# -- relaying across the road ------------------------------------------------


def test_a_minion_sends_messages_for_unknown_estates_to_its_main(minion: Estate) -> None:
    minion.from_yard("asker", {"route": _route([None, None, None], ["minion2", "y", None])})
    assert minion.on_road("main")[0]["route"] == _route(["minion", "asker", None],
                                                        ["minion2", "y", None])


def test_the_main_manor_relays_between_its_remotes(main: Estate) -> None:
    main.from_road("minion", {"route": _route([None, "asker", None], ["minion2", "y", None])})
    assert main.on_road("minion2") == [
        {"route": _route(["minion", "asker", None], ["minion2", "y", None])}]


def test_a_minion_does_not_relay_road_messages_for_other_estates(minion: Estate) -> None:
    minion.road.add_remote(("127.0.0.1", 7700), name="minion2")
    minion.from_road("main", {"route": _route(["main", "m", None], ["minion2", "y", None])})
    assert minion.on_road("minion2") == []
    [error] = minion.on_road("main")
    assert error["error"]["reason"] == "unknown estate"
    assert error["route"] == _route(["minion", "main", None], ["main", "m", None])


# -- unroutable messages get errors back --------------------------------------


def test_an_unknown_yard_gets_an_error_back_over_the_road(main: Estate) -> None:
    sent = _route(["minion", "asker", None], ["main", "nobody", None])
    main.from_road("minion", {"route": sent, "n": 3})
    [error] = main.on_road("minion")
    assert error["route"] == _route(["main", "main", None], ["minion", "asker", None])
    assert error["error"]["reason"] == "unknown yard"
    assert "'nobody'" in error["error"]["detail"]
    assert error["error"]["route"] == sent
    assert main.manor.stats.problems[Problem.UNKNOWN_YARD] == 1


def test_an_unknown_estate_gets_an_error_back_down_the_lane(main: Estate) -> None:
    main.from_yard("echo", {"route": _route([None, None, None], ["atlantis", None, None])})
    [error] = main.at_yard("echo")
    assert error["route"] == _route(["main", "main", None], ["main", "echo", None])
    assert error["error"]["reason"] == "unknown estate"
    assert "'atlantis'" in error["error"]["detail"]


def test_a_malformed_route_gets_a_bad_route_error(main: Estate) -> None:
    main.from_yard("echo", {"route": {"src": [None, None], "dst": "x"}})
    [error] = main.at_yard("echo")
    assert error["error"]["reason"] == "bad route"


def test_a_full_yard_outbox_is_a_busy_error(main: Estate) -> None:
    busy = Estate("main", main=True, remotes={"minion": False},
                  lane_config=LaneConfig(outbox_limit=1))
    for n in range(2):  # nothing flushes the lane in between: the second finds the outbox full
        busy.from_road("minion", {"route": _route([None, "a", None], ["main", "echo", None]),
                                  "n": n})
    [error] = busy.on_road("minion")
    assert error["error"]["reason"] == "busy"


def test_an_error_that_cannot_be_routed_is_undelivered_not_answered(main: Estate) -> None:
    lost = error_body(Route(Triple("x", "main"), Triple("main", "nobody")),
                      Problem.UNKNOWN_ESTATE, "no estate", None)
    main.from_road("minion", lost)
    assert main.on_road("minion") == []
    [undelivered] = main.manor_events()
    assert isinstance(undelivered, Undelivered)
    assert undelivered.problem is Problem.UNKNOWN_YARD
    assert main.manor.stats.errors_sent == 0


def test_messages_a_yard_never_took_come_back_to_their_senders_as_errors(
        main: Estate) -> None:
    routed = {"route": _route(["minion", "asker", None], ["main", "echo", None]), "n": 1}
    main.manor.handle_lane_event(lane_events.YardUnreachable(
        "echo", (1,), (routed,), 0, "Connection refused"), 0.0)
    [error] = main.on_road("minion")
    assert error["error"]["reason"] == "undeliverable"
    assert "echo" in error["error"]["detail"]


def test_an_expired_road_message_comes_back_to_its_yard_as_an_error(minion: Estate) -> None:
    routed = {"route": _route(["minion", "asker", None], ["main", "echo", None])}
    minion.manor.handle_road_event(road_events.MessageExpired("main", 4, routed, "ttl"), 0.0)
    [error] = minion.at_yard("asker")
    assert error["route"]["dst"] == ["minion", "asker", None]
    assert error["error"]["reason"] == "undeliverable"


# -- the manor's own messages ------------------------------------------------


def test_a_message_without_a_route_is_for_the_manor_and_answered_on_its_channel(
        main: Estate) -> None:
    main.from_road("minion", {"plain": True})
    [delivered] = main.manor_events()
    assert isinstance(delivered, Delivered)
    assert not delivered.routed
    main.manor.reply(delivered, {"plain": "back"}, now=0.0)
    assert main.on_road("minion") == [{"plain": "back"}]


def test_a_reply_reverses_the_route(main: Estate) -> None:
    main.from_yard("echo", {"route": _route([None, None, "q"], [None, None, "ask"])})
    [delivered] = main.manor_events()
    assert isinstance(delivered, Delivered)
    main.manor.reply(delivered, {"answer": 42}, now=0.0)
    assert main.at_yard("echo") == [
        {"route": _route(["main", "main", "ask"], ["main", "echo", "q"]), "answer": 42}]


def test_the_manor_sends_to_a_yard_on_a_far_estate(minion: Estate) -> None:
    minion.manor.send({"hello": 1}, Triple("main", "echo"), share="s", now=0.0)
    assert minion.on_road("main") == [
        {"hello": 1, "route": _route(["minion", "main", "s"], ["main", "echo", None])}]


def test_other_stack_events_are_not_the_manors_business(main: Estate) -> None:
    assert not main.manor.handle_road_event(road_events.Alive("minion"), 0.0)
    assert not main.manor.handle_lane_event(lane_events.YardAdded("echo", "/x"), 0.0)
    assert main.manor_events() == []


def test_a_durable_manor_stores_what_it_routes_onto_the_road(tmp_path: Path) -> None:
    """With ``raetlike estate --durable --lane``, the manor routes through the durable road:
    a yard's message for another estate is on disk before it waits for the road."""
    estate = Estate("minion", main=False, remotes={"main": True}, yards=("asker",), lane="sun")
    durable = DurableRoad(estate.road, tmp_path / "durable")
    estate.manor = Manor(durable, estate.lane)
    body = {"route": _route([None, None, "q"], ["main", "echo", "s"]), "n": 1}
    estate.from_yard("asker", body)
    (stored,) = durable.outbox.pending()
    assert stored.remote == "main"
    assert stored.body == {"route": _route(["minion", "asker", "q"], ["main", "echo", "s"]),
                           "n": 1}
    assert estate.on_road("main") == [{"durable": [durable.outbox.store, 1], "body": stored.body}]
    durable.close()
