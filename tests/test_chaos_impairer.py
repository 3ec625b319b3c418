"""The chaos relay's sans-IO core: seeded loss, duplication, reordering, corruption, delay."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.chaos import REORDER_HOLD, Direction, Flow, Impairer, Impairment

CLIENT = ("127.0.0.1", 40000)
OTHER = ("127.0.0.1", 40001)
UP: Flow = (Direction.UPSTREAM, CLIENT)
DOWN: Flow = (Direction.DOWNSTREAM, CLIENT)


def _datagrams(count: int) -> list[bytes]:
    return [f"datagram {i:04d}".encode() for i in range(count)]


def _relay_all(impairer: Impairer, datagrams: list[bytes], flow: Flow = UP) -> list[bytes]:
    for data in datagrams:
        impairer.receive(data, flow, 0.0)
    return [data for data, _ in impairer.due(math.inf)]


def test_a_clean_relay_forwards_everything_at_once_in_order() -> None:
    impairer = Impairer()
    datagrams = _datagrams(50)
    for data in datagrams:
        impairer.receive(data, UP, 1.0)
    assert impairer.get_timer() == 1.0
    assert impairer.due(1.0) == [(data, UP) for data in datagrams]
    assert impairer.get_timer() is None
    counters = impairer.counters[Direction.UPSTREAM].as_dict()
    assert counters == {"received": 50, "forwarded": 50, "lost": 0, "duplicated": 0,
                        "reordered": 0, "corrupted": 0, "send_errors": 0}


def test_the_same_seed_makes_the_same_decisions() -> None:
    impairment = Impairment(loss=0.2, duplicate=0.2, reorder=0.2, corrupt=0.2, jitter=0.01)
    first = _relay_all(Impairer(impairment, seed=5), _datagrams(300))
    second = _relay_all(Impairer(impairment, seed=5), _datagrams(300))
    other = _relay_all(Impairer(impairment, seed=6), _datagrams(300))
    assert first == second
    assert first != other


def test_total_loss_forwards_nothing_and_counts_every_datagram() -> None:
    impairer = Impairer(Impairment(loss=1.0), seed=1)
    assert _relay_all(impairer, _datagrams(20)) == []
    counters = impairer.counters[Direction.UPSTREAM]
    assert (counters.received, counters.lost, counters.forwarded) == (20, 20, 0)


def test_loss_drops_about_the_asked_share() -> None:
    impairer = Impairer(Impairment(loss=0.05), seed=2)
    out = _relay_all(impairer, _datagrams(4000))
    assert 140 < impairer.counters[Direction.UPSTREAM].lost < 260
    assert len(out) == 4000 - impairer.counters[Direction.UPSTREAM].lost


def test_certain_duplication_sends_every_datagram_twice_in_order() -> None:
    impairer = Impairer(Impairment(duplicate=1.0), seed=3)
    datagrams = _datagrams(10)
    assert _relay_all(impairer, datagrams) == [d for d in datagrams for _ in range(2)]
    assert impairer.counters[Direction.UPSTREAM].duplicated == 10


def test_corruption_flips_one_to_three_bits_and_keeps_the_length() -> None:
    impairer = Impairer(Impairment(corrupt=1.0), seed=4)
    datagrams = [bytes(64)] * 200
    out = _relay_all(impairer, datagrams)
    flipped = [sum(bin(byte).count("1") for byte in data) for data in out]
    assert all(len(data) == 64 for data in out)
    assert set(flipped) <= {1, 2, 3}
    assert 1 in flipped
    assert 3 in flipped
    assert impairer.counters[Direction.UPSTREAM].corrupted == 200


def test_an_empty_datagram_is_never_corrupted() -> None:
    impairer = Impairer(Impairment(corrupt=1.0), seed=4)
    assert _relay_all(impairer, [b""]) == [b""]
    assert impairer.counters[Direction.UPSTREAM].corrupted == 0


def test_a_reordered_datagram_goes_out_right_after_the_next_one() -> None:
    impairer = Impairer(Impairment(reorder=1.0), seed=0)
    impairer.receive(b"a", UP, 0.0)
    assert impairer.due(0.0) == []
    assert impairer.get_timer() == REORDER_HOLD
    impairer.receive(b"b", UP, 0.01)
    assert impairer.due(0.01) == [(b"b", UP), (b"a", UP)]
    assert impairer.counters[Direction.UPSTREAM].reordered == 1


def test_a_held_datagram_goes_out_alone_when_nothing_overtakes_it() -> None:
    impairer = Impairer(Impairment(reorder=1.0), seed=0)
    impairer.receive(b"a", UP, 1.0)
    assert impairer.due(1.0 + REORDER_HOLD / 2) == []
    assert impairer.due(1.0 + REORDER_HOLD) == [(b"a", UP)]
    assert impairer.get_timer() is None


def test_flows_are_held_back_independently() -> None:
    impairer = Impairer(Impairment(reorder=1.0), seed=0)
    impairer.receive(b"up", UP, 0.0)
    impairer.receive(b"down", DOWN, 0.0)
    impairer.receive(b"other", (Direction.UPSTREAM, OTHER), 0.0)
    impairer.receive(b"down 2", DOWN, 0.0)
    assert impairer.due(0.0) == [(b"down 2", DOWN), (b"down", DOWN)]
    assert sorted(data for data, _ in impairer.due(REORDER_HOLD)) == [b"other", b"up"]
    assert impairer.counters[Direction.UPSTREAM].reordered == 2
    assert impairer.counters[Direction.DOWNSTREAM].reordered == 1


def test_delay_holds_every_datagram_exactly_that_long() -> None:
    impairer = Impairer(Impairment(delay=0.25))
    impairer.receive(b"x", DOWN, 2.0)
    assert impairer.get_timer() == 2.25
    assert impairer.due(2.2499) == []
    assert impairer.due(2.25) == [(b"x", DOWN)]


def test_jitter_delays_within_its_range_and_reorders() -> None:
    impairer = Impairer(Impairment(delay=0.1, jitter=0.05), seed=9)
    datagrams = _datagrams(200)
    for data in datagrams:
        impairer.receive(data, UP, 0.0)
    assert impairer.due(0.0999) == []
    out = [data for data, _ in impairer.due(0.15)]
    assert sorted(out) == datagrams
    assert out != datagrams


def test_forgetting_a_client_drops_what_waits_for_it() -> None:
    impairer = Impairer(Impairment(delay=1.0, reorder=0.0))
    impairer.receive(b"gone", UP, 0.0)
    impairer.receive(b"kept", (Direction.UPSTREAM, OTHER), 0.0)
    impairer.forget(CLIENT)
    assert impairer.due(5.0) == [(b"kept", (Direction.UPSTREAM, OTHER))]


@pytest.mark.parametrize("field", ["loss", "duplicate", "reorder", "corrupt"])
def test_a_probability_outside_0_to_1_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Impairment(**{field: 1.5})


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="delay"):
        Impairment(delay=-1.0)


probability = st.floats(0.0, 1.0)


@settings(max_examples=100)
@given(loss=probability, duplicate=probability, reorder=probability, corrupt=probability,
       jitter=st.floats(0.0, 0.1), seed=st.integers(0, 2**32), count=st.integers(0, 60),
       directions=st.lists(st.sampled_from(list(Direction)), min_size=60, max_size=60))
def test_every_datagram_is_forwarded_lost_or_duplicated_and_counted(  # noqa: PLR0917
        loss: float, duplicate: float, reorder: float, corrupt: float, jitter: float,
        seed: int, count: int, directions: list[Direction]) -> None:
    impairer = Impairer(Impairment(loss, duplicate, reorder, corrupt, 0.0, jitter), seed)
    sent = 0
    now = 0.0
    for index in range(count):
        impairer.receive(b"%d" % index, (directions[index], CLIENT), now)
        now += 0.001
        sent += len(impairer.due(now))
    sent += len(impairer.due(math.inf))
    assert impairer.get_timer() is None
    for counters in impairer.counters.values():
        assert counters.forwarded == counters.received - counters.lost + counters.duplicated
        assert counters.corrupted <= counters.forwarded
    assert sent == sum(c.forwarded for c in impairer.counters.values())
    assert sum(c.received for c in impairer.counters.values()) == count
