"""Sessions: stale ids nacked, newer ones replace older, restarted peers rejoin."""

from __future__ import annotations

from raetlike.wire.kinds import PacketKind, TransactionKind
from road import events
from road.stack import LocalEstate, RoadStack
from road.stats import Drop
from tests.roadkit import MAIN, MINION, Sent, allowed_pair, numbered, received_seqs

MESSAGE = TransactionKind.MESSAGE


def _reallow(pair: object) -> None:
    from tests.roadkit import Pair  # noqa: PLC0415

    assert isinstance(pair, Pair)
    count = len(pair.events(MAIN, events.Allowed))
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.Allowed)) > count)


def test_a_packet_in_a_stale_session_gets_a_nack_with_the_same_ids() -> None:
    pair = allowed_pair()
    pair.minion.alive("main", now=pair.net.now)
    pair.net.run_for(0.1)
    old = pair.sent(TransactionKind.ALIVE, PacketKind.REQUEST, source=MINION)[-1]
    _reallow(pair)
    pair.minion.alive("main", now=pair.net.now)  # main learns the newer session
    pair.net.run_for(0.1)
    before = pair.main.stats.dropped[Drop.STALE_SESSION]
    pair.net.inject(old.data, MINION, MAIN)
    pair.net.run_for(0.1)
    assert pair.main.stats.dropped[Drop.STALE_SESSION] == before + 1
    nack = pair.sent(TransactionKind.ALIVE, PacketKind.NACK, source=MAIN)[-1]
    assert nack.head.session_id == old.head.session_id
    assert nack.head.transaction_id == old.head.transaction_id
    assert nack.at > old.at


def test_a_newer_session_replaces_the_older_and_ends_its_transactions() -> None:
    pair = allowed_pair()
    lost_tail: list[Sent] = []

    def drop(sent: Sent) -> bool:
        if sent.head.packet_kind == PacketKind.MESSAGE and sent.head.segment_number >= 40:
            lost_tail.append(sent)
            return True
        return False

    pair.net.drop = drop
    old_session = pair.minion.remote("main").session_id
    pair.minion.transmit({"blob": "b" * 60_000, "seq": 0}, to="main")
    pair.run_until(lambda: bool(pair.main.remote("minion").in_process(MESSAGE)))
    pair.net.run_for(0.05)
    [partial] = pair.main.remote("minion").in_process(MESSAGE)
    assert partial.session_id == old_session
    pair.net.drop = None
    _reallow(pair)
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)))
    assert partial.ended
    [received] = pair.events(MAIN, events.MessageReceived)
    assert received.session_id == old_session + 1
    assert received.body["seq"] == 0
    pair.net.run_for(2.0)
    assert len(pair.events(MAIN, events.MessageReceived)) == 1
    assert not pair.main.remote("minion").in_process(MESSAGE)
    assert not pair.minion.remote("main").in_process(MESSAGE)


def test_a_restarted_peer_with_the_same_keys_rejoins_and_queued_messages_arrive() -> None:
    pair = allowed_pair()
    old = pair.minion
    pair.net.blocked.add(MINION)  # the minion process dies
    for body in numbered(3):
        pair.main.transmit(body, to="minion", now=pair.net.now)
    pair.net.run_for(3.0)
    reborn = RoadStack(LocalEstate("minion", signing_key=old.local.signing_key,
                                   private_key=old.local.private_key), now=pair.net.now)
    pair.net.add(MINION, reborn)
    pair.net.blocked.clear()
    placeholder = reborn.join(MAIN, now=pair.net.now)
    reborn.transmit({"seq": 100}, to=placeholder)
    pair.run_until(lambda: len(pair.events(MINION, events.MessageReceived)) == 3
                   and bool(pair.events(MAIN, events.MessageReceived)), timeout=20.0)
    assert sorted(received_seqs(pair, MINION)) == [0, 1, 2]
    assert received_seqs(pair, MAIN) == [100]
    assert list(pair.main.names) == ["minion"]
    assert pair.main.remote("minion").far_uid == reborn.remote("main").uid
    assert not pair.events(MAIN, events.MessageExpired)
