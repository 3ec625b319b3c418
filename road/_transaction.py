"""The shape every road transaction shares: identity, timers, sending, dispatch.

A transaction is a small state machine.  Each subclass declares a ``States``
enum and, once, a ``RULES`` table from ``(state, packet kind)`` to a :class:`Rule`: the
handler and what is checked before it runs.  :meth:`Transaction.receive` is the one
door: it looks the pair up, verifies the packet (and, for a body rule, decrypts and
parses its body) and only then calls the handler with the body.  A packet whose pair
is not in the table, or that fails its check, is dropped and counted and changes
nothing (never an exception out of the stack, never the end of the transaction: a
forged packet must not end a real one).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from raetlike.errors import PacketError
from raetlike.wire.body import coat as coat_body
from raetlike.wire.body import pack_body
from raetlike.wire.head import Head, build_head
from raetlike.wire.kinds import CoatKind, Flag, FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet, pack_packet
from road.remote import Address, Remote
from road.stats import Drop

if TYPE_CHECKING:
    from road._host import Host

__all__ = ["Index", "Rule", "Transaction", "tx_index", "rx_index"]

log = logging.getLogger(__name__)

_HANDSHAKES = frozenset({TransactionKind.JOIN, TransactionKind.ALLOW})

Index = tuple[bool, int, "int | Address", int, int, bool]


_CORRESPONDENT = int(Flag.CORRESPONDENT)
_BROADCAST = int(Flag.BROADCAST)
_FLAGS = tuple(Flag(value) for value in range(256))
_HEAD_FIELDS = frozenset(Head.__slots__)


def tx_index(head: Head, destination: Address) -> Index:
    """The index of a transaction, seen from the side that sends ``head`` (RAET's rule)."""
    flags = int(head.flags)
    correspondent = bool(flags & _CORRESPONDENT)
    near, far = head.source_uid, head.destination_uid
    far_key: int | Address = far
    if (far == 0 and not correspondent) or (near == 0 and correspondent):
        far_key = destination
    return (
        correspondent, near, far_key, head.session_id, head.transaction_id,
        bool(flags & _BROADCAST),
    )


def rx_index(head: Head, source: Address) -> Index:
    """The index of a transaction, seen from the side that receives ``head`` (RAET's rule)."""
    flags = int(head.flags)
    correspondent = bool(flags & _CORRESPONDENT)
    near, far = head.destination_uid, head.source_uid
    far_key: int | Address = far
    if (far == 0 and correspondent) or (near == 0 and not correspondent):
        far_key = source
    return (
        not correspondent, near, far_key, head.session_id, head.transaction_id,
        bool(flags & _BROADCAST),
    )


Handler = Callable[[Any, Packet, Any], "bool | None"]
"""``handler(transaction, packet, body)``: ``body`` as parsed (None for a signature rule).
A handler that drops the packet after all (a body it cannot use, counted) returns False:
the rule's next state is then not taken."""


class Rule(NamedTuple):
    """What a packet of one kind does in one state."""

    handler: Handler
    body: bool = True
    """Decrypt and parse the body before the handler runs; False: only the signature is
    checked (a message segment: its body is one piece of a coat opened when whole)."""
    then: enum.Enum | None = None
    """The state the transaction is in after the handler, unless it ended or the handler
    dropped the packet (None: the same, or the handler's choice where the next state
    depends on the packet)."""


class Transaction:
    """Base of the join, allow, alive and message transactions."""

    kind: ClassVar[TransactionKind]
    timeout: ClassVar[float] = 5.0  # seconds; 0 means never
    redo_min: ClassVar[float] = 1.0
    redo_max: ClassVar[float] = 4.0
    RULES: ClassVar[Mapping[tuple[enum.Enum, PacketKind], Rule]] = {}
    signed: ClassVar[bool] = True
    """Whether the far side's packets in it must carry its signature (RAET leaves the
    join's unsigned; a signature they do carry is checked all the same)."""

    def __init__(
        self,
        stack: Host,
        remote: Remote,
        *,
        correspondent: bool,
        session_id: int,
        transaction_id: int,
        address: Address | None = None,
    ) -> None:
        self.stack = stack
        self.remote = remote
        self.correspondent = correspondent
        self.session_id = session_id
        self.transaction_id = transaction_id
        self.address: Address = address or remote.host_address
        self.index: Index | None = None
        now = stack.now
        self.timeout_at: float | None = None  # when it gives up (None: never)
        self.redo_at: float | None = None  # when the remembered packet goes again (None: not)
        if self.timeout > 0:
            self.arm_timeout(now + self.timeout)
        self.redo_interval = self.redo_min
        self.last_sent: bytes | None = None
        self.ended = False
        self.state: enum.Enum = self.initial_state()

    # -- deadlines: each one set is told to the stack's timer heap ----------

    def arm_timeout(self, at: float) -> None:
        """Give up at ``at``."""
        self.timeout_at = at
        self.stack._wake(self, at)

    def arm_redo(self, at: float) -> None:
        """Send the remembered packet again at ``at``."""
        self.redo_at = at
        self.stack._wake(self, at)

    @property
    def proven(self) -> bool:
        """Whether the far side showed, in this transaction, that it receives what we send
        (a handshake's place is never evicted then: docs/road.md, "A main under a join
        storm")."""
        return False

    def evict(self) -> None:
        """The stack takes this handshake's place for a newcomer (it stayed unproven past
        ``handshake_grace``): end (a join quietly: its redone request is answered anew,
        its late ack still completes it, ``RoadStack._late_join_ack``; an allow refuses).
        What its timeout leaves stays, as after a timeout: a join's stranger
        (``max_pending_joins``, reaped after ``unallowed_reap_after``) lets a joiner whose
        ack came too late learn it is not joined (docs/road.md)."""
        self.fail("evicted unproven for a newcomer")

    # -- identity ---------------------------------------------------------

    def initial_state(self) -> enum.Enum:
        """The state a new transaction starts in."""
        raise NotImplementedError

    def register(self, index: Index) -> None:
        """File this transaction under ``index`` with its remote."""
        self.index = index
        self.remote.transactions[index] = self
        self.stack._track(self)

    def end(self) -> None:
        """Leave the remote's table of transactions; idempotent."""
        if self.ended:
            return
        self.ended = True
        if self.index is not None and self.remote.transactions.get(self.index) is self:
            del self.remote.transactions[self.index]
        self.stack._untrack(self)

    def fail(self, reason: str) -> None:
        """End as a failure: counted, logged, and subclasses may emit an event."""
        stats = self.stack.stats
        stats.transactions_failed += 1
        level = logging.DEBUG
        if self.kind in _HANDSHAKES:
            # an operator must see a failed join or allow, with its reason: of ours, the
            # first since the last success (retries fail quietly until one succeeds); of
            # those a peer started (it may repeat them at will), the first and every 100th
            stats.handshakes_failed += 1
            remote = self.remote
            if self.correspondent:
                loud = stats.handshakes_failed % 100 == 1
            else:
                loud = not remote.failure_warned
                remote.failure_warned = True
            if loud:
                level = logging.WARNING
        log.log(level, "%s: %s with %s failed: %s", self.stack.name,
                self.kind.name.lower(), self.remote.name, reason)
        self.end()

    # -- packets out --------------------------------------------------------

    def head(self, packet_kind: PacketKind, **fields: Any) -> Head:
        """A head for this transaction with RAET's fields for the given packet kind.

        ``fields`` (Head field names) override the transaction's; ``flags`` are
        added to the correspondent flag.
        """
        flags = (_CORRESPONDENT if self.correspondent else 0) | int(fields.pop("flags", 0))
        if not fields.keys() <= _HEAD_FIELDS:
            raise TypeError(f"not head fields: {sorted(fields.keys() - _HEAD_FIELDS)}")
        get, remote, config = fields.get, self.remote, self.stack.config
        return build_head(
            packet_kind,
            get("transaction_kind", self.kind),
            source_uid=get("source_uid", remote.uid),
            destination_uid=get("destination_uid", remote.far_uid),
            session_id=get("session_id", self.session_id),
            transaction_id=get("transaction_id", self.transaction_id),
            flags=_FLAGS[flags],
            segment_number=get("segment_number", 0),
            segment_count=get("segment_count", 1),
            message_length=get("message_length", 0),
            body_kind=get("body_kind", config.body_kind),
            coat_kind=get("coat_kind", CoatKind.NADA),
            foot_kind=get("foot_kind", FootKind.NADA),
            head_kind=get("head_kind", config.head_kind),
            stamp=get("stamp", 0.0),
            order_index=get("order_index", 0),
            version=get("version", 0),
        )

    def pack(
        self,
        packet_kind: PacketKind,
        body: Mapping[str, Any] | bytes | None = None,
        *,
        secure: bool,
        **fields: Any,
    ) -> bytes:
        """Pack one packet; ``secure`` coats (encrypts) and signs it."""
        if secure:
            fields.setdefault("coat_kind", CoatKind.NACL)
            fields.setdefault("foot_kind", FootKind.NACL)
        head = self.head(packet_kind, **fields)
        payload = pack_body(head.body_kind, body)
        if head.coat_kind == CoatKind.NACL and payload:
            box = self.remote.session_box
            if box is None:
                raise PacketError("no-session", "no short-term keys to coat with")
            payload = coat_body(payload, box)
        signer = self.stack.local.signing_key if head.foot_kind == FootKind.NACL else None
        return pack_packet(head, payload, signer)

    def send(
        self,
        packet_kind: PacketKind,
        body: Mapping[str, Any] | bytes | None = None,
        *,
        secure: bool,
        remember: bool = True,
        **fields: Any,
    ) -> bytes:
        """Pack, queue for the wire, and (by default) remember it for redo."""
        data = self.pack(packet_kind, body, secure=secure, **fields)
        self.stack._queue(data, self.address)
        traffic = self.remote.traffic
        traffic.datagrams_out += 1
        traffic.bytes_out += len(data)
        if remember:
            self.last_sent = data
            self.arm_redo(self.stack.now + self.redo_interval)
        return data

    def follow(self, old: Address, new: Address) -> None:
        """The remote moved from ``old`` to ``new``: what we send to it goes there now."""
        if self.address == old:
            self.address = new

    def resend_last(self) -> None:
        """Put the remembered packet on the wire again."""
        if self.last_sent is not None:
            self.stack._queue(self.last_sent, self.address)
            traffic = self.remote.traffic
            traffic.datagrams_out += 1
            traffic.bytes_out += len(self.last_sent)
            traffic.resends += 1

    # -- packets in ---------------------------------------------------------

    def receive(self, packet: Packet, _source: Address) -> None:
        """The one door: the rule for (state, kind), the packet checked as it says, then
        its handler; anything else is dropped and counted, and changes nothing."""
        rule = self.RULES.get((self.state, packet.head.packet_kind))
        if rule is None:
            self.stack.stats.drop(Drop.UNEXPECTED)
            log.debug("%s: %s in state %s dropped an unexpected %s", self.stack.name,
                      type(self).__name__, self.state.name, packet.head.packet_kind.name)
            return
        if rule.body:
            body = self.open(packet, signed=self.signed)
            if body is None:
                return
        elif self.stack._verify(self.remote, packet, signed=self.signed):
            body = None
        else:
            return
        taken = rule.handler(self, packet, body)
        if rule.then is not None and taken is not False and not self.ended:
            self.state = rule.then

    def open(self, packet: Packet, *, signed: bool) -> Any:
        """Verify, decrypt and parse a packet's body; None (and counted) when it fails."""
        return self.stack._open(self.remote, packet, signed=signed)

    # -- time ---------------------------------------------------------------

    def deadline(self) -> float | None:
        """The next moment this transaction wants ``handle_timer``."""
        times = [t for t in (self.timeout_at, self.redo_at) if t is not None]
        return min(times) if times else None

    def handle_timer(self, now: float) -> None:
        """Time out or redo, as due."""
        if self.timeout_at is not None and now >= self.timeout_at:
            self.on_timeout()
            return
        if self.redo_at is not None and now >= self.redo_at:
            self.redo_interval = min(max(self.redo_min, self.redo_interval * 2.0), self.redo_max)
            self.arm_redo(now + self.redo_interval)
            self.on_redo()

    def on_timeout(self) -> None:
        """The transaction ran out of time."""
        self.fail("timed out")

    def on_redo(self) -> None:
        """The redo timer fired: by default send the remembered packet again."""
        self.resend_last()

