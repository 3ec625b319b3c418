"""Inbound dispatch of RAET packets (RAET's processRx): find the remote a packet is about,
hand it to its transaction or open a new one, and nack what is stale.

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raetlike.errors import CryptoError, PacketError
from raetlike.wire.body import parse_body, uncoat
from raetlike.wire.head import Head
from raetlike.wire.kinds import CoatKind, Flag, FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet
from road._alive import answer_alive
from road._allow import Allowent
from road._join import Joinent
from road._message import Messengent, done_again
from road._transaction import rx_index
from road.remote import Address, Remote
from road.stats import Drop

if TYPE_CHECKING:
    from road.stack import RoadStack

_BROADCAST = int(Flag.BROADCAST)
_CORRESPONDENT = int(Flag.CORRESPONDENT)
_NACK_KINDS = frozenset({
    PacketKind.NACK, PacketKind.UNJOINED, PacketKind.UNALLOWED, PacketKind.RENEW,
    PacketKind.REFUSE, PacketKind.REJECT,
})


def process(stack: RoadStack, packet: Packet, source: Address) -> None:
    """Route one parsed packet; a non-join packet is authenticated here, at the door.

    No field of a non-join packet (session id, transaction id, flags, address)
    touches a remote's state until its signature has verified with that
    remote's key: :func:`authenticated_remote` runs before the session check and
    before any transaction sees the packet.  Join packets are unsigned on
    RAET 0.6.8's wire; what they say is a claim the join transaction weighs.
    """
    head = packet.head
    flags = int(head.flags)  # int operations: enum flag operations cost microseconds
    if flags & _BROADCAST:
        stack.stats.drop(Drop.BROADCAST)
        return
    remote: Remote | None
    if head.transaction_kind == TransactionKind.JOIN:
        proceed, remote = join_remote(stack, packet, source)
        if not proceed:
            return
    else:
        remote = authenticated_remote(stack, packet)
        if remote is None or not session_current(stack, remote, packet, source):
            return
    if remote is not None:
        transaction = remote.transactions.get(rx_index(head, source))
        if transaction is not None:
            transaction.receive(packet, source)
            return
    if flags & _CORRESPONDENT:
        stack.stats.drop(Drop.STALE_PACKET)
        stale(stack, packet, source)
        return
    if remote is None:
        stack.stats.drop(Drop.UNKNOWN_REMOTE)
        return
    correspond(stack, packet, source, remote)


def join_remote(
    stack: RoadStack, packet: Packet, source: Address,
) -> tuple[bool, Remote | None]:
    """The remote a join packet is about (RAET's rules), or (False, None) to drop it."""
    head = packet.head
    near, far = head.destination_uid, head.source_uid
    if head.session_id != 0:
        stack.stats.drop(Drop.JOIN_NONZERO_SESSION)
        return False, None
    if head.flags & Flag.CORRESPONDENT:
        if near == 0:
            stack.stats.drop(Drop.JOIN_INVALID_ID)
            return False, None
        if far != 0:
            return True, stack.remotes.get(near)
        remote = stack.joinees.get(source)
        if remote is not None and remote.uid != near:
            stack.stats.drop(Drop.JOIN_MISMATCH)
            return False, None
        return True, remote
    if far == 0:
        stack.stats.drop(Drop.JOIN_INVALID_ID)
        return False, None
    if near != 0:
        remote = stack.remotes.get(near)
        if remote is None:
            renew(stack, packet, source)
            return False, None
        return True, remote
    remote = stack.joinees.get(source)
    if remote is not None and remote.far_uid not in (far, 0):
        del stack.joinees[source]
        remote = None
    if remote is None:
        if head.packet_kind != PacketKind.REQUEST:
            stack.stats.drop(Drop.JOIN_STALE)
            return False, None
        remote = Remote(uid=stack.register.next_uid(), name=f"{source[0]}:{source[1]}",
                        host_address=source, fqdn=source[0])
    return True, remote


def authenticated_remote(stack: RoadStack, packet: Packet) -> Remote | None:
    """The remote a non-join packet is about, once its signature has verified; else None.

    Drops (and counts) a packet with a zero session or id, for an unknown
    remote, unsigned, or not signed by that remote's key.  Changes nothing else.
    """
    head = packet.head
    if head.session_id == 0:
        stack.stats.drop(Drop.ZERO_SESSION)
        return None
    if head.destination_uid == 0 or head.source_uid == 0:
        stack.stats.drop(Drop.ZERO_ID)
        return None
    remote = stack.remotes.get(head.destination_uid)
    if remote is None:
        stack.stats.drop(Drop.UNKNOWN_REMOTE)
        return None
    if not verify(stack, remote, packet, signed=True):
        return None
    stack._authentic = (packet, remote)  # handlers' verify() finds it checked already
    stack._heard_from(remote, len(packet.raw_head) + len(packet.coat) + len(packet.foot))
    return remote


def session_current(stack: RoadStack, remote: Remote, packet: Packet, source: Address) -> bool:
    """RAET's session rule for an authenticated packet: nack a stale session, take a newer one."""
    head = packet.head
    if not int(head.flags) & _CORRESPONDENT:
        if not remote.remote_session_is_valid(head.session_id):
            stack.stats.drop(Drop.STALE_SESSION)
            reply_stale(stack, packet, source)
            return False
        if head.session_id != remote.remote_session_id:
            remote.remote_session_id = head.session_id
            stack._remove_stale_correspondents(remote)
    if remote.reaped:
        remote.reaped = False
        stack._schedule(remote)  # presence checks resume
    return True


def correspond(stack: RoadStack, packet: Packet, source: Address, remote: Remote) -> None:
    head = packet.head
    kinds = (head.transaction_kind, head.packet_kind)
    index = rx_index(head, source)
    if kinds == (TransactionKind.JOIN, PacketKind.REQUEST):
        Joinent(stack, remote, packet, source).start(index)
    elif kinds == (TransactionKind.ALLOW, PacketKind.HELLO):
        Allowent(stack, remote, packet).start(index)
    elif kinds == (TransactionKind.ALIVE, PacketKind.REQUEST):
        answer_alive(stack, remote, packet)
    elif kinds == (TransactionKind.MESSAGE, PacketKind.MESSAGE):
        tid = head.transaction_id
        if (head.session_id, tid) in remote.done_transactions:
            done_again(stack, remote, packet)
        elif head.flags & Flag.AGAIN:
            stack.stats.drop(Drop.STALE_PACKET)
            reply_stale(stack, packet, source)
        elif (remote.delivered is not None and remote.delivered_session == head.session_id
              and remote.delivered.seen(tid)):
            # delivered in this session already (or too far behind to tell): never twice
            stack.stats.drop(Drop.REPLAYED)
            reply_stale(stack, packet, source)
        else:
            Messengent(stack, remote, packet).start(index, packet)
    else:
        stack.stats.drop(Drop.STALE_PACKET)


def nack_head(stack: RoadStack, packet: Packet, kind: PacketKind, source_uid: int) -> Head:
    head = packet.head
    flags = Flag(0) if head.flags & Flag.CORRESPONDENT else Flag.CORRESPONDENT
    return Head(
        packet_kind=kind, transaction_kind=head.transaction_kind,
        source_uid=source_uid, destination_uid=head.source_uid,
        session_id=head.session_id, transaction_id=head.transaction_id, flags=flags,
        head_kind=stack.config.head_kind, body_kind=stack.config.body_kind,
        coat_kind=head.coat_kind, foot_kind=head.foot_kind,
    )


def send_nack(stack: RoadStack, head: Head, source: Address) -> None:
    from raetlike.wire.packet import pack_packet  # noqa: PLC0415 - keeps the import graph flat

    signer = stack.local.signing_key if head.foot_kind == FootKind.NACL else None
    stack._queue(pack_packet(head, b"", signer), source)
    stack.stats.nacks_sent += 1


def stale(stack: RoadStack, packet: Packet, source: Address) -> None:
    """An answer to a transaction we do not have: nack it, unless it is a nack."""
    if packet.head.packet_kind in _NACK_KINDS:
        return
    remote = stack.remotes.get(packet.head.destination_uid)
    if remote is None:
        return
    send_nack(stack, nack_head(stack, packet, PacketKind.NACK, remote.uid), source)


def reply_stale(stack: RoadStack, packet: Packet, source: Address) -> None:
    """A request in a stale session or for a finished transaction: nack it."""
    if packet.head.packet_kind in _NACK_KINDS - {PacketKind.RENEW}:
        return
    head = nack_head(stack, packet, PacketKind.NACK, packet.head.destination_uid)
    send_nack(stack, head, source)


def renew(stack: RoadStack, packet: Packet, source: Address) -> None:
    """A non-vacuous join for a uid we do not know: ask the joiner to renew."""
    stack.stats.drop(Drop.UNKNOWN_REMOTE)
    head = nack_head(stack, packet, PacketKind.RENEW, packet.head.destination_uid)
    send_nack(stack, head, source)


def verify(stack: RoadStack, remote: Remote, packet: Packet, *, signed: bool) -> bool:
    """Whether ``packet`` is signed by ``remote`` (or, with ``signed`` False, unsigned);
    a packet already authenticated at the door is not checked twice."""
    authentic = stack._authentic
    if authentic[0] is packet and authentic[1] is remote:
        return True
    if packet.head.foot_kind == FootKind.NACL:
        if remote.verify_key is None:
            stack.stats.drop(Drop.UNVERIFIABLE)
            return False
        try:
            packet.verify(remote.verify_key)
        except (CryptoError, PacketError):
            stack.stats.drop(Drop.BAD_SIGNATURE)
            return False
    elif signed:
        stack.stats.drop(Drop.UNSIGNED)
        return False
    return True


def open_body(stack: RoadStack, remote: Remote, packet: Packet, *, signed: bool) -> Any:
    if not verify(stack, remote, packet, signed=signed):
        return None
    payload = packet.coat
    if packet.head.coat_kind == CoatKind.NACL and payload:
        if remote.session_box is None:
            stack.stats.drop(Drop.BAD_COAT)
            return None
        try:
            payload = uncoat(payload, remote.session_box)
        except (PacketError, CryptoError):
            stack.stats.drop(Drop.BAD_COAT)
            return None
    try:
        return parse_body(packet.head.body_kind, payload)
    except PacketError:
        stack.stats.drop(Drop.BAD_BODY)
        return None
