"""Allow: the CurveCP-style handshake, fresh short-term keys, sessions, timers."""

from __future__ import annotations

import pytest

from raetlike.wire.kinds import FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from tests.roadkit import MAIN, MINION, allowed_pair, make_pair
from tests.simlink import Impairment

ALLOW = TransactionKind.ALLOW


def test_allow_is_hello_cookie_initiate_ack_and_a_final_ack_with_raet_sizes() -> None:
    pair = allowed_pair()
    steps = [(s.source, s.head.packet_kind) for s in pair.sent(ALLOW)]
    assert steps == [
        (MINION, PacketKind.HELLO), (MAIN, PacketKind.COOKIE), (MINION, PacketKind.INITIATE),
        (MAIN, PacketKind.ACK), (MINION, PacketKind.ACK),
    ]
    sizes = [len(parse_packet(s.data).coat) for s in pair.sent(ALLOW)]
    assert sizes == [200, 104, 328, 0, 0]
    assert all(s.head.foot_kind == FootKind.NACL for s in pair.sent(ALLOW))
    for estate, address in (("main", MINION), ("minion", MAIN)):
        remote = pair.stack(address).remote(estate)
        assert remote.allowed
        assert remote.alive
        assert remote.session_box is not None


def test_each_allow_makes_fresh_short_term_keys_and_advances_the_session() -> None:
    pair = allowed_pair()
    at_minion, at_main = pair.minion.remote("main"), pair.main.remote("minion")
    first = (at_minion.short_private.public_key, at_main.short_private.public_key)
    sessions = (at_minion.session_id, at_main.session_id)
    assert at_minion.short_peer == first[1]
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.Allowed)) == 2)
    second = (at_minion.short_private.public_key, at_main.short_private.public_key)
    assert first[0] != second[0]
    assert first[1] != second[1]
    assert at_minion.short_peer == second[1]
    assert at_main.short_peer == second[0]
    assert (at_minion.session_id, at_main.session_id) == (sessions[0] + 1, sessions[1] + 1)
    assert pair.events(MINION, events.Allowed)[-1].session_id == sessions[0] + 1


def test_messages_flow_in_the_new_session_after_a_second_allow() -> None:
    pair = allowed_pair()
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.Allowed)) == 2)
    pair.minion.transmit({"after": "reallow"}, to="main")
    pair.run_until(lambda: bool(pair.events(MAIN, events.MessageReceived)))
    [received] = pair.events(MAIN, events.MessageReceived)
    assert received.session_id == pair.minion.remote("main").session_id


def test_an_allow_answered_with_unjoined_makes_the_initiator_join_first() -> None:
    pair = allowed_pair()
    pair.main.remote("minion").joined = False  # main lost the join (say, an operator reset)
    pair.minion.allow("main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MINION, events.Allowed)) == 2)
    kinds = [(s.head.transaction_kind, s.head.packet_kind) for s in pair.wire]
    unjoined = kinds.index((ALLOW, PacketKind.UNJOINED))
    rejoin = kinds.index((TransactionKind.JOIN, PacketKind.REQUEST), unjoined)
    assert kinds.index((ALLOW, PacketKind.HELLO), rejoin) > rejoin
    assert len(pair.events(MINION, events.Joined)) == 2
    assert pair.main.remote("minion").joined


def test_an_allow_before_any_join_joins_first() -> None:
    pair = make_pair()
    pair.minion.add_remote(MAIN, name="main")
    pair.minion.allow("main", now=0.0)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)))
    assert pair.sent(TransactionKind.JOIN)[0].at < pair.sent(ALLOW)[0].at


def test_an_unanswered_hello_is_resent_at_a_quarter_second_doubling_to_one_then_fails(
) -> None:
    pair = make_pair()
    pair.join()
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)))
    pair.net.blocked.add(MAIN)
    start = pair.net.now
    pair.minion.allow("main", now=start)
    [allower] = pair.minion.remote("main").in_process(ALLOW)
    assert allower.deadline() == pytest.approx(start + 0.25)
    pair.run_until(lambda: bool(pair.events(MINION, events.AllowFailed)), timeout=5.0)
    hellos = [s.at - start for s in pair.sent(ALLOW, PacketKind.HELLO) if s.at >= start]
    assert hellos == pytest.approx([0.0, 0.25, 0.75, 1.75, 2.75, 3.75])
    assert pair.net.now == pytest.approx(start + 4.0)
    assert pair.events(MINION, events.AllowFailed)[0].reason == "timed out"


def test_allow_completes_on_a_lossy_duplicating_reordering_link() -> None:
    for seed in range(5):
        pair = make_pair(seed=seed, impairment=Impairment(loss=0.2, duplicate=0.2, jitter=0.01))
        pair.allow(timeout=60.0)
        assert pair.minion.remote("main").session_box is not None
