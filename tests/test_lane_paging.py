"""LaneStack paging edge cases: the 65,535-byte page, 16 MB books, lost first pages, restarts."""

from __future__ import annotations

import json

import pytest

from lane import LaneConfig, events
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import paginate, parse_page
from tests.lanekit import LaneNet


def message_filling(size: int, session: str) -> dict[str, str]:
    """A message whose single page from a to b (book 1) is exactly ``size`` bytes."""
    empty = paginate("a", "b", session, 1, {"x": ""})[0]
    return {"x": "y" * (size - len(empty))}


PAGES_ONLY = LaneConfig(coalesce=False)  # RAET's paging alone (a RAET yard gets only that)


def test_a_page_of_exactly_65535_bytes_is_one_page_and_one_more_byte_makes_two() -> None:
    net = LaneNet()
    a, b = net.yard("a", config=PAGES_ONLY), net.yard("b", config=PAGES_ONLY)
    fits = message_filling(MAX_PAGE_SIZE, a.local.yard_session)
    a.transmit(fits, to="b")
    net.settle()
    assert [len(data) for data, _, _ in net.wire] == [MAX_PAGE_SIZE]
    over = message_filling(MAX_PAGE_SIZE, a.local.yard_session)
    over["x"] += "y"
    a.transmit(over, to="b")
    net.settle()
    sizes = [len(data) for data, _, _ in net.wire[1:]]
    assert len(sizes) == 2
    assert max(sizes) <= MAX_PAGE_SIZE
    assert [m.body for m in net.received(b)] == [fits, over]
    assert [m.pages for m in net.received(b)] == [1, 2]


@pytest.mark.parametrize("kind", [PageKind.JSON, PageKind.MSGPACK])
def test_a_16_megabyte_message_is_paged_and_joined_again(kind: PageKind) -> None:
    net = LaneNet()
    config = LaneConfig(page_kind=kind)
    a, b = net.yard("a", config=config), net.yard("b", config=config)
    big = {"blob": "q" * (16 * 1024 * 1024), "tail": [1, 2, 3]}
    a.transmit(big, to="b")
    net.run_until(lambda: bool(net.received(b)), timeout=5)
    [got] = net.received(b)
    assert got.body == big
    pages = [data for data, source, _ in net.wire if source == a.path]
    assert got.pages == len(pages) > 256
    assert all(len(data) <= MAX_PAGE_SIZE for data in pages)


def test_a_book_whose_first_page_is_lost_is_dropped_and_counted() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"first": "lost", "pad": "p" * 150_000}, to="b")
    a.transmit({"second": "arrives"}, to="b")
    pages = a.datagrams_to_send(net.now)
    assert len(pages) == 4
    for data, _ in pages[1:]:
        b.receive_datagram(data, a.path, net.now)
    assert [m.body for m in net.received(b)] == [{"second": "arrives"}]
    assert b.stats.binder.missed_first_page == 2
    assert b.binder.open_books == 0


def test_a_yard_restarting_mid_book_drops_the_half_book_and_delivers_the_new_one() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"half": "h" * 200_000}, to="b")
    pages = a.datagrams_to_send(net.now)
    for data, _ in pages[:2]:
        b.receive_datagram(data, a.path, net.now)
    assert b.binder.open_books == 1
    net.kill(a)
    a2 = net.yard("a")
    assert a2.local.yard_session != a.local.yard_session
    a2.transmit({"after": "restart", "pad": "r" * 100_000}, to="b")
    net.settle()
    for data, _ in pages[2:]:  # the rest of the old book straggles in late
        b.receive_datagram(data, a.path, net.now)
    [got] = net.received(b)
    assert got.body["after"] == "restart"
    assert got.yard_session == a2.local.yard_session
    [restarted] = net.of_type(b, events.YardRestarted)
    assert (restarted.old_session, restarted.new_session) == (
        a.local.yard_session, a2.local.yard_session)
    assert b.stats.binder.stale_books == 1
    assert b.stats.binder.missed_first_page == 2


def test_book_pages_are_exactly_what_raet_would_cut() -> None:
    net = LaneNet()
    a, _ = net.yard("a"), net.yard("b")
    message = {"k": "v" * 70_000}
    a.transmit(message, to="b")
    pages = [data for data, _ in a.datagrams_to_send(net.now)]
    assert pages == paginate("a", "b", a.local.yard_session, 1, message)
    body = b"".join(parse_page(page)[1] for page in pages)
    assert json.loads(body) == message
