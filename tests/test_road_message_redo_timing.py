"""RAET mode times a message's redo from the answers the remote gave lately.

A fixed 0.2 s redo resends to a remote whose answers take longer (a slow link,
or a receiver verifying a full window of signed packets); the smoothed round
trip keeps those resends to the first message.
"""

from __future__ import annotations

import pytest

from road.remote import RoundTrip
from tests.roadkit import MAIN, allowed_pair, received_seqs
from tests.simlink import Impairment


def test_a_round_trip_with_no_answer_yet_waits_the_floor() -> None:
    assert RoundTrip().timeout(0.2, 0.5) == 0.2


def test_the_first_answer_sets_the_wait_to_three_times_itself() -> None:
    round_trip = RoundTrip()
    round_trip.sample(0.1)
    assert round_trip.timeout(0.01, 5.0) == pytest.approx(0.1 + 4 * 0.05)


def test_later_answers_move_the_estimate_by_an_eighth() -> None:
    round_trip = RoundTrip()
    round_trip.sample(0.1)
    round_trip.sample(0.2)
    assert round_trip.smoothed == pytest.approx(0.1125)
    assert round_trip.variation == pytest.approx(0.75 * 0.05 + 0.25 * 0.1)


def test_the_wait_stays_within_floor_and_ceiling() -> None:
    round_trip = RoundTrip()
    round_trip.sample(0.001)
    assert round_trip.timeout(0.2, 0.5) == 0.2
    round_trip.sample(9.0)
    assert round_trip.timeout(0.2, 0.5) == 0.5


def test_a_backed_off_wait_holds_until_an_answer_is_timed_again() -> None:
    round_trip = RoundTrip()
    round_trip.back_off(0.4)
    assert round_trip.timeout(0.2, 0.5) == 0.4
    round_trip.sample(0.01)
    assert round_trip.timeout(0.2, 0.5) == 0.2


def _send_one_by_one(delay: float, count: int) -> tuple[int, list[int]]:
    pair = allowed_pair(impairment=Impairment(delay=delay))
    resent_before = pair.minion.stats.segments_resent
    for number in range(count):
        pair.minion.transmit({"seq": number}, to="main", now=pair.net.now)
        pair.run_until(lambda n=number: len(received_seqs(pair, MAIN)) > n  # type: ignore[misc]
                       and pair.minion.stats.messages_sent > n)
    return pair.minion.stats.segments_resent - resent_before, received_seqs(pair, MAIN)


def test_a_slow_remote_is_redone_only_until_its_answers_are_timed() -> None:
    # 0.15 s each way: every answer takes 0.3 s, past the 0.2 s floor.
    resent, seqs = _send_one_by_one(0.15, 10)
    assert seqs == list(range(10))
    # The first message is redone once (at 0.2 s, its answer at 0.3 s times nothing);
    # the second waits the backed-off 0.4 s and is timed; the rest wait ~0.3 s + margin.
    assert resent == 1


def test_a_fast_remote_keeps_the_floor() -> None:
    pair = allowed_pair()
    for number in range(5):
        pair.minion.transmit({"seq": number}, to="main", now=pair.net.now)
        pair.run_until(lambda n=number: pair.minion.stats.messages_sent > n)  # type: ignore[misc]
    remote = next(iter(pair.minion.remotes.values()))
    assert remote.round_trip.timeout(0.2, 0.5) == 0.2
    assert pair.minion.stats.segments_resent == 0
    assert received_seqs(pair, MAIN) == list(range(5))
