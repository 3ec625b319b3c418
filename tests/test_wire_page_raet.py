"""Lane pages agree byte for byte with a live RAET 0.6.8, both ways.

One RAET subprocess packs every case with RAET's own book code and runs our
pages through a real RAET lane stack's receive path.
"""

from __future__ import annotations

from typing import Any

import pytest

from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import Binder, encode_body, paginate
from tests.raetpeer import run_raet

pytestmark = pytest.mark.interop

SESSION = "660d36504ba2af87ee"

RAET_SCRIPT = """
import os, tempfile
import msgpack
# RAET's paging calls msgpack.dumps/loads, which the shims leave unpatched.
msgpack.dumps, msgpack.loads = msgpack.packb, msgpack.unpackb
from raet.lane import paging, stacking, yarding

given = load_input()
cases, sequences = given["cases"], given["sequences"]
packed = []
for case in cases:
    book = paging.TxBook(
        data=dict(pk=case["kind"], sn=case["source"], dn=case["destination"],
                  si=case["session"], bi=case["book_id"]),
        body=case["message"],
    )
    book.pack()
    packed.append([page.packed for page in book.pages])

received = []
with tempfile.TemporaryDirectory() as tmp:
    stack = stacking.LaneStack(name="main", lanename="lane", sockdirpath=tmp, accept=True)
    try:
        for case in cases:
            ha, _ = yarding.Yard.computeHa(tmp, "lane", case["source"])
            for page in case["ours"]:
                stack.rxes.append((page, ha))
            stack.serviceRxes()
            messages = [body for body, _ in stack.rxMsgs]
            stack.rxMsgs.clear()
            received.append(messages)
        sequenced = []
        for sequence in sequences:
            for page in sequence:
                sn = paging.RxPage(packed=page)
                sn.head.parse()
                ha, _ = yarding.Yard.computeHa(tmp, "lane", sn.data["sn"])
                stack.rxes.append((page, ha))
                stack.serviceRxOnce()
            sequenced.append([body for body, _ in stack.rxMsgs])
            stack.rxMsgs.clear()
    finally:
        stack.server.close()
emit({"packed": packed, "received": received, "sequenced": sequenced})
"""


def _sized_message(total: int, source: str, kind: PageKind) -> dict[str, Any]:
    """A one-key message whose one-page datagram would be ``total`` bytes."""
    head_size = len(paginate(source, "main", SESSION, 7, {}, kind)[0])
    for length in range(total - head_size - 12, total - head_size + 1):
        message = {"d": "x" * length}
        if head_size + len(encode_body(message, kind)) == total:
            return message
    raise AssertionError("no message of that size")


def _cases() -> list[dict[str, Any]]:
    small = {"route": {"src": ["a", "b", None]}, "body": "hello", "n": 1, "f": 2.5}
    unicode = {"text": "gr\u00fc\u00dfe \u2603 \U0001f600", "ok": True, "none": None}
    big = {"data": [{"i": i, "s": f"item-{i}" * 5} for i in range(9000)]}
    specs: list[tuple[str, int, dict[str, Any], PageKind]] = [
        ("other", 1, small, PageKind.JSON),
        ("other", 1, small, PageKind.MSGPACK),
        ("yard\u00e9", 0x1F, unicode, PageKind.JSON),
        ("yard2", 0xFFFFFFFF, unicode, PageKind.MSGPACK),
        ("empty", 2, {}, PageKind.JSON),
        ("empty2", 3, {}, PageKind.MSGPACK),
        ("bigjson", 4, big, PageKind.JSON),
        ("bigpack", 5, big, PageKind.MSGPACK),
        ("edge1", 7, _sized_message(MAX_PAGE_SIZE, "edge1", PageKind.JSON), PageKind.JSON),
        ("edge2", 7, _sized_message(MAX_PAGE_SIZE + 1, "edge2", PageKind.JSON), PageKind.JSON),
        (
            "edge3",
            7,
            _sized_message(MAX_PAGE_SIZE + 1, "edge3", PageKind.MSGPACK),
            PageKind.MSGPACK,
        ),
        ("huge", 8, {"blob": "y" * 1_000_000, "tail": list(range(100))}, PageKind.JSON),
    ]
    return [
        {
            "source": source,
            "destination": "main",
            "session": SESSION,
            "book_id": book_id,
            "kind": int(kind),
            "message": message,
            "ours": paginate(source, "main", SESSION, book_id, message, kind),
        }
        for source, book_id, message, kind in specs
    ]


OTHER_SESSION = "660d36504ba2af87ef"


def _sequences() -> list[list[bytes]]:
    """Page orders that exercise missed first pages and session changes."""

    def book(source: str, session: str, book_id: int, fill: str) -> list[bytes]:
        message = {"fill": fill * 150_000, "book": book_id}
        return paginate(source, "main", session, book_id, message, PageKind.JSON)

    a1, a2 = book("seqa", SESSION, 1, "a"), book("seqa", SESSION, 2, "b")
    b1 = book("seqa", OTHER_SESSION, 1, "c")
    c1 = book("seqc", SESSION, 1, "d")
    return [
        [*a1[1:], a1[0], *a2],  # first page missed: book 1 never completes
        [a1[0], a1[1], b1[0], *b1[1:], a1[2]],  # new session drops the half book
        [a1[0], b1[0], a1[1], *b1[1:]],  # a late old page switches back
        [c1[0], a1[0], *c1[1:], *a1[1:]],  # interleaved yards
        [a1[0], a1[1], a1[1], *a1[2:]],  # a repeated page
    ]


@pytest.fixture(scope="module")
def exchange() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cases = _cases()
    return cases, run_raet(RAET_SCRIPT, {"cases": cases, "sequences": _sequences()})


def test_the_cases_cover_one_page_and_many_page_books(
    exchange: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    cases, _ = exchange
    counts = [len(case["ours"]) for case in cases]
    assert counts[:6] == [1] * 6
    assert counts[8] == 1
    assert counts[9] == 2
    assert min(counts[6], counts[7], counts[10], counts[11]) >= 2


def test_our_pages_equal_raets_byte_for_byte(
    exchange: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    cases, answer = exchange
    for case, raet_pages in zip(cases, answer["packed"], strict=True):
        assert case["ours"] == raet_pages, case["source"]


def test_raet_reassembles_every_book_we_paginate(
    exchange: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    cases, answer = exchange
    for case, messages in zip(cases, answer["received"], strict=True):
        assert messages == [case["message"]], case["source"]


def test_our_binder_reassembles_every_book_raet_paginates(
    exchange: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    cases, answer = exchange
    binder = Binder()
    for case, raet_pages in zip(cases, answer["packed"], strict=True):
        results = [binder.add(page) for page in raet_pages]
        assert results[:-1] == [None] * (len(results) - 1)
        assert results[-1] == case["message"], case["source"]
    assert binder.open_books == 0


def test_our_binder_delivers_what_raet_delivers_for_tricky_page_orders(
    exchange: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    _, answer = exchange
    sequences = _sequences()
    binder = Binder()  # one receiver throughout, like the one RAET stack
    ours = [
        [m for m in (binder.add(page) for page in sequence) if m is not None]
        for sequence in sequences
    ]
    assert [[m["book"] for m in delivered] for delivered in ours] == [[2], [1], [], [1, 1], [1]]
    assert ours == answer["sequenced"]
