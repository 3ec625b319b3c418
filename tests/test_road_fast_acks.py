"""Fast mode, ACK frames against a hostile joined peer: at most one per datagram of at most
MAX_ACK_RANGES ranges, strictly descending; and one costs bisections of what is in flight,
not a walk of it (docs/wire.md, "Fast-mode frame")."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.errors import PacketError
from road import events
from road._fast_control import ReceivedRanges
from road._fast_recovery import LossRecovery
from road._fast_wire import MAX_ACK_RANGES, pack_ack, read_frames
from road.stats import Drop
from tests.roadkit import MINION
from tests.test_road_fast import fast_pair
from tests.test_road_fast_hostile import _feed, _flows, _links, _sealed


def _ack(ranges: list[tuple[int, int]]) -> bytes:
    """An ACK frame of any ranges, in the order given (as an attacker packs it)."""
    return struct.pack("!BB", 2, len(ranges)) + b"".join(struct.pack("!QQ", first, last)
                                                         for first, last in ranges)


def test_read_frames_refuses_a_second_ack_frame_too_many_ranges_or_ranges_out_of_order() -> None:
    most = [(4 * n, 4 * n + 1) for n in range(MAX_ACK_RANGES, 0, -1)]
    assert read_frames(_ack(most))[1] == most
    assert read_frames(_ack([(5, 9), (3, 4), (0, 1)]))[1] == [(5, 9), (3, 4), (0, 1)]
    assert read_frames(_ack([]))[1] == []  # (a frame of none: our AckState can send it)
    hostile = [
        _ack([(9, 9)]) + _ack([(5, 5)]),  # a second ack frame
        _ack([(4 * n, 4 * n + 1) for n in range(MAX_ACK_RANGES + 1, 0, -1)]),  # 33 ranges
        _ack([(0, 1), (5, 9)]),  # ascending
        _ack([(5, 9), (9, 12)]),  # overlapping the one before
        _ack([(5, 9), (5, 9)]),  # the same twice
        _ack([(0, 3), (0, 0)]),  # nothing lies below 0
    ]
    for plain in hostile:
        with pytest.raises(PacketError):
            read_frames(plain)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5000), unique=True, min_size=1, max_size=400))
def test_the_ack_frames_we_send_pass_the_peers_checks(numbers: list[int]) -> None:
    """Whatever order our peer's packet numbers arrive in (each once: the replay window),
    the ACK frame we build of them is one the peer accepts."""
    received = ReceivedRanges()
    for number in numbers:
        received.add(number)
        ranges = received.highest_first()
        for frame in (pack_ack(ranges), pack_ack(ranges[:4])):
            read = read_frames(frame)[1]
            assert read is not None
            assert read == ranges[:len(read)]


def test_a_peers_ack_beyond_the_bounds_is_dropped_as_malformed_and_acks_nothing() -> None:
    pair = fast_pair()
    _flows(pair, 5)
    _, main_link = _links(pair)
    for n in range(40):  # datagrams the minion never receives: all still in flight
        pair.main.transmit({"n": n, "pad": "x" * 1000}, to="minion")
    now = pair.net.now
    for _ in range(5):
        pair.main.datagrams_to_send(now)
    recovery = main_link.recovery
    flying = sorted(recovery.sent)
    assert len(flying) > MAX_ACK_RANGES
    singles = [(n, n) for n in reversed(flying)]
    hostile = [
        _ack(singles[:5]) + _ack(singles[5:10]),  # two frames, each fine alone
        _ack(singles[:MAX_ACK_RANGES + 1]),  # one range too many
        _ack(list(reversed(singles[:3]))),  # ascending
        _ack([(flying[1], flying[3]), (flying[0], flying[2])]),  # overlapping
    ]
    malformed = pair.main.stats.dropped[Drop.MALFORMED]
    for plain in hostile:
        _feed(pair, _sealed(pair, plain))
    assert pair.main.stats.dropped[Drop.MALFORMED] == malformed + len(hostile)
    assert sorted(recovery.sent) == flying  # nothing acked by any of them
    assert not pair.events(MINION, events.MessageReceived)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageReceived)) == 40)
    _flows(pair, 5)


class _Counting(dict[int, Any]):
    """A record of what is in flight that counts every look at it (by key or by walk)."""

    looks = 0

    def __iter__(self) -> Any:
        for key in super().__iter__():
            _Counting.looks += 1
            yield key

    def get(self, key: int, default: Any = None) -> Any:
        _Counting.looks += 1
        return super().get(key, default)

    def pop(self, key: int, *default: Any) -> Any:
        _Counting.looks += 1
        return super().pop(key, *default)

    def __getitem__(self, key: int) -> Any:
        _Counting.looks += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        _Counting.looks += 1
        return super().__contains__(key)


def test_an_ack_costs_bisections_of_what_is_in_flight_not_a_walk_of_it() -> None:
    """1,000 datagrams in flight; acks of numbers none of them has (acked already, never
    tracked, not sent yet) look at none of them; an ack costs the datagrams it newly
    acknowledges and little more."""
    recovery = LossRecovery(1200, 1 << 30, 0.025)
    recovery.sent = _Counting()
    for number in range(4000):
        if number % 2 == 0:  # (the odd ones: acks only, never tracked)
            recovery.on_sent(number, 0.0, 1200, [], [])
    recovery.on_ack([(2000, 3999)], 0.1)  # the upper half acked: 1,000 left, 0..1998
    assert len(recovery.sent) == 1000
    useless = [
        [(2000, 3999)],  # acked already (the same ack again)
        [(3960 - 60 * k, 3960 - 60 * k + 40) for k in range(MAX_ACK_RANGES)],  # acked too
        [(4 * k + 1, 4 * k + 1) for k in range(MAX_ACK_RANGES, 0, -1)],  # never tracked
        [(4000 + 4 * k, 4000 + 4 * k + 2) for k in range(MAX_ACK_RANGES, 0, -1)],  # not sent
    ]
    for ranges in useless:
        _Counting.looks = 0
        assert recovery.on_ack(ranges, 0.2) == []
        assert _Counting.looks <= 2, (ranges[:2], _Counting.looks)
    assert len(recovery.sent) == 1000
    _Counting.looks = 0
    newly = recovery.on_ack([(1990, 1998), (1001, 1003), (0, 10)], 0.3)
    assert len(newly) == 5 + 1 + 6
    assert _Counting.looks <= 12 + 2
    assert len(recovery.sent) == 1000 - 12
    assert recovery.first_sent() == 12
