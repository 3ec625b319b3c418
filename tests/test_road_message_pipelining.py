"""Message bursts in flight: a second burst goes before the first is answered.

The sender keeps up to BURSTS_IN_FLIGHT bursts unanswered (within the
window), so the receiver verifies one burst while the sender signs the next;
the receiver asks each missing segment once per fresh burst, and everything
missing again on a repeated wait.
"""

from __future__ import annotations

from raetlike.wire.kinds import Flag, PacketKind, TransactionKind
from road import events
from road._message import BURSTS_IN_FLIGHT
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, Sent, allowed_pair

MESSAGE = TransactionKind.MESSAGE


def _segments(pair_sent: list[Sent]) -> list[Sent]:
    return [s for s in pair_sent if s.head.packet_kind == PacketKind.MESSAGE]


def test_two_bursts_go_out_before_the_first_answer() -> None:
    pair = allowed_pair(minion_config=RoadConfig(burst=64, window=128))
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    pair.minion.transmit(b"x" * 300_000, to="main")
    pair.net.run_for(0.1)
    segments = [s for s in _segments(pair.sent(MESSAGE, source=MINION))
                if s.at < start + 0.1]  # before the first redo (0.2 s)
    assert BURSTS_IN_FLIGHT == 2
    assert [s.head.segment_number for s in segments] == list(range(128))
    assert [s.head.segment_number for s in segments if s.head.flags & Flag.WAIT] == [63, 127]


def test_the_window_bounds_the_bursts_in_flight() -> None:
    pair = allowed_pair(minion_config=RoadConfig(burst=64, window=100))
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    pair.minion.transmit(b"x" * 300_000, to="main")
    pair.net.run_for(0.1)
    segments = [s for s in _segments(pair.sent(MESSAGE, source=MINION))
                if s.at < start + 0.1]
    assert len(segments) == 100
    assert [s.head.segment_number for s in segments if s.head.flags & Flag.WAIT] == [63, 99]


def test_a_segment_lost_in_the_first_burst_is_asked_for_once_and_resent_once() -> None:
    pair = allowed_pair()
    dropped: set[int] = set()

    def drop(sent: Sent) -> bool:
        number = sent.head.segment_number
        if (sent.head.packet_kind == PacketKind.MESSAGE and sent.source == MINION
                and number == 3 and number not in dropped):
            dropped.add(number)
            return True
        return False

    pair.net.drop = drop
    body = b"y" * 300_000
    pair.minion.transmit(body, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    assert pair.events(MAIN, events.MessageReceived)[0].body == body
    assert pair.main.stats.resend_requests_sent == 1
    again = [s.head.segment_number for s in _segments(pair.sent(MESSAGE, source=MINION))
             if s.head.flags & Flag.AGAIN]
    assert again == [3]


def test_a_lost_resend_request_is_repeated_and_the_message_still_arrives() -> None:
    pair = allowed_pair()
    dropped: set[tuple[int, PacketKind]] = set()

    def drop(sent: Sent) -> bool:
        key = (sent.head.segment_number, sent.head.packet_kind)
        if sent.head.packet_kind == PacketKind.MESSAGE and sent.source == MINION \
                and sent.head.segment_number == 3 and key not in dropped:
            dropped.add(key)
            return True
        if sent.head.packet_kind == PacketKind.RESEND and key not in dropped:
            dropped.add(key)  # the first resend request is lost too
            return True
        return False

    pair.net.drop = drop
    body = b"z" * 300_000
    pair.minion.transmit(body, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageSent)))
    assert pair.events(MAIN, events.MessageReceived)[0].body == body
    assert pair.main.stats.resend_requests_sent >= 2
    assert pair.minion.remote("main").segments_in_flight == 0
