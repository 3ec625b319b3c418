"""Alive (tk 4): presence checks, encrypted and signed, answered by ack."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar

from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import Packet
from road._rejoin import rejoin_when_unjoined
from road._transaction import Rule, Transaction
from road.stats import Drop

if TYPE_CHECKING:
    from road._host import AliveHost
    from road.remote import Address, Remote

__all__ = ["Aliver", "FallbackTrial", "PathProbe", "answer_alive"]


class Aliver(Transaction):
    """We ask whether the remote is there."""

    stack: AliveHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.ALIVE
    timeout: ClassVar[float] = 2.0
    redo_min: ClassVar[float] = 0.25
    redo_max: ClassVar[float] = 1.0

    class States(enum.Enum):
        ASKED = "asked"

    def __init__(self, stack: AliveHost, remote: Remote, address: Address | None = None) -> None:
        super().__init__(
            stack, remote, correspondent=False, session_id=remote.session_id,
            transaction_id=remote.next_transaction_id(), address=address,
        )
        if remote.alive_timeout is not None:  # (the class's deadline, armed above, goes stale)
            self.arm_timeout(stack.now + remote.alive_timeout)
        self.asked_at = stack.now

    def initial_state(self) -> enum.Enum:
        return self.States.ASKED

    def start(self) -> None:
        """Send the (empty, coated and signed) request."""
        remote = self.remote
        self.register((False, remote.uid, remote.far_uid, self.session_id,
                       self.transaction_id, False))
        self.send(PacketKind.REQUEST, None, secure=True)

    def on_timeout(self) -> None:
        self.fail("no answer")
        self.stack._presence(self.remote, alive=False, reason="no answer to alive")

    def on_ack(self, _packet: Packet, _body: Any) -> None:
        self.end()
        self.stack._presence(self.remote, alive=True)
        self.stack._alive_answered(self.remote, self.asked_at)

    def on_refuse(self, _packet: Packet, _body: Any) -> None:
        self.fail("refused")

    def on_reject(self, _packet: Packet, _body: Any) -> None:
        self.fail("rejected")
        self.stack._presence(self.remote, alive=False, reason="alive rejected")

    on_unjoined = rejoin_when_unjoined

    def on_unallowed(self, _packet: Packet, _body: Any) -> None:
        self.remote.allowed = False
        self.fail("far side says we are not allowed")
        self.stack._start_allow(self.remote)

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (States.ASKED, PacketKind.ACK): Rule(on_ack),
        (States.ASKED, PacketKind.NACK): Rule(on_refuse),
        (States.ASKED, PacketKind.REFUSE): Rule(on_refuse),
        (States.ASKED, PacketKind.REJECT): Rule(on_reject),
        (States.ASKED, PacketKind.UNJOINED): Rule(on_unjoined),
        (States.ASKED, PacketKind.UNALLOWED): Rule(on_unallowed),
    }


class FallbackTrial(Aliver):
    """"Alive?" asked by fast mode to learn whether the peer answers signed packets while
    its fast datagrams go unacknowledged (``road._fast_link``, ``_fallback_due``).

    Its answer (signed) says the peer is there; its silence only ends the trial: a peer
    stalled a few seconds (a main under a join storm) is not lost for it.  Whether a
    remote is lost is the presence checks' verdict alone, on their own ``period`` and
    timeout, and none at all with ``keepalive`` off.
    """

    def on_timeout(self) -> None:
        self.fail("no answer to the fallback's alive")


class PathProbe(Aliver):
    """"Alive?" asked at an address the remote spoke from, not its host address.

    The request goes there only, coated with the session's keys; the remote's signed
    ack to it, *from there*, proves both the keys and that it is there, so then the
    remote moves (:meth:`RoadStack._moved`; QUIC's path validation, with RAET's
    alive).  An answer from anywhere else is dropped and changes nothing: the remote
    answers "alive?" at its host address for us, not where the request came from, so
    an attacker that replayed a datagram of it from its own address (we probe there)
    and forwarded our probe to the remote would otherwise get its real ack, from its
    real address, taken for proof that it moved to the attacker's.  An unanswered
    probe changes nothing (no presence verdict, the session stands): it may have been
    started by a datagram replayed or copied from elsewhere.
    """

    def receive(self, packet: Packet, source: Address) -> None:
        """Only what comes from the probed address answers the probe."""
        if source != self.address:
            self.stack.stats.drop(Drop.STALE_PACKET)
            return
        super().receive(packet, source)

    def on_timeout(self) -> None:
        self.fail("no answer at the new address")

    def on_ack(self, _packet: Packet, _body: Any) -> None:
        self.end()
        if self.address != self.remote.host_address:
            self.stack._moved(self.remote, self.address)
        self.stack._presence(self.remote, alive=True)

    def on_no(self, _packet: Packet, _body: Any) -> None:
        self.fail("refused at the new address")  # (presence checks at home say the rest)

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (Aliver.States.ASKED, PacketKind.ACK): Rule(on_ack),
        (Aliver.States.ASKED, PacketKind.NACK): Rule(on_no),
        (Aliver.States.ASKED, PacketKind.REFUSE): Rule(on_no),
        (Aliver.States.ASKED, PacketKind.REJECT): Rule(on_no),
        (Aliver.States.ASKED, PacketKind.UNJOINED): Rule(on_no),
        (Aliver.States.ASKED, PacketKind.UNALLOWED): Rule(on_no),
    }


class _Alivent(Transaction):
    """A one-shot answer; never registered, so it has no timers."""

    stack: AliveHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.ALIVE
    timeout: ClassVar[float] = 0.0

    class States(enum.Enum):
        ANSWERING = "answering"

    def initial_state(self) -> enum.Enum:
        return self.States.ANSWERING


def answer_alive(stack: AliveHost, remote: Remote, packet: Packet) -> bool:
    """Answer an alive request: ack, or unjoined / unallowed.  Whether it was acked.

    Every verified request is answered, replays included (RAET 0.6.8's wire has no
    replay window for them); whether it says the remote is there is the caller's
    question (``RoadStack._correspond``: only a request newer than any before in the
    session does, or a captured one replayed would fake a gone remote's presence).
    """
    answer = _Alivent(
        stack, remote, correspondent=True, session_id=packet.head.session_id,
        transaction_id=packet.head.transaction_id,
    )
    if answer.open(packet, signed=True) is None:
        return False
    if not remote.joined:
        answer.send(PacketKind.UNJOINED, None, secure=True, remember=False)
        return False
    if not remote.allowed or remote.session_box is None:
        answer.send(PacketKind.UNALLOWED, None, secure=True, remember=False)
        return False
    answer.send(PacketKind.ACK, None, secure=True, remember=False)
    return True
