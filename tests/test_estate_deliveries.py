"""How ``raetlike estate`` handles the messages it delivers: journaled with the round's time
and the resend requests since the last record, logged at DEBUG with names escaped."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.cli.estate import EstateOptions, _Estate
from raetlike.journal import read_journal
from road import events


class _Road:
    """Stands in for the estate's road in ``handle_events``: hands out given events."""

    def __init__(self) -> None:
        self.waiting: list[events.Event] = []

    def next_event(self) -> events.Event | None:
        return self.waiting.pop(0) if self.waiting else None


@pytest.fixture
def journaling(tmp_path: Path) -> Iterator[tuple[_Estate, _Road]]:
    estate = _Estate(EstateOptions(name="main", host="127.0.0.1", port=0, main=True,
                                   keep_dir=tmp_path / "keep", journal_dir=tmp_path / "journal"),
                     time.monotonic)
    road, estate.road = estate.road, _Road()  # type: ignore[assignment]
    try:
        yield estate, estate.road  # type: ignore[misc]
    finally:
        estate.road = road
        estate.close()


def delivery(remote: str, number: int) -> events.MessageReceived:
    return events.MessageReceived(remote=remote, body=b"x" * 10, session_id=3,
                                  transaction_id=number, segments=1)


def test_a_round_of_deliveries_is_journaled_with_its_time_and_the_resends_since_the_last(
        journaling: tuple[_Estate, _Road], tmp_path: Path) -> None:
    estate, road = journaling
    estate.stack.stats.resend_requests_sent = 3
    road.waiting = [delivery("minion", 1), delivery("minion", 2), delivery("other", 3)]
    estate.handle_events()
    first_round = estate.round_wall
    estate.stack.stats.resend_requests_sent = 5
    road.waiting = [events.MessageSent("minion", message_id=9), delivery("minion", 4)]
    estate.handle_events()
    estate.handle(delivery("other", 5))  # outside a round: the last round's time
    assert estate.journal is not None
    estate.journal.close()
    records = read_journal([tmp_path / "journal"]).records
    assert [(r.transaction_id, r.source.estate, r.resends) for r in records] == [
        (1, "minion", 3), (2, "minion", 0), (3, "other", 0), (4, "minion", 2), (5, "other", 0)]
    assert [r.received for r in records[:3]] == [first_round] * 3
    assert records[3].received == records[4].received == estate.round_wall > 0
    assert {(r.node, r.destination.estate, r.body_bytes) for r in records} == {
        ("main", "main", 10)}


def test_a_delivery_is_logged_at_debug_once_enabled_with_the_remote_escaped(
        journaling: tuple[_Estate, _Road], caplog: pytest.LogCaptureFixture) -> None:
    estate, road = journaling
    hostile = "evil\x1b[2J\nestate main: joined admin"
    road.waiting = [delivery(hostile, 1)]
    estate.handle_events()
    assert not [r for r in caplog.records if r.name == "raetlike.cli.estate"]
    caplog.set_level(logging.DEBUG, logger="raetlike.cli.estate")
    road.waiting = [delivery(hostile, 2)]
    estate.handle_events()  # a level set between rounds counts from the next round
    estate.handle(delivery(hostile, 3))  # and at once for a direct call
    logged = [r.getMessage() for r in caplog.records if r.name == "raetlike.cli.estate"]
    assert len(logged) == 2
    for number, line in zip((2, 3), logged, strict=True):
        assert line.startswith("estate main: message from 'evil\\x1b[2J\\nestate main")
        assert line.endswith(f"(transaction {number}, 1 segments)")
        assert "\x1b" not in line
        assert "\n" not in line


def test_a_handler_that_raises_is_counted_and_logged_not_the_estates_end(
        journaling: tuple[_Estate, _Road], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    estate, road = journaling
    handled: list[events.Event] = []

    def handle(event: events.Event) -> None:  # a bug of ours a peer's event trips
        if isinstance(event, events.MessageSent):
            raise KeyError("a bug")
        handled.append(event)

    monkeypatch.setattr(estate, "handle", handle)
    road.waiting = [events.MessageSent("minion", message_id=n) for n in range(1001)]
    road.waiting.append(events.Alive("minion"))
    with caplog.at_level(logging.ERROR, logger="raetlike.cli.estate"):
        estate.handle_events()
    assert estate.internal_errors == 1001
    assert handled == [events.Alive("minion")]  # the round went on past them
    logged = [r for r in caplog.records if "internal error" in r.message]
    assert len(logged) == 2  # the first and the 1001st
    assert logged[0].exc_info is not None
