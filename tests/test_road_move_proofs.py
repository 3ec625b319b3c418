"""A remote's address changes only when it answers at the new address, and what the
network says changes no state until it is shown fresh (docs/security.md, "Addresses").

Each test is one attack of the movefix review on the simulated link (virtual clock,
deterministic): the attacker sees, copies, replays, forwards and injects datagrams
from any address it likes, but holds no keys.
"""

from __future__ import annotations

from raetlike.wire.kinds import PacketKind, TransactionKind
from road import events
from tests.roadkit import MAIN, MINION, allowed_pair
from tests.simlink import Address

ATTACKER: Address = ("127.0.0.9", 4444)


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

