"""Nothing silently dropped: the outbox, backpressure, expiry, dead remotes."""

from __future__ import annotations

import pytest

from raetlike.errors import BackpressureError
from raetlike.wire.kinds import PacketKind, TransactionKind
from road import events
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, allowed_pair, make_pair, numbered, received_seqs

MESSAGE = TransactionKind.MESSAGE


def test_a_message_to_a_remote_not_yet_allowed_waits_and_goes_after_the_allow() -> None:
    pair = make_pair()
    placeholder = pair.minion.join(MAIN, now=0.0)
    pair.minion.transmit({"early": 1}, to=placeholder)
    assert len(pair.minion.remote(placeholder).outbox) == 1
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)))
    assert pair.events(MAIN, events.MessageReceived)[0].body == {"early": 1}
    first_message = pair.sent(MESSAGE, PacketKind.MESSAGE)[0].at
    assert first_message > pair.sent(TransactionKind.ALLOW, PacketKind.ACK)[0].at
    assert not pair.minion.remote("main").outbox


def test_a_full_outbox_raises_backpressure_at_once_and_keeps_what_it_has() -> None:
    pair = make_pair(minion_config=RoadConfig(outbox_limit=3))
    placeholder = pair.minion.join(MAIN, now=0.0)
    for n in range(3):
        pair.minion.transmit({"seq": n}, to=placeholder)
    with pytest.raises(BackpressureError):
        pair.minion.transmit({"seq": 3}, to=placeholder)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 3)
    assert received_seqs(pair, MAIN) == [0, 1, 2]
    pair.minion.transmit({"seq": 3}, to="main")  # room again once drained


def test_a_queued_message_past_its_ttl_comes_back_as_message_expired() -> None:
    pair = make_pair()
    pair.net.blocked.add(MAIN)
    placeholder = pair.minion.join(MAIN, now=0.0)
    message_id = pair.minion.transmit({"late": True}, to=placeholder, ttl=3.0)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageExpired)), timeout=5.0)
    [expired] = pair.events(MINION, events.MessageExpired)
    assert expired.message_id == message_id
    assert expired.body == {"late": True}
    assert pair.net.now == pytest.approx(3.0)
    assert pair.minion.stats.messages_expired == 1


def test_a_message_in_flight_past_its_ttl_comes_back_as_message_expired() -> None:
    pair = allowed_pair()
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    pair.minion.transmit({"n": 1}, to="main", ttl=1.0)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageExpired)), timeout=3.0)
    [expired] = pair.events(MINION, events.MessageExpired)
    assert expired.body == {"n": 1}
    assert "in flight" in expired.reason
    assert pair.net.now == pytest.approx(start + 1.1)  # the first redo at or past the ttl
    assert not pair.minion.remote("main").transactions


def test_unanswered_resends_mark_the_remote_dead_and_its_messages_go_when_it_returns(
) -> None:
    pair = allowed_pair(minion_config=RoadConfig(max_redos=3))
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    for body in numbered(3):
        pair.minion.transmit(body, to="main")
    pair.run_until(lambda: bool(pair.events(MINION, events.RemoteLost)), timeout=5.0)
    [lost] = pair.events(MINION, events.RemoteLost)
    assert lost.reason == "message not acknowledged"
    assert pair.net.now == pytest.approx(start + 1.6)  # redos at 0.2, 0.6, 1.1; dead at 1.6
    remote = pair.minion.remote("main")
    assert [o.body["seq"] for o in remote.outbox] == [0, 1, 2]
    assert not remote.in_process(MESSAGE)
    pair.net.run_for(3.0)
    assert not pair.events(MAIN, events.MessageReceived)
    assert [o.body["seq"] for o in remote.outbox] == [0, 1, 2]  # they wait
    pair.net.blocked.clear()
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 3, timeout=5.0)
    assert received_seqs(pair, MAIN) == [0, 1, 2]
    assert pair.events(MINION, events.Alive)
    assert not pair.events(MINION, events.MessageExpired)


def test_closing_a_stack_gives_back_every_queued_message() -> None:
    pair = make_pair()
    placeholder = pair.minion.join(MAIN, now=0.0)
    ids = [pair.minion.transmit(body, to=placeholder) for body in numbered(4)]
    pair.minion.close(now=0.0)
    expired = [e for e in iter(pair.minion.next_event, None)
               if isinstance(e, events.MessageExpired)]
    assert [e.message_id for e in expired] == ids


def test_a_later_message_with_a_shorter_ttl_expires_on_time() -> None:
    # one message in flight, two queued behind it: the short one is not the outbox's first
    pair = allowed_pair(minion_config=RoadConfig(fast=False, max_messages_in_flight=1))
    pair.net.blocked.add(MAIN)
    for _ in range(2):
        pair.minion.transmit({"long": True}, to="main", ttl=30.0)
    pair.net.run_for(0.3)
    sent_at = pair.net.now
    short = pair.minion.transmit({"short": True}, to="main", ttl=2.25)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageExpired)), timeout=5.0)
    [expired] = pair.events(MINION, events.MessageExpired)
    assert expired.message_id == short
    assert pair.net.now == pytest.approx(sent_at + 2.25)
    assert [o.body for o in pair.minion.remote("main").outbox] == [{"long": True}]


def test_a_body_the_road_cannot_pack_is_given_back_counted_and_logged_rarely(
        caplog: pytest.LogCaptureFixture) -> None:
    pair = allowed_pair()  # RAET mode, JSON bodies: a bytes value cannot be carried
    caplog.set_level("DEBUG", logger="road")
    for n in range(1001):
        pair.minion.transmit({"n": n, "raw": b"\x00"}, to="main")
    pair.run_until(lambda: len(pair.events(MINION, events.MessageExpired)) == 1001)
    assert all("cannot be packed" in e.reason for e in pair.events(MINION, events.MessageExpired))
    assert pair.minion.stats.messages_unpackable == 1001
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "cannot send" in r.message]
    assert len(warned) == 2  # the first and the 1001st, not one a message
    assert "(1001 so far)" in warned[1].message
