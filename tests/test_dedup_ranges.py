"""RangeWindow (the durable dedup's) against a plain set: never a repeat let in, never a
new id refused unless a bound says so, and the bounds hold whatever ids come."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.dedup import RangeWindow
from raetlike.errors import LocalProtocolError


class Model:
    """Every id seen, and the floor the window's bounds raised (ids at or below: seen)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()


@settings(max_examples=400)
@given(ids=st.lists(st.integers(min_value=1, max_value=400), max_size=300),
       window=st.integers(min_value=1, max_value=500),
       max_ranges=st.integers(min_value=1, max_value=20))
def test_a_range_window_agrees_with_a_set_above_its_floor(ids: list[int], window: int,
                                                          max_ranges: int) -> None:
    seen = RangeWindow(window, max_ranges)
    model = Model()
    for number in ids:
        floor = seen.floor
        new = seen.check_and_mark(number)
        if number <= floor:
            assert not new  # below the floor: counted as seen
        else:
            assert new is (number not in model.seen)
        model.seen.add(number)
        ranges = seen.ranges
        assert len(ranges) <= max_ranges
        assert all(first <= last for first, last in ranges)
        assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(ranges))
        assert not ranges or ranges[0][0] > seen.floor
        assert not ranges or seen.floor >= ranges[-1][1] - window
        covered = {n for first, last in ranges for n in range(first, last + 1)}
        assert covered == {n for n in model.seen if n > seen.floor}
        assert RangeWindow.restored(window, max_ranges, seen.state()).state() == seen.state()


def test_in_order_ids_keep_one_range_and_a_late_one_fills_its_hole() -> None:
    seen = RangeWindow(window=1000)
    assert all(seen.check_and_mark(n) for n in range(1, 501) if n != 250)
    assert seen.ranges == [(1, 249), (251, 500)]
    assert seen.check_and_mark(250)
    assert seen.ranges == [(1, 500)]
    assert not seen.check_and_mark(250)
    assert seen.check_and_mark(1500)  # far ahead: the floor follows at window's distance
    assert seen.floor == 500
    assert not seen.check_and_mark(400)


def test_a_sender_scattering_ids_cannot_grow_it_past_max_ranges() -> None:
    seen = RangeWindow(window=1 << 30, max_ranges=64)
    for n in range(2, 100_000, 2):
        seen.check_and_mark(n)
    assert len(seen.ranges) == 64
    assert seen.floor == 100_000 - 2 * 64 - 2


@pytest.mark.parametrize("state", [
    (0, [5, 3], [6, 4]),  # not ascending
    (10, [5], [6]),  # below the floor
    (0, [1, 2], [1, 3]),  # adjacent: not after a hole
    (0, [4], [3]),  # start past end
    (-1, [], []),
    (0, [1], []),
])
def test_a_bad_state_is_refused(state: tuple[int, list[int], list[int]]) -> None:
    with pytest.raises(LocalProtocolError):
        RangeWindow.restored(100, 10, state)


def test_ids_outside_64_bits_are_refused() -> None:
    seen = RangeWindow()
    for bad in (0, -1, 1 << 64):
        with pytest.raises(LocalProtocolError):
            seen.check_and_mark(bad)


def test_an_empty_window_s_state_round_trips() -> None:
    assert RangeWindow.restored(100, 10, (7, [], [])).state() == (7, [], [])
