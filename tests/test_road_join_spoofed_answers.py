"""Unsigned join answers (pend, reject) and requests that a blind spoofer can forge.

RAET 0.6.8's join packets carry no signature, so a spoofer who guesses the ids (small,
sequential) may send them "from" main.  What they may do to a joiner is bounded here.
"""

from __future__ import annotations

from raetlike.wire.head import build_head
from raetlike.wire.kinds import AutoMode, BodyKind, Flag, HeadKind, PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.roadkit import MAIN, MINION, Pair, make_pair

JOIN = TransactionKind.JOIN


def _forge_answer(pair: Pair, kind: PacketKind) -> None:
    """A join answer of ``kind`` "from" main for the minion's open join request."""
    request = pair.sent(JOIN, PacketKind.REQUEST, source=MINION)[-1].head
    head = build_head(kind, JOIN, source_uid=request.destination_uid,
                      destination_uid=request.source_uid, session_id=0,
                      transaction_id=request.transaction_id, flags=Flag.CORRESPONDENT,
                      body_kind=BodyKind.JSON, head_kind=HeadKind.RAET)
    pair.net.inject(pack_packet(head, b""), MAIN, MINION)


def test_a_spoofed_pend_neither_stops_the_request_nor_extends_the_join() -> None:
    pair = make_pair()
    pair.net.blocked.add(MAIN)  # main is down: the first requests are lost
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.5)
    _forge_answer(pair, PacketKind.PEND)
    pair.net.run_for(0.1)
    assert pair.events(MINION, events.JoinPending)
    first_pend = pair.net.now
    pending_timeout = pair.minion.config.join_pending_timeout
    # more pends, each well within the timeout: none of them extends the join
    while pair.net.now < first_pend + pending_timeout - 5.0:
        pair.net.run_for(10.0)
        _forge_answer(pair, PacketKind.PEND)
    requests = [s for s in pair.sent(JOIN, PacketKind.REQUEST, source=MINION)
                if s.at > first_pend]
    assert requests  # pended, the request still goes out (slowly)
    assert len(requests) <= pending_timeout / 5.0
    pair.net.run_to(first_pend + pending_timeout + 0.1)
    [failed] = pair.events(MINION, events.JoinFailed)
    assert failed.reason == "timed out"
    # main comes back: the next attempt (rejoin_interval) joins
    pair.net.blocked.discard(MAIN)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=30.0)


def test_a_join_pended_by_a_spoofer_joins_once_main_hears_the_resent_request() -> None:
    pair = make_pair()
    pair.net.blocked.add(MAIN)
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.5)
    _forge_answer(pair, PacketKind.PEND)
    pair.net.run_to(3.0)
    pair.net.blocked.discard(MAIN)  # main is back; nobody answered the spoofed pend
    pair.run_until(lambda: bool(pair.events(MINION, events.Joined)), timeout=15.0)
    assert not pair.events(MINION, events.JoinFailed)


def test_a_spoofed_reject_ends_the_attempt_but_keeps_the_remote_and_the_retries() -> None:
    pair = make_pair()
    pair.net.blocked.add(MAIN)  # main is down: nobody answers the first join
    name = pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(1.0)
    _forge_answer(pair, PacketKind.REJECT)
    pair.net.run_for(0.1)
    assert pair.events(MINION, events.JoinRejected)  # reported: it may be a real one
    assert not pair.events(MINION, events.RemoteRemoved)
    assert name in pair.minion.names
    pair.net.blocked.discard(MAIN)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)),
                   timeout=3 * pair.minion.config.rejoin_interval)


def test_a_forged_join_request_that_fails_its_checks_does_not_end_a_join_we_started() -> None:
    pair = make_pair()
    pair.allow()
    target = pair.minion.remote("main")
    # an unsigned request from elsewhere naming the minion's uid for main, by an estate
    # whose lesser name would win the race ("0" < "minion"), claiming other keys
    evil = RoadStack(LocalEstate("0"), RoadConfig(fast=False))
    at_evil = evil.add_remote(MINION)
    at_evil.far_uid = target.uid
    evil.join(name=at_evil.name, now=0.0)
    [(forged, _)] = evil.datagrams_to_send(0.0)
    joined = len(pair.events(MINION, events.Joined))
    tries = len(pair.sent(JOIN, PacketKind.REQUEST, source=MINION))
    pair.minion.join(name="main", now=pair.net.now)  # a rejoin by the far uid
    pair.net.inject(forged, ("127.0.0.9", 4444), MINION)
    pair.run_until(lambda: len(pair.events(MINION, events.Joined)) > joined, timeout=10.0)
    assert not pair.sent(JOIN, PacketKind.REFUSE, source=MINION)
    assert len(pair.sent(JOIN, PacketKind.REQUEST, source=MINION)) == tries + 1  # no retry
    assert pair.sent(JOIN, PacketKind.REJECT, source=MINION)  # the forged one, as before


def test_on_a_mutable_road_a_join_with_new_keys_ends_the_remotes_session() -> None:
    pair = make_pair(main_config=RoadConfig(fast=False, mutable=True),
                     main_keep=MemoryKeep(AutoMode.ALWAYS))
    pair.allow()
    at_main = pair.main.remote("minion")
    assert at_main.allowed
    evil = RoadStack(LocalEstate("evil"), RoadConfig(fast=False))
    at_evil = evil.add_remote(MAIN)
    at_evil.far_uid = at_main.uid
    evil.join(name=at_evil.name, now=0.0)
    [(forged, _)] = evil.datagrams_to_send(0.0)
    pair.net.inject(forged, ("127.0.0.9", 4444), MAIN)
    pair.net.run_for(0.01)
    # RAET's mutable road: the unsigned join renames and rekeys the remote (docs/road.md);
    # the session made with the old keys is over, nothing more goes out in it
    assert at_main.name == "evil"
    assert at_main.verify_key == evil.local.signing_key.verify_key
    assert not at_main.allowed
    assert at_main.session_box is None
