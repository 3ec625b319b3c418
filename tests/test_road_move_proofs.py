"""A remote's address changes only when it answers at the new address, and what the
network says changes no state until it is shown fresh (docs/security.md, "Addresses").

Each test is one attack of the movefix review on the simulated link (virtual clock,
deterministic): the attacker sees, copies, replays, forwards and injects datagrams
from any address it likes, but holds no keys.
"""

from __future__ import annotations

from raetlike.wire.kinds import Flag, PacketKind, TransactionKind
from road import events
from road.config import RoadConfig
from tests.roadkit import MAIN, MINION, Pair, Sent, allowed_pair, make_pair
from tests.simlink import Address, Impairment

ATTACKER: Address = ("127.0.0.9", 4444)
NEW: Address = ("127.0.0.7", 7531)


# -- a path probe's answer from elsewhere -------------------------------------------------


def test_a_probe_forwarded_to_the_remote_does_not_move_it_to_the_forwarder() -> None:
    """The attacker replays a captured datagram of the minion's session to main from its
    own address (main probes there) and forwards main's probe to the minion.  The
    minion answers "alive?" at main's address from its own: that ack proves the keys,
    not that the minion is at the attacker's address; main must not move it there
    (it did: matched by transaction index alone, the probe took the ack as proof)."""
    pair = allowed_pair()
    net = pair.net
    pair.minion.transmit({"hi": 1}, "main", now=net.now)
    net.run_for(0.5)
    seg = pair.sent(TransactionKind.MESSAGE, PacketKind.MESSAGE, MINION)[0]
    start = len(pair.wire)
    net.inject(seg.data, ATTACKER, MAIN)
    net.run_for(0.01)
    probes = [s for s in pair.wire[start:] if s.destination == ATTACKER
              and s.head.transaction_kind == TransactionKind.ALIVE]
    assert probes  # main asks there (the probe itself is fine)
    net.inject(probes[0].data, ATTACKER, MINION)
    net.run_for(0.01)
    acks = [s for s in pair.wire[start:] if s.source == MINION
            and s.head.transaction_kind == TransactionKind.ALIVE
            and s.head.packet_kind == PacketKind.ACK]
    assert [s.destination for s in acks] == [MAIN]  # the minion answered, from home
    net.run_for(5.0)  # the probe times out unanswered
    remote = pair.main.remote("minion")
    assert remote.host_address == MINION
    assert not pair.events(MAIN, events.RemoteMoved)
    assert pair.main.stats.remotes_moved == 0
    assert ATTACKER not in pair.main._budget.validated
    start = len(pair.wire)
    pair.main.transmit({"after": 2}, "minion", now=net.now)
    net.run_for(1.0)
    assert any(e.body == {"after": 2} for e in pair.events(MINION, events.MessageReceived))
    assert not [s for s in pair.wire[start:] if s.destination == ATTACKER]


# -- a raced cookie relayed to the remote ----------------------------------------------


def _relay_raced_cookie(pair: Pair, *, at: Address) -> bool:
    """The minion (at ``at``) allows again; the attacker, nearer to main than the minion
    (the link takes 5 ms), gets a copy of its hello there first from its own address
    and forwards to the minion the cookie main sends the attacker.  Whether it did."""
    net = pair.net
    start = len(pair.wire)
    pair.minion.allow("main", now=net.now)
    net._flush()
    [hello] = [s for s in pair.wire[start:] if s.head.packet_kind == PacketKind.HELLO
               and s.source == at]
    net.inject(hello.data, ATTACKER, MAIN)
    forwarded = False
    while net.now < hello.at + 2:
        if not forwarded:
            cookies = [s for s in pair.wire[start:] if s.head.packet_kind == PacketKind.COOKIE
                       and s.destination == ATTACKER]
            if cookies:
                net.inject(cookies[0].data, ATTACKER, at)
                forwarded = True
        if not net.step():
            break
    return forwarded


def test_a_raced_cookie_forwarded_to_the_remote_does_not_move_it() -> None:
    """The minion's initiate, from its own address, echoes the cookie that went to the
    attacker: it proves the minion holds the keys, not that it is at the attacker's
    address.  Main must start the session and leave the minion where it is (it moved
    it to the attacker's address, validated)."""
    pair = make_pair(impairment=Impairment(delay=0.005))
    pair.allow()
    net = pair.net
    net.run_for(1.0)
    allows = len(pair.events(MINION, events.Allowed))
    assert _relay_raced_cookie(pair, at=MINION)
    net.run_for(5.0)
    remote = pair.main.remote("minion")
    assert remote.host_address == MINION
    assert not pair.events(MAIN, events.RemoteMoved)
    assert ATTACKER not in pair.main._budget.validated
    assert len(pair.events(MINION, events.Allowed)) > allows  # the allow went through
    assert remote.allowed
    assert pair.minion.remote("main").allowed
    pair.main.transmit({"after": 1}, "minion", now=net.now)
    pair.minion.transmit({"after": 2}, "main", now=net.now)
    net.run_for(2.0)
    assert any(e.body == {"after": 1} for e in pair.events(MINION, events.MessageReceived))
    assert any(e.body == {"after": 2} for e in pair.events(MAIN, events.MessageReceived))


def test_a_moved_remote_whose_raced_cookie_is_forwarded_is_followed_by_its_answer() -> None:
    """The same once the minion moved: its allow (echoing the attacker's cookie) does not
    move it; its next datagram from the new address gets it probed and followed
    there, never to the attacker's."""
    pair = make_pair(impairment=Impairment(delay=0.005))
    pair.allow()
    net = pair.net
    net.run_for(1.0)
    net.stacks[NEW], net.events[NEW] = net.stacks.pop(MINION), net.events.pop(MINION)
    allows = len(pair.events(NEW, events.Allowed))
    assert _relay_raced_cookie(pair, at=NEW)
    assert net.run_until(lambda: len(pair.events(NEW, events.Allowed)) > allows, timeout=5.0)
    assert pair.main.remote("minion").host_address != ATTACKER
    pair.minion.transmit({"after": 1}, "main", now=net.now)
    pair.main.transmit({"after": 2}, "minion", now=net.now)
    net.run_for(5.0)
    assert pair.main.remote("minion").host_address == NEW
    assert [(m.old, m.new) for m in pair.events(MAIN, events.RemoteMoved)] == [(MINION, NEW)]
    assert ATTACKER not in pair.main._budget.validated
    assert any(e.body == {"after": 1} for e in pair.events(MAIN, events.MessageReceived))
    assert any(e.body == {"after": 2} for e in pair.events(NEW, events.MessageReceived))


# -- a replayed hello of an allow that failed ----------------------------------------------


def test_a_replayed_hello_of_a_failed_allow_leaves_the_session_alone() -> None:
    """An allow of the minion fails (its cookies are lost); the next one completes.  An
    observer replays the failed allow's hello (signed by the minion, its short-term key
    in no completed allow) from its own address: main must keep the session (it dropped
    its keys at the hello, allowed None, and delivery stopped both ways for good with
    keepalive off).  The new keys take over only once an initiate verified."""
    pair, captured = _a_failed_allows_hello()
    net = pair.net
    allows = len(pair.events(MAIN, events.Allowed))
    pair.minion.allow("main", now=net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.Allowed)) > allows
                   and bool(pair.minion.remote("main").allowed))
    net.run_for(0.5)
    remote = pair.main.remote("minion")
    box = remote.session_box
    net.inject(captured.data, ATTACKER, MAIN)
    net.run_for(0.01)
    assert remote.allowed is True
    assert remote.session_box is box
    net.run_for(10.0)  # the replayed allow times out unanswered
    assert remote.allowed is True
    assert remote.session_box is box
    pair.main.transmit({"x": 1}, "minion", now=net.now)
    pair.minion.transmit({"y": 2}, "main", now=net.now)
    net.run_for(2.0)
    assert any(e.body == {"x": 1} for e in pair.events(MINION, events.MessageReceived))
    assert any(e.body == {"y": 2} for e in pair.events(MAIN, events.MessageReceived))


# -- a replayed "alive?" ------------------------------------------------------------------


def _replayed_alive(*, attack: bool) -> tuple[Pair, int]:
    pair = make_pair(main_config=RoadConfig(fast=False, reap_interval=20.0))
    pair.allow()
    net = pair.net
    net.run_for(3.0)
    request = pair.sent(TransactionKind.ALIVE, PacketKind.REQUEST, MAIN)[-1].data
    def answers() -> int:  # (acked while allowed, "unallowed" once it allows again)
        return sum(1 for s in pair.sent(TransactionKind.ALIVE, None, MINION)
                   if s.head.flags & Flag.CORRESPONDENT)

    asked = answers()
    net.blocked.add(MAIN)  # main is gone
    started = net.now
    while net.now < started + 60:
        if attack:
            net.inject(request, ATTACKER, MINION)
        net.run_for(1.0)
    answered = answers() - asked
    return pair, answered


def test_a_replayed_alive_request_is_answered_but_fakes_no_presence() -> None:
    """Main is gone; an observer replays one of its captured "alive?" requests to the
    minion every second.  The minion answers each (RAET's wire has no replay window
    for them), but it must still find main lost and try to get it back, as without the
    replays (it took each replay for main's presence: no RemoteLost, no allow tried)."""
    baseline, _ = _replayed_alive(attack=False)
    pair, answered = _replayed_alive(attack=True)
    assert answered >= 50  # every replay answered
    remote = pair.minion.remote("main")
    assert remote.alive is False
    assert len(pair.events(MINION, events.RemoteLost)) == len(
        baseline.events(MINION, events.RemoteLost))
    tried = len(pair.sent(TransactionKind.ALLOW, PacketKind.HELLO, MINION)) + len(
        pair.sent(TransactionKind.JOIN, PacketKind.REQUEST, MINION))
    assert tried > 2


def test_a_fresh_alive_request_still_says_the_remote_is_there() -> None:
    """Each new "alive?" of the remote (a newer transaction id) still counts as presence,
    also after a new allow, which may number transactions afresh."""
    pair = make_pair(main_config=RoadConfig(fast=False), minion_config=RoadConfig(fast=False))
    pair.allow()
    remote = pair.main.remote("minion")
    for _ in range(2):
        remote.alive = False
        pair.minion.alive("main", now=pair.net.now)
        pair.net.run_for(0.1)
        assert remote.alive is True
    pair.minion.allow("main", now=pair.net.now)
    pair.net.run_for(1.0)
    remote.alive = False
    pair.minion.remote("main").transaction_id = 0  # (a restarted estate numbers afresh)
    pair.minion.alive("main", now=pair.net.now)
    pair.net.run_for(0.1)
    assert remote.alive is True


def test_a_replayed_old_answer_is_not_heard_from_the_remote() -> None:
    """The minion is gone and main reaped it; one of its old alive acks (signed, main's
    current session) replayed from elsewhere must not make main think it heard the
    minion now (``last_heard``, a metric) nor resume checks of it."""
    pair = make_pair(main_config=RoadConfig(fast=False, reap_interval=20.0))
    pair.allow()
    net = pair.net
    net.run_for(3.0)
    ack = pair.sent(TransactionKind.ALIVE, PacketKind.ACK, MINION)[0].data
    net.blocked.add(MINION)
    net.run_for(40.0)
    remote = pair.main.remote("minion")
    assert remote.reaped
    heard = remote.traffic.last_heard
    assert heard is not None
    assert heard < net.now - 30
    net.inject(ack, ATTACKER, MAIN)
    net.run_for(0.01)
    assert remote.traffic.last_heard == heard
    assert remote.reaped
    assert remote.traffic.datagrams_in  # (still counted as its traffic)


def test_a_replayed_hello_of_a_failed_allow_does_not_refuse_the_remotes_next_allow() -> None:
    """The same replay, kept up every 3 s (each one's allow waits 4 s for an initiate
    nobody can send): the minion's own next allow must still go through at once, not be
    refused because another allow of it is open."""
    pair, captured = _a_failed_allows_hello()
    net = pair.net
    for _ in range(3):
        net.inject(captured.data, ATTACKER, MAIN)
        net.run_for(0.5)
        allows = len(pair.events(MINION, events.Allowed))
        pair.minion.allow("main", now=net.now)
        assert net.run_until(lambda: len(pair.events(MINION, events.Allowed)) > allows,  # noqa: B023
                             timeout=1.0)
        net.run_for(2.5)
    remote = pair.main.remote("minion")
    assert remote.allowed is True
    assert not remote.in_process(TransactionKind.ALLOW) or all(
        not t.proven for t in remote.in_process(TransactionKind.ALLOW))
    pair.main.transmit({"x": 1}, "minion", now=net.now)
    net.run_for(1.0)
    assert any(e.body == {"x": 1} for e in pair.events(MINION, events.MessageReceived))


def _a_failed_allows_hello() -> tuple[Pair, Sent]:
    """An allowed RAET-mode pair (no keepalive) after an allow of the minion failed, its
    cookies lost; the hello of that allow (signed by the minion, its short-term key in no
    completed allow), as sent."""
    pair = make_pair(main_config=RoadConfig(fast=False, keepalive=False),
                     minion_config=RoadConfig(fast=False, keepalive=False))
    pair.allow()
    net = pair.net
    net.drop = lambda s: (s.head.transaction_kind == TransactionKind.ALLOW
                          and s.head.packet_kind == PacketKind.COOKIE)
    before = len(pair.sent(TransactionKind.ALLOW, PacketKind.HELLO, MINION))
    pair.minion.allow("main", now=net.now)
    net.run_for(6.0)
    captured = pair.sent(TransactionKind.ALLOW, PacketKind.HELLO, MINION)[before]
    net.drop = None
    return pair, captured
