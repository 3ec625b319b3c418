"""The stack's lazy deadline heap, on its own."""

from __future__ import annotations

from road._deadlines import Deadlines


def test_due_keys_come_once_each_in_deadline_order_and_stale_heads_are_skipped() -> None:
    deadlines: Deadlines[str] = Deadlines()
    for at, key in ((3.0, "c"), (1.0, "a"), (2.0, "b"), (2.5, "a")):  # "a" moved later
        deadlines.push(at, key)
    assert deadlines.earliest(lambda _key: True) == 1.0  # "a" wakes early, at 1.0
    assert list(deadlines.due(1.0)) == ["a"]
    deadlines.push(2.5, "a")  # its owner, woken early, pushes its real deadline
    assert deadlines.earliest(lambda key: key != "b") == 2.5  # "b" gone: its head dropped
    assert list(deadlines.due(2.9)) == ["a"]
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


def test_a_key_pushed_later_again_and_again_holds_one_entry() -> None:
    """Review r LOW 10: each received segment pushed its transaction's timeout again, 30 s
    on; before, 7,000 segments left 7,000 entries."""
    deadlines: Deadlines[str] = Deadlines()
    for n in range(10_000):
        deadlines.push(30.0 + n * 0.001, "message")
    assert len(deadlines) == 1
    assert list(deadlines.due(30.0)) == ["message"]


def test_the_heap_holds_at_most_twice_the_keys_pending_and_64() -> None:
    """Pushed earlier each time, a key's older entries are superseded; forgotten keys' entries
    go at the next rebuild."""
    deadlines: Deadlines[int] = Deadlines()
    for n in range(10_000):
        deadlines.push(1000.0 - n * 0.01, n % 10)
        assert len(deadlines) <= 2 * 10 + 64
    for key in range(5):
        deadlines.forget(key)
    for n in range(1000):
        deadlines.push(1.0 - n * 0.0001, 5 + n % 5)
        assert len(deadlines) <= 2 * 5 + 64
    assert sorted(deadlines.due(10_000.0)) == [5, 6, 7, 8, 9]
