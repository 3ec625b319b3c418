"""The stack's lazy deadline heap, on its own."""

from __future__ import annotations

from road._deadlines import Deadlines


def test_due_keys_come_once_each_in_deadline_order_and_stale_heads_are_skipped() -> None:
    deadlines: Deadlines[str] = Deadlines()
    for at, key in ((3.0, "c"), (1.0, "a"), (2.0, "b"), (2.5, "a")):  # "a" moved later
        deadlines.push(at, key)
    assert deadlines.earliest(lambda key: key != "a") == 2.0  # "a" gone: its head dropped
    assert list(deadlines.due(2.9)) == ["b", "a"]
    assert deadlines.earliest(lambda _key: True) == 3.0
    assert list(deadlines.due(10.0)) == ["c"]
    assert deadlines.earliest(lambda _key: True) is None
    assert len(deadlines) == 0


def test_keys_need_not_be_orderable() -> None:
    deadlines: Deadlines[object] = Deadlines()
    first, second = object(), object()
    deadlines.push(1.0, first)
    deadlines.push(1.0, second)
    assert list(deadlines.due(1.0)) == [first, second]
