"""The manor's log lines: a sender's claimed route parts are escaped, and what a peer can
repeat at will is a warning only the first time and every 100th."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from lane import events as lane_events
from raetlike.manor import ManorHouse, Problem, Route, Triple, error_body
from raetlike.run import Loop
from road import events as road_events
from road.stack import LocalEstate, RoadStack
from tests.test_bus_estate_hosting import leaf, request
from tests.test_manor_routing import Estate

FORGED = ("x\n2026-11-27 11:00:00,000 CRITICAL raetlike.keep: keys of estate 'minion' "
          "ACCEPTED by operator\x1b[2J")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def _clean(line: str) -> bool:
    return line.isprintable()


def test_a_triple_shows_unprintable_parts_escaped() -> None:
    assert str(Triple("main", "echo", None)) == "main/echo/-"
    assert str(Triple(None, "a\nb", "\x1b[31mred")) == "-/'a\\nb'/'\\x1b[31mred'"


def test_a_claimed_yard_or_share_cannot_forge_a_log_line(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="raetlike.manor")
    main = Estate("main", main=True, remotes={"minion": False})
    main.from_road("minion", {"route": {"src": [None, FORGED, None],
                                        "dst": ["main", "nobody", None]}})
    main.from_yard("echo", {"route": {"src": [None, None, "q\nFAKE LINE FROM A YARD"],
                                      "dst": ["main", "nobody2", None]}})
    main.from_road("minion", {"route": {"src": [None, "y", "\x1b]0;title\x07"],
                                        "dst": ["main", None, None]}})
    lines = _lines(caplog)
    assert any("CRITICAL" in line for line in lines)  # the forgery is in the log, escaped
    assert any("FAKE LINE" in line for line in lines)
    assert [line for line in lines if not _clean(line)] == []


@pytest.fixture
def house() -> Iterator[ManorHouse]:
    with tempfile.TemporaryDirectory(prefix="mlog") as directory:
        road = RoadStack(LocalEstate("main", main=True))
        road.add_remote(("127.0.0.1", 7600), name="minion")
        loop = Loop()
        yield ManorHouse(road, loop, "moon", directory, clock=lambda: 0.0)
        loop.close()


def _warnings(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING and words in record.getMessage()]


def test_errors_a_peer_sends_the_manor_are_warned_of_once_in_a_hundred(
        house: ManorHouse, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="raetlike.manor")
    route = Route(Triple("minion", "x\ny", None), Triple("main", "main", None))
    body: dict[str, Any] = error_body(route, Problem.UNKNOWN_YARD, "nothing\x1b[2J")
    for index in range(250):
        house.handle_road_event(road_events.MessageReceived("minion", body, index + 1, 1, 1))
        house.service()
    warned = _warnings(caplog, "error from")
    assert len(warned) == 3  # the 1st, 101st and 201st
    assert "(201 so far)" in warned[-1]
    assert [line for line in _lines(caplog) if not _clean(line)] == []


def test_unroutable_errors_are_warned_of_once_in_a_hundred(
        house: ManorHouse, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="raetlike.manor")
    # an error for a yard that is not there: it cannot go on, nor be answered
    route = Route(Triple("minion", None, None), Triple("main", "nobody", None))
    body = error_body(route, Problem.UNKNOWN_YARD, "made up")
    for index in range(250):
        house.handle_road_event(road_events.MessageReceived("minion", body, index + 1, 1, 1))
        house.service()
    assert house.manor.stats.undelivered == 250
    assert len(_warnings(caplog, "undelivered")) == 3
    assert len(_warnings(caplog, "unknown yard from")) == 3


def test_a_yard_named_like_a_remote_is_warned_of_once_in_a_hundred(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="raetlike.hosting")
    bus, _road = leaf()
    bus.handle_road_event(road_events.Allowed("hub", session_id=1), 0.0)
    for _ in range(250):
        assert bus.handle_lane_event(lane_events.MessageReceived(
            "hub", request("leaf"), yard_session="s", pages=1), 0.0)
    assert bus.refused == 250
    assert len(_warnings(caplog, "has a remote's name")) == 3
