"""A lane binder's memory follows the pages received, never the page count a head claims."""

from __future__ import annotations

import tracemalloc

from raetlike.wire.kinds import PageKind
from raetlike.wire.page import Binder, PageHead, pack_page


def _first_page(book_id: int, count: int, body: bytes) -> bytes:
    head = PageHead("mallory", "main", "0" * 18, book_id, page_number=0, page_count=count,
                    kind=PageKind.JSON)
    return pack_page(head, body)


def test_first_pages_claiming_65535_pages_cost_what_they_carry() -> None:
    binder = Binder(max_open_books=64)
    pages = [_first_page(n + 1, 65535, b"x" * 100) for n in range(64)]
    sent = sum(len(page) for page in pages)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for page in pages:
            assert binder.add(page) is None
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert binder.open_books == 64
    # a list of 65,535 slots per book would be 64 x 512 KiB = 32 MiB
    assert grown < 20 * sent, (grown, sent)


def test_a_book_still_completes_in_any_page_order_after_its_first_page() -> None:
    binder = Binder()
    message = b'{"route":"x","body":"' + b"y" * 50 + b'"}'
    sections = [message[i:i + 20] for i in range(0, len(message), 20)]
    heads = [PageHead("yard", "main", "0" * 18, 7, page_number=n, page_count=len(sections),
                      kind=PageKind.JSON) for n in range(len(sections))]
    order = [0, *reversed(range(1, len(sections)))]
    results = [binder.add(pack_page(heads[n], sections[n])) for n in order]
    assert results[:-1] == [None] * (len(sections) - 1)
    assert results[-1] == {"route": "x", "body": "y" * 50}
    assert binder.open_books == 0
    assert binder.buffered_bytes == 0
