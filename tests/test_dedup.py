"""The seen-window tells new message ids from repeats, as a plain set would."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.dedup import ID_MODULUS, SeenWindow
from raetlike.errors import LocalProtocolError

HALF = ID_MODULUS // 2


class PlainSetModel:
    """The reference: every id seen since max_seen last passed it, in a set."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.max_seen: int | None = None
        self.seen: set[int] = set()

    def check_and_mark(self, message_id: int) -> bool:
        if self.max_seen is None:
            self.max_seen = message_id
            self.seen = {message_id}
            return True
        ahead = (message_id - self.max_seen) % ID_MODULUS
        if ahead == 0:
            return False
        if ahead < HALF:
            # max_seen passes over these ids: a later lap starts them afresh.
            old = self.max_seen
            self.seen = {s for s in self.seen if not 0 < (s - old) % ID_MODULUS <= ahead}
            self.seen.add(message_id)
            self.max_seen = message_id
            return True
        if ID_MODULUS - ahead > self.window:
            return False
        if message_id in self.seen:
            return False
        self.seen.add(message_id)
        return True


def _run_against_model(window: int, ids: list[int]) -> None:
    ours, model = SeenWindow(window), PlainSetModel(window)
    for message_id in ids:
        assert ours.check_and_mark(message_id) == model.check_and_mark(message_id), message_id
        assert ours.max_seen == model.max_seen
        assert len(ours.unseen) <= window
        assert ours.max_seen is not None
        assert all(0 < (ours.max_seen - u) % ID_MODULUS <= window for u in ours.unseen)


@st.composite
def id_walks(draw: st.DrawFn) -> tuple[int, list[int]]:
    """A window and ids that mostly wander near each other, sometimes jump, and wrap."""
    window = draw(st.sampled_from([1, 2, 3, 8, 16, 64]))
    start = draw(
        st.one_of(st.integers(0, ID_MODULUS - 1), st.integers(ID_MODULUS - 40, ID_MODULUS - 1))
    )
    steps = draw(
        st.lists(
            st.one_of(
                st.integers(-2 * window - 2, 2 * window + 2),
                st.sampled_from([HALF - 1, HALF, HALF + 1, -HALF, 3 * window, -3 * window]),
                st.integers(0, ID_MODULUS - 1),
            ),
            max_size=80,
        )
    )
    ids, current = [start], start
    for step in steps:
        current = (current + step) % ID_MODULUS
        ids.append(current)
    return window, ids


@settings(max_examples=500)
@given(id_walks())
def test_the_window_answers_as_a_plain_set_does(walk: tuple[int, list[int]]) -> None:
    _run_against_model(*walk)


@pytest.mark.slow
@settings(max_examples=100_000)
@given(id_walks())
def test_the_window_answers_as_a_plain_set_does_over_many_walks(
    walk: tuple[int, list[int]],
) -> None:
    _run_against_model(*walk)


def test_an_id_is_new_once_and_a_repeat_after() -> None:
    window = SeenWindow()
    assert window.check_and_mark(5)
    assert not window.check_and_mark(5)
    assert window.check_and_mark(7)
    assert window.check_and_mark(6)
    assert not window.check_and_mark(6)


def test_ids_below_the_first_one_are_new_within_the_window() -> None:
    window = SeenWindow(window=10)
    assert window.check_and_mark(100)
    assert window.check_and_mark(95)
    assert window.check_and_mark(97)
    assert not window.check_and_mark(95)
    assert window.check_and_mark(96)
    assert not window.check_and_mark(89)


def test_ids_more_than_the_window_below_max_seen_count_as_seen() -> None:
    window = SeenWindow(window=4)
    assert window.check_and_mark(10)
    assert window.check_and_mark(20)
    assert window.check_and_mark(16)
    assert not window.check_and_mark(15)
    assert window.unseen == {17, 18, 19}


def test_ids_wrap_around_from_the_top_of_32_bits_to_zero() -> None:
    window = SeenWindow(window=8)
    top = ID_MODULUS - 1
    assert window.check_and_mark(top - 1)
    assert window.check_and_mark(1)
    assert window.max_seen == 1
    assert window.unseen == {top, 0}
    assert window.check_and_mark(0)
    assert window.check_and_mark(top)
    assert not window.check_and_mark(top - 1)
    assert not window.check_and_mark(1)


def test_an_id_half_the_space_ahead_counts_as_behind() -> None:
    window = SeenWindow(window=8)
    assert window.check_and_mark(0)
    assert not window.check_and_mark(HALF)
    assert window.check_and_mark(HALF - 1)
    assert window.max_seen == HALF - 1


def test_a_long_jump_keeps_only_window_many_unseen_ids() -> None:
    window = SeenWindow(window=4096)
    assert window.check_and_mark(0)
    assert window.check_and_mark(1_000_000)
    assert len(window.unseen) == 4096
    assert min(window.unseen) == 1_000_000 - 4096
    assert window.check_and_mark(2_000_000)
    assert len(window.unseen) == 4096


def test_in_order_traffic_keeps_no_unseen_ids() -> None:
    window = SeenWindow()
    assert all(
        window.check_and_mark(i % ID_MODULUS) for i in range(ID_MODULUS - 500, ID_MODULUS + 500)
    )
    assert window.unseen == frozenset()


@pytest.mark.parametrize("bad", [-1, ID_MODULUS])
def test_ids_outside_32_bits_are_refused(bad: int) -> None:
    with pytest.raises(LocalProtocolError):
        SeenWindow().check_and_mark(bad)


@pytest.mark.parametrize("bad", [0, 1 << 31])
def test_a_window_outside_its_range_is_refused(bad: int) -> None:
    with pytest.raises(LocalProtocolError):
        SeenWindow(window=bad)
