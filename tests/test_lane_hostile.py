"""Hostile datagrams from local processes are dropped and counted, never raised out of a
lane stack: a grant whose limit is a digit ``int()`` refuses, and any bug of ours a
datagram trips (the catch-all backstop)."""
from __future__ import annotations

import logging

import pytest

from lane import LaneStack, LocalYard
from lane.coalesce import read_grant
from lane.stats import Drop
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import Binder, PageHead, paginate

SESSION = "01" + "a" * 16


def _stack() -> LaneStack:
    return LaneStack(LocalYard("me", "lane", "/lanes"))


# -- numeric fields take ASCII digits only ----------------------------------------------

@pytest.mark.parametrize("limit", ["\xb9", "\xb2", "\xb3", "1\xb9", "\u0661", "+1", " 1", "1 ",
                                   "-1", "1234567", ""])
def test_a_grant_limit_that_is_not_ascii_digits_is_malformed(limit: str) -> None:
    data = b"rlg 1\nx\ny\nz\n" + limit.encode("utf-8") + b"\n\n"
    assert read_grant(data) is None
    assert read_grant(b"rlg 1\nx\ny\nz\n" + limit.encode("latin-1", "replace") + b"\n\n") \
        is None


def test_a_grant_limit_of_ascii_digits_is_read() -> None:
    assert read_grant(b"rlg 1\nx\ny\nz\n065535\n\n") == ("x", "y", "z", 65535)


def test_a_grant_with_a_superscript_limit_is_dropped_not_raised() -> None:
    stack = _stack()
    stack.receive_datagram(b"rlg 1\nx\ny\nz\n\xb9\n\n", None, 1.0)  # 15 bytes, any socket
    assert stack.stats.dropped[Drop.MALFORMED] == 1
    page = paginate("you", "me", SESSION, 1, {"n": 1}, PageKind.JSON)[0]
    stack.receive_datagram(page, None, 1.0)
    assert stack.stats.messages_received == 1  # and the yard goes on


# -- the backstop: a bug of ours a datagram trips ----------------------------------------

class _BrokenBinder(Binder):
    """A binder with a bug: every page raises."""

    def add_page(self, head: PageHead, body: bytes) -> dict[str, object] | None:
        raise RuntimeError(f"bug in add_page for {head.source}, {len(body)} bytes")


def test_an_internal_error_a_datagram_trips_is_counted_and_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    stack = _stack()
    working = stack.binder
    stack.binder = _BrokenBinder()
    caplog.set_level(logging.ERROR, logger="lane.stack")
    for number in range(3):
        page = paginate("you", "me", SESSION, number, {"n": number}, PageKind.JSON)[0]
        stack.receive_datagram(page, None, 1.0)
    assert stack.stats.dropped[Drop.INTERNAL_ERROR] == 3
    assert stack.stats.as_dict()["dropped"] == {"internal-error": 3}
    logged = [record for record in caplog.records if "internal error" in record.getMessage()]
    assert len(logged) == 1  # the first, then every 1000th
    assert logged[0].exc_info is not None
    stack.binder = working
    page = paginate("you", "me", SESSION, 9, {"n": 9}, PageKind.JSON)[0]
    stack.receive_datagram(page, None, 1.0)
    assert stack.stats.messages_received == 1
