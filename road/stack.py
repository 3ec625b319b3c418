"""RoadStack: a sans-IO UDP stack of estates.

Feed datagrams in with :meth:`RoadStack.receive_datagram`, take datagrams
out with :meth:`RoadStack.datagrams_to_send`, sleep until
:meth:`RoadStack.get_timer`, then call :meth:`RoadStack.handle_timer`; read
what happened with :meth:`RoadStack.next_event`.  ``now`` is monotonic
seconds, always passed in: the stack has no clock and no socket.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raetlike.crypto import PrivateKey, PublicKey, SigningKey, VerifyKey
from raetlike.errors import BackpressureError, CryptoError, LocalProtocolError, PacketError
from raetlike.wire.body import parse_body, uncoat
from raetlike.wire.head import Head
from raetlike.wire.kinds import (
    Acceptance,
    AutoMode,
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    TransactionKind,
)
from raetlike.wire.packet import Packet, parse_packet
from road import events
from road._alive import Aliver, answer_alive
from road._allow import Allowent, Allower
from road._fast import FastRoad
from road._fast_wire import is_fast
from road._join import Joinent, Joiner
from road._message import Messengent, Messenger, done_again
from road._transaction import Transaction, rx_index, tx_index
from road.keeping import MemoryKeep, RoadKeep
from road.remote import Address, Outgoing, Remote
from road.stats import Drop, RoadStats

__all__ = ["LocalEstate", "RoadConfig", "RoadStack"]

log = logging.getLogger(__name__)

_BROADCAST = int(Flag.BROADCAST)
_CORRESPONDENT = int(Flag.CORRESPONDENT)
_NACK_KINDS = frozenset({
    PacketKind.NACK, PacketKind.UNJOINED, PacketKind.UNALLOWED, PacketKind.RENEW,
    PacketKind.REFUSE, PacketKind.REJECT,
})


@dataclass(slots=True)
class LocalEstate:
    """Who we are on the road."""

    name: str
    signing_key: SigningKey = field(default_factory=SigningKey.generate)
    private_key: PrivateKey = field(default_factory=PrivateKey.generate)
    main: bool = False
    kind: int = 0
    role: str = ""
    uid: int = 1
    fqdn: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise LocalProtocolError("an estate needs a name")
        if not self.role:
            self.role = self.name
        if not 0 <= self.kind <= 255:
            raise LocalProtocolError(f"estate kind must be 0..255, got {self.kind}")


@dataclass(slots=True)
class RoadConfig:
    """Settings of a RoadStack; the defaults are RAET 0.6.8's where it has one."""

    head_kind: HeadKind = HeadKind.RAET
    body_kind: BodyKind = BodyKind.JSON
    mutable: bool = False
    """Whether joins may change a known remote's credentials."""
    auto: AutoMode = AutoMode.ONCE
    """Acceptance of new keys when no keep is given."""
    keepalive: bool = True
    """Check presence of every remote periodically (and join/allow as needed)."""
    period: float = 1.0
    """Seconds between presence checks (main); others add ``offset``."""
    offset: float = 0.5
    reap_interval: float = 3600.0
    """Main only: a remote unseen this long is reaped (0 disables)."""
    window: int = 128
    """Segments in flight per remote, across its messages."""
    burst: int = 64
    """Segments per burst of one message (the last has the wait flag)."""
    max_messages_in_flight: int = 128
    """Message transactions open at once per remote."""
    max_redos: int = 40
    """Unanswered resends (0.2-0.5 s apart) before the remote is declared dead."""
    message_ttl: float = 600.0
    """Seconds a message may wait or travel before it comes back as MessageExpired."""
    outbox_limit: int = 100_000
    """Messages queued per remote before transmit raises BackpressureError."""
    done_memory: float = 600.0
    """How long delivered transaction ids are remembered (stale detection)."""
    rejoin_interval: float = 2.0
    """Seconds between join attempts to a remote we were asked to join."""
    fast: bool = True
    """Advertise fast mode in joins; used with remotes that advertise it too (docs/road.md).

    False keeps every remote in RAET 0.6.8 mode (signed, per-packet boxed)."""
    fast_datagram_size: int = 1232
    """Fast mode's largest datagram (bytes): 1232 fits any IPv6 path; loopback takes 65000."""
    fast_max_window: int = 2 * 1024 * 1024
    """Fast mode's cap on bytes in flight per remote; keep it under the peer's receive buffer."""
    fast_ack_delay: float = 0.005
    """Fast mode: how long a lone ack-eliciting datagram may wait for company before its ack."""
    fast_messages_in_flight: int = 8192
    """Fast mode: messages sent but not yet acknowledged per remote (the ordering bound)."""
    fast_fallback_probes: int = 4
    """Fast mode: probe timeouts with not one fast datagram acknowledged yet (per allow)
    before falling back to RAET mode (docs/road.md, "Falling back"); 0 disables."""
    fast_fallback_after: float = 3.0
    """Fast mode: seconds a fast datagram may stay unacknowledged, with none acknowledged
    yet since the allow, before falling back to RAET mode; 0 disables."""
    max_pending_joins: int = 1000
    """Main: estates added by vacuous joins not completed yet ("strangers") kept at once; past
    it the oldest is removed (``stats.joins_evicted``), so a join flood stays bounded."""


class RoadStack:
    """A sans-IO road stack: one local estate and its remotes."""

    def __init__(
        self,
        local: LocalEstate,
        config: RoadConfig | None = None,
        keep: RoadKeep | None = None,
        now: float = 0.0,
    ) -> None:
        self.local = local
        self.config = config or RoadConfig()
        self.keep: RoadKeep = keep if keep is not None else MemoryKeep(self.config.auto)
        self.now = now
        self.stats = RoadStats()
        self.remotes: dict[int, Remote] = {}
        self.names: dict[str, Remote] = {}
        self.joinees: dict[Address, Remote] = {}
        self._last_uid = local.uid
        self._message_id = 0
        self._out: deque[tuple[bytes, Address]] = deque()
        self._events: deque[events.Event] = deque()
        self._transactions: dict[Transaction, None] = {}
        self._stalled: dict[int, dict[Messenger, None]] = {}
        self._in_flight: dict[int, dict[Messenger, None]] = {}
        self._launched: dict[int, int] = {}  # uid -> messages started to it so far
        self._want_joined: dict[int, float] = {}  # uid -> next join attempt
        # Lazy timer heaps: an entry may be stale (the deadline moved later or
        # its owner is gone); it then only causes one early handle_timer.
        self._transaction_timers: list[tuple[float, int, Transaction]] = []
        self._remote_timers: list[tuple[float, int]] = []
        self._timer_order = itertools.count()
        self._strangers: dict[int, None] = {}  # uids added by vacuous joins, not joined yet
        self._fast = FastRoad(self)
        self.closed = False

    @property
    def name(self) -> str:
        """The local estate's name."""
        return self.local.name

    # == commands ==========================================================

    def join(self, address: Address | None = None, *, name: str | None = None,
             now: float | None = None) -> str:
        """Join the estate at ``address`` (vacuously) or the known remote ``name``.

        Returns the remote's name (a placeholder until the join names it).
        Failed joins are retried every ``rejoin_interval`` until joined.
        """
        self._tick(now)
        remote: Remote | None
        if name is not None:
            remote = self._by_name(name)
        elif address is not None:
            remote = self._remote_at(address) or self.add_remote(address)
        else:
            raise LocalProtocolError("join needs an address or a remote name")
        self._want_joined[remote.uid] = self.now
        self._start_join(remote)
        return remote.name

    def add_remote(self, address: Address, name: str | None = None) -> Remote:
        """Record a remote estate we intend to talk to (not yet joined)."""
        remote = Remote(uid=self._next_uid(), name=name or f"{address[0]}:{address[1]}",
                        host_address=address, fqdn=address[0])
        self._add_remote(remote)
        return remote

    def allow(self, name: str, *, now: float | None = None) -> None:
        """Start an allow handshake with the remote ``name`` (joining first if needed)."""
        self._tick(now)
        self._start_allow(self._by_name(name))

    def alive(self, name: str, *, now: float | None = None) -> None:
        """Check the presence of the remote ``name`` now."""
        self._tick(now)
        self._start_alive(self._by_name(name))

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None, now: float | None = None) -> int:
        """Queue ``message`` for the remote ``to``; returns its message id.

        The message waits in a bounded outbox until the remote is allowed and
        the window has room.  Raises :class:`BackpressureError` when the
        outbox is full.  Its fate comes back as ``MessageSent`` or
        ``MessageExpired`` (never silence).
        """
        if now is not None:
            self.now = now
        if self.closed:
            raise LocalProtocolError("the stack is closed")
        exact = type(message) is bytes  # the common case: no ABC check, no copy
        if not exact and not isinstance(message, Mapping | bytes | bytearray):
            raise LocalProtocolError(
                f"a message must be a mapping or bytes, not {type(message).__name__}")
        remote = self.names.get(to) or self._by_name(to)
        config = self.config
        if len(remote.outbox) >= config.outbox_limit:
            raise BackpressureError(
                f"outbox to {to} is full ({config.outbox_limit} messages)")
        self._message_id += 1
        expires = self.now + (config.message_ttl if ttl is None else ttl)
        body = message if exact else (
            dict(message) if isinstance(message, Mapping) else bytes(message))
        remote.outbox.append(Outgoing(self._message_id, body, expires))
        if not (self._fast.links and self._fast.queued(remote, expires)):
            # (a fast link watches its outbox's expiries itself: no heap entry per message)
            self._watch_expiry(remote, expires)
            self._pump(remote)
        return self._message_id

    def close(self, *, now: float | None = None) -> None:
        """End every transaction and give back every queued message as MessageExpired."""
        self._tick(now)
        for transaction in list(self._transactions):
            if isinstance(transaction, Messenger):
                transaction.end()
                transaction.remote.outbox.appendleft(transaction.outgoing)
            else:
                transaction.end()
        for remote in self.remotes.values():
            while remote.outbox:
                outgoing = remote.outbox.popleft()
                self._expire(remote, outgoing, "stack closed")
        self._fast.close()
        self.closed = True

    def remote(self, name: str) -> Remote:
        """The remote estate called ``name``."""
        return self._by_name(name)

    # == sans-IO pump ======================================================

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        """Take one datagram from ``source``; garbage is dropped and counted, never raised."""
        self._tick(now)
        self.stats.datagrams_received += 1
        self.stats.bytes_received += len(data)
        if is_fast(data):
            self._fast.receive(data, now)
            return
        try:
            packet = parse_packet(data)
        except PacketError as exc:
            self.stats.drop(Drop.MALFORMED)
            log.debug("%s: malformed datagram from %s: %s", self.name, source, exc)
            return
        try:
            self._process(packet, source)
        except (PacketError, CryptoError) as exc:
            self.stats.drop(Drop.MALFORMED)
            log.debug("%s: bad packet from %s: %s", self.name, source, exc)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        """Everything queued for the wire, in order."""
        self._tick(now)
        fast = self._fast.datagrams(self.now) if self._fast.links else []
        out = list(self._out)
        self._out.clear()
        out.extend(fast)
        self.stats.datagrams_sent += len(out)
        self.stats.bytes_sent += sum(len(d) for d, _ in out)
        return out

    def get_timer(self) -> float | None:
        """The earliest moment the stack wants :meth:`handle_timer`, or None when idle."""
        times: list[float] = []
        heap = self._transaction_timers
        while heap and (heap[0][2].ended or heap[0][2] not in self._transactions):
            heapq.heappop(heap)
        if heap:
            times.append(heap[0][0])
        remote_heap = self._remote_timers
        while remote_heap and remote_heap[0][1] not in self.remotes:
            heapq.heappop(remote_heap)
        if remote_heap:
            times.append(remote_heap[0][0])
        times.extend(self._want_joined.values())
        if self._fast.links and (fast := self._fast.deadline(self.now)) is not None:
            times.append(fast)
        return min(times) if times else None

    def handle_timer(self, now: float) -> None:
        """Let due timers fire: redos, timeouts, presence, reaping, expiries, rejoins."""
        self._tick(now)
        heap = self._transaction_timers
        fired: dict[Transaction, None] = {}
        while heap and heap[0][0] <= now:
            fired[heapq.heappop(heap)[2]] = None
        for transaction in fired:
            if transaction.ended or transaction not in self._transactions:
                continue
            deadline = transaction.deadline()
            if deadline is not None and deadline <= now:
                transaction.handle_timer(now)
        remote_heap = self._remote_timers
        uids: dict[int, None] = {}
        while remote_heap and remote_heap[0][0] <= now:
            uids[heapq.heappop(remote_heap)[1]] = None
        for uid in uids:
            remote = self.remotes.get(uid)
            if remote is not None:
                self._manage(remote)
                self._schedule(remote)
        self._fast.handle_timer(now)
        for uid, due in list(self._want_joined.items()):
            wanted = self.remotes.get(uid)
            if wanted is None or wanted.joined:
                self._want_joined.pop(uid, None)
            elif due <= now:
                # a join still open keeps its turn: look again later, never spin on a past deadline
                self._want_joined[uid] = now + self.config.rejoin_interval
                if not wanted.in_process(TransactionKind.JOIN):
                    self._start_join(wanted)

    def next_event(self) -> events.Event | None:
        """The oldest event not yet taken, or None."""
        return self._events.popleft() if self._events else None

    # == inbound dispatch (RAET's processRx) ===============================

    def _process(self, packet: Packet, source: Address) -> None:
        head = packet.head
        flags = int(head.flags)  # int operations: enum flag operations cost microseconds
        if flags & _BROADCAST:
            self.stats.drop(Drop.BROADCAST)
            return
        if head.transaction_kind == TransactionKind.JOIN:
            proceed, remote = self._join_remote(packet, source)
        else:
            proceed, remote = self._session_remote(packet, source)
        if not proceed:
            return
        if remote is not None:
            transaction = remote.transactions.get(rx_index(head, source))
            if transaction is not None:
                transaction.receive(packet, source)
                return
        if flags & _CORRESPONDENT:
            self.stats.drop(Drop.STALE_PACKET)
            self._stale(packet, source)
            return
        if remote is None:
            self.stats.drop(Drop.UNKNOWN_REMOTE)
            return
        self._correspond(packet, source, remote)

    def _join_remote(self, packet: Packet, source: Address) -> tuple[bool, Remote | None]:
        """The remote a join packet is about (RAET's rules), or (False, None) to drop it."""
        head = packet.head
        near, far = head.destination_uid, head.source_uid
        if head.session_id != 0:
            self.stats.drop(Drop.JOIN_NONZERO_SESSION)
            return False, None
        if head.flags & Flag.CORRESPONDENT:
            if near == 0:
                self.stats.drop(Drop.JOIN_INVALID_ID)
                return False, None
            if far != 0:
                return True, self.remotes.get(near)
            remote = self.joinees.get(source)
            if remote is not None and remote.uid != near:
                self.stats.drop(Drop.JOIN_MISMATCH)
                return False, None
            return True, remote
        if far == 0:
            self.stats.drop(Drop.JOIN_INVALID_ID)
            return False, None
        if near != 0:
            remote = self.remotes.get(near)
            if remote is None:
                self._renew(packet, source)
                return False, None
            return True, remote
        remote = self.joinees.get(source)
        if remote is not None and remote.far_uid not in (far, 0):
            del self.joinees[source]
            remote = None
        if remote is None:
            if head.packet_kind != PacketKind.REQUEST:
                self.stats.drop(Drop.JOIN_STALE)
                return False, None
            remote = Remote(uid=self._next_uid(), name=f"{source[0]}:{source[1]}",
                            host_address=source, fqdn=source[0])
        return True, remote

    def _session_remote(self, packet: Packet, source: Address) -> tuple[bool, Remote | None]:
        """The remote a non-join packet is about, after RAET's session checks."""
        head = packet.head
        if head.session_id == 0:
            self.stats.drop(Drop.ZERO_SESSION)
            return False, None
        if head.destination_uid == 0 or head.source_uid == 0:
            self.stats.drop(Drop.ZERO_ID)
            return False, None
        remote = self.remotes.get(head.destination_uid)
        if remote is None:
            return True, None
        if not int(head.flags) & _CORRESPONDENT:
            if not remote.remote_session_is_valid(head.session_id):
                self.stats.drop(Drop.STALE_SESSION)
                self._reply_stale(packet, source)
                return False, None
            if head.session_id != remote.remote_session_id:
                remote.remote_session_id = head.session_id
                self._remove_stale_correspondents(remote)
        if remote.reaped:
            remote.reaped = False
            self._schedule(remote)  # presence checks resume
        return True, remote

    def _correspond(self, packet: Packet, source: Address, remote: Remote) -> None:
        head = packet.head
        kinds = (head.transaction_kind, head.packet_kind)
        index = rx_index(head, source)
        if kinds == (TransactionKind.JOIN, PacketKind.REQUEST):
            Joinent(self, remote, packet, source).start(index)
        elif kinds == (TransactionKind.ALLOW, PacketKind.HELLO):
            Allowent(self, remote, packet).start(index)
        elif kinds == (TransactionKind.ALIVE, PacketKind.REQUEST):
            answer_alive(self, remote, packet)
        elif kinds == (TransactionKind.MESSAGE, PacketKind.MESSAGE):
            if head.transaction_id in remote.done_transactions:
                if self._verify(remote, packet, signed=True):
                    done_again(self, remote, packet)
            elif head.flags & Flag.AGAIN:
                self.stats.drop(Drop.STALE_PACKET)
                self._reply_stale(packet, source)
            elif self._verify(remote, packet, signed=True):
                # only a packet the remote really signed may open a transaction
                Messengent(self, remote, packet).start(index, packet)
        else:
            self.stats.drop(Drop.STALE_PACKET)

    def _nack_head(self, packet: Packet, kind: PacketKind, source_uid: int) -> Head:
        head = packet.head
        flags = Flag(0) if head.flags & Flag.CORRESPONDENT else Flag.CORRESPONDENT
        return Head(
            packet_kind=kind, transaction_kind=head.transaction_kind,
            source_uid=source_uid, destination_uid=head.source_uid,
            session_id=head.session_id, transaction_id=head.transaction_id, flags=flags,
            head_kind=self.config.head_kind, body_kind=self.config.body_kind,
            coat_kind=head.coat_kind, foot_kind=head.foot_kind,
        )

    def _send_nack(self, head: Head, source: Address) -> None:
        from raetlike.wire.packet import pack_packet  # noqa: PLC0415 - keeps the import graph flat

        signer = self.local.signing_key if head.foot_kind == FootKind.NACL else None
        self._queue(pack_packet(head, b"", signer), source)
        self.stats.nacks_sent += 1

    def _stale(self, packet: Packet, source: Address) -> None:
        """An answer to a transaction we do not have: nack it, unless it is a nack."""
        if packet.head.packet_kind in _NACK_KINDS:
            return
        remote = self.remotes.get(packet.head.destination_uid)
        if remote is None:
            return
        self._send_nack(self._nack_head(packet, PacketKind.NACK, remote.uid), source)

    def _reply_stale(self, packet: Packet, source: Address) -> None:
        """A request in a stale session or for a finished transaction: nack it."""
        if packet.head.packet_kind in _NACK_KINDS - {PacketKind.RENEW}:
            return
        head = self._nack_head(packet, PacketKind.NACK, packet.head.destination_uid)
        self._send_nack(head, source)

    def _renew(self, packet: Packet, source: Address) -> None:
        """A non-vacuous join for a uid we do not know: ask the joiner to renew."""
        self.stats.drop(Drop.UNKNOWN_REMOTE)
        head = self._nack_head(packet, PacketKind.RENEW, packet.head.destination_uid)
        self._send_nack(head, source)

    # == helpers for the transactions =====================================

    def _tick(self, now: float | None) -> None:
        if now is not None:
            self.now = now

    def _queue(self, data: bytes, address: Address) -> None:
        self._out.append((data, address))

    def _emit(self, event: events.Event) -> None:
        log.debug("%s: %s", self.name, event)
        self._events.append(event)

    def _emit_all(self, made: list[events.Event]) -> None:
        """Several events at once (fast mode's per-datagram batches): one logging check."""
        if log.isEnabledFor(logging.DEBUG):
            for event in made:
                self._emit(event)
        else:
            self._events.extend(made)

    def _stranger(self, remote: Remote) -> None:
        """A vacuous join added ``remote``: count it among the strangers, evicting the oldest."""
        self._strangers[remote.uid] = None
        while len(self._strangers) > self.config.max_pending_joins:
            uid = next(iter(self._strangers))
            del self._strangers[uid]
            oldest = self.remotes.get(uid)
            if oldest is not None and not oldest.joined:
                self.stats.joins_evicted += 1
                self._remove_remote(oldest, "too many estates that never finished joining")

    def _wake(self, transaction: Transaction, at: float) -> None:
        heapq.heappush(self._transaction_timers, (at, next(self._timer_order), transaction))

    def _schedule(self, remote: Remote, at: float | None = None) -> None:
        """Put the remote's next presence, reap, expiry or cleanup time on the heap."""
        config, times = self.config, [] if at is None else [at]
        if not remote.reaped:
            if config.keepalive:
                times.append(remote.presence_due)
            if self.local.main and config.reap_interval > 0:
                times.append(remote.reap_due)
        if remote.outbox and remote.outbox_soonest < math.inf:
            times.append(remote.outbox_soonest)
        if remote.done_transactions:
            times.append(next(iter(remote.done_transactions.values())))
        if times:
            heapq.heappush(self._remote_timers, (min(times), remote.uid))

    def _watch_expiry(self, remote: Remote, expires: float) -> None:
        """A message with time to live until ``expires`` joined the outbox: make sure a timer
        is due by then (one heap entry per new soonest expiry, not one per message)."""
        if expires < remote.outbox_soonest:
            remote.outbox_soonest = expires
            self._schedule(remote)

    def _track(self, transaction: Transaction) -> None:
        self._transactions[transaction] = None
        if isinstance(transaction, Messenger):
            self._in_flight.setdefault(transaction.remote.uid, {})[transaction] = None

    def _untrack(self, transaction: Transaction) -> None:
        self._transactions.pop(transaction, None)
        if isinstance(transaction, Messenger):
            self._in_flight.get(transaction.remote.uid, {}).pop(transaction, None)
            self._stalled.get(transaction.remote.uid, {}).pop(transaction, None)

    def _tx_index_of(self, data: bytes, destination: Address) -> Any:
        return tx_index(parse_packet(data).head, destination)

    def _next_uid(self) -> int:
        uid = self._last_uid
        while True:
            uid = uid + 1 if uid < 0xFFFFFFFF else 1
            if uid != self.local.uid and uid not in self.remotes:
                self._last_uid = uid
                return uid

    def _by_name(self, name: str) -> Remote:
        remote = self.names.get(name)
        if remote is None:
            raise LocalProtocolError(f"no remote estate named {name!r}")
        return remote

    def _remote_at(self, address: Address) -> Remote | None:
        for remote in self.remotes.values():
            if remote.host_address == address:
                return remote
        return None

    def _add_remote(self, remote: Remote) -> None:
        if remote.name in self.names and self.names[remote.name] is not remote:
            raise LocalProtocolError(f"a remote named {remote.name!r} exists already")
        self.remotes[remote.uid] = remote
        self.names[remote.name] = remote
        delay = self.config.period + (0.0 if self.local.main else self.config.offset)
        remote.presence_due = self.now + delay
        remote.reap_due = self.now + self.config.reap_interval
        self._schedule(remote)

    def _rename(self, remote: Remote, name: str) -> None:
        if self.names.get(remote.name) is remote:
            del self.names[remote.name]
        remote.name = name
        if remote.uid in self.remotes:
            self.names[name] = remote

    def _remove_remote(self, remote: Remote, reason: str) -> None:
        for transaction in list(remote.transactions.values()):
            transaction.end()
        self.remotes.pop(remote.uid, None)
        if self.names.get(remote.name) is remote:
            del self.names[remote.name]
        for address, joinee in list(self.joinees.items()):
            if joinee is remote:
                del self.joinees[address]
        self._want_joined.pop(remote.uid, None)
        self._strangers.pop(remote.uid, None)
        self._fast.remove(remote, reason)
        while remote.outbox:
            self._expire(remote, remote.outbox.popleft(), f"remote removed: {reason}")
        self.keep.remove_remote(remote)
        self._emit(events.RemoteRemoved(remote.name, reason))

    def _save_remote(self, remote: Remote) -> None:
        if remote.uid in self.remotes:
            self.keep.save_remote(remote)

    def _acceptance(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> Acceptance:
        return self.keep.acceptance_for(role, verify_key, public_key)

    def _join_extras(self) -> dict[str, Any]:
        return self._fast.join_extras()

    def _capabilities(self, remote: Remote, extra: dict[str, Any]) -> None:
        remote.capabilities = frozenset(str(k) for k in extra)

    def _verify(self, remote: Remote, packet: Packet, *, signed: bool) -> bool:
        if packet.head.foot_kind == FootKind.NACL:
            if remote.verify_key is None:
                self.stats.drop(Drop.BAD_SIGNATURE)
                return False
            try:
                packet.verify(remote.verify_key)
            except (CryptoError, PacketError):
                self.stats.drop(Drop.BAD_SIGNATURE)
                return False
        elif signed:
            self.stats.drop(Drop.UNSIGNED)
            return False
        return True

    def _open(self, remote: Remote, packet: Packet, *, signed: bool) -> Any:
        if not self._verify(remote, packet, signed=signed):
            return None
        payload = packet.coat
        if packet.head.coat_kind == CoatKind.NACL and payload:
            if remote.session_box is None:
                self.stats.drop(Drop.BAD_COAT)
                return None
            try:
                payload = uncoat(payload, remote.session_box)
            except (PacketError, CryptoError):
                self.stats.drop(Drop.BAD_COAT)
                return None
        try:
            return parse_body(packet.head.body_kind, payload)
        except PacketError:
            self.stats.drop(Drop.BAD_BODY)
            return None

    # -- lifecycle callbacks ------------------------------------------------

    def _start_join(self, remote: Remote, *, renewal: bool = False) -> None:
        if remote.in_process(TransactionKind.JOIN):
            return
        self._want_joined.setdefault(remote.uid, self.now)
        self._want_joined[remote.uid] = self.now + self.config.rejoin_interval
        Joiner(self, remote, renewal=renewal).start()

    def _start_allow(self, remote: Remote) -> None:
        if remote.in_process(TransactionKind.JOIN) or remote.in_process(TransactionKind.ALLOW):
            return
        if not remote.joined:
            self._start_join(remote)
            return
        Allower(self, remote).start()

    def _start_alive(self, remote: Remote) -> None:
        if not remote.joined:
            if remote.uid in self._want_joined or remote.far_uid:
                self._start_join(remote)
            return
        if not remote.allowed:
            self._start_allow(remote)
            return
        if remote.in_process(TransactionKind.ALIVE):
            return
        Aliver(self, remote).start()

    def _joined(self, remote: Remote, *, initiator: bool) -> None:
        self.stats.joins_completed += 1
        self._strangers.pop(remote.uid, None)
        self._want_joined.pop(remote.uid, None)
        self._save_remote(remote)
        self._emit(events.Joined(remote.name, remote.uid, remote.main, initiator))
        if initiator:
            self._start_allow(remote)

    def _join_ended(self, remote: Remote, *, joined: bool) -> None:
        if not joined and remote.uid in self._want_joined:
            self._want_joined[remote.uid] = self.now + self.config.rejoin_interval

    def _session_started(self, remote: Remote) -> None:
        remote.allowed = True
        remote.next_session_id()
        self._replace_stale_initiators(remote)
        self._fast.session_started(remote)
        self._save_remote(remote)
        self._presence(remote, alive=True)

    def _allowed(self, remote: Remote) -> None:
        self.stats.allows_completed += 1
        self._emit(events.Allowed(remote.name, remote.session_id))
        self._fast.allowed(remote)
        self._pump(remote)

    def _presence(self, remote: Remote, *, alive: bool, reason: str = "") -> None:
        delay = self.config.period + (0.0 if self.local.main else self.config.offset)
        remote.presence_due = self.now + delay
        if alive:
            remote.reap_due = self.now + self.config.reap_interval
            remote.reaped = False
            self._schedule(remote)
            if remote.alive is not True:
                remote.alive = True
                self._emit(events.Alive(remote.name))
                self._pump(remote)
            return
        if remote.alive is not False:
            remote.alive = False
            self._emit(events.RemoteLost(remote.name, reason))
        for messenger in list(self._in_flight.get(remote.uid, {})):
            messenger.requeue()

    def _manage(self, remote: Remote) -> None:
        config = self.config
        if not remote.reaped and config.keepalive and remote.presence_due <= self.now:
            delay = config.period + (0.0 if self.local.main else config.offset)
            remote.presence_due = self.now + delay
            self._start_alive(remote)
        if (self.local.main and config.reap_interval > 0 and not remote.reaped
                and remote.reap_due <= self.now):
            remote.reaped = True
            self._emit(events.RemoteReaped(remote.name))
        if remote.outbox_soonest <= self.now:
            keep: deque[Outgoing] = deque()
            soonest = math.inf
            for outgoing in remote.outbox:
                if outgoing.expires <= self.now:
                    self._expire(remote, outgoing, "time to live ran out while queued")
                else:
                    keep.append(outgoing)
                    soonest = min(soonest, outgoing.expires)
            remote.outbox = keep
            remote.outbox_soonest = soonest
        while remote.done_transactions:
            tid, expires = next(iter(remote.done_transactions.items()))
            if expires > self.now:
                break
            del remote.done_transactions[tid]

    def _replace_stale_initiators(self, remote: Remote) -> None:
        for transaction in list(remote.transactions.values()):
            if transaction.correspondent or remote.own_session_is_valid(transaction.session_id):
                continue
            if transaction.session_id == remote.session_id:
                continue
            if isinstance(transaction, Messenger):
                transaction.requeue()
            else:
                transaction.end()

    def _remove_stale_correspondents(self, remote: Remote) -> None:
        for transaction in list(remote.transactions.values()):
            if transaction.correspondent and not remote.remote_session_is_valid(
                transaction.session_id
            ):
                transaction.end()
                if isinstance(transaction, Allowent) and transaction.state is Allowent.States.ACKED:
                    # the initiator speaks in a newer session: our allow had finished
                    self._allowed(remote)
        remote.done_transactions.clear()

    # -- messages -----------------------------------------------------------

    def _pump(self, remote: Remote) -> None:
        if not remote.allowed or remote.session_box is None or remote.alive is False:
            return
        if self._fast.links and self._fast.takes(remote):
            return  # the fast link pulls from the outbox as its window opens
        config = self.config
        for messenger in list(self._stalled.get(remote.uid, {})):
            if remote.segments_in_flight >= config.window:
                return
            self._stalled[remote.uid].pop(messenger, None)
            messenger.pump()
        flying = self._in_flight.setdefault(remote.uid, {})
        while (remote.outbox and len(flying) < config.max_messages_in_flight
               and remote.segments_in_flight < config.window):
            # Ordering bound: a message starts only within max_messages_in_flight starts
            # of the oldest one still in flight, so at most that many later messages can
            # overtake any message (docs/road.md, "Delivery guarantees").
            launched = self._launched.get(remote.uid, 0)
            oldest = next(iter(flying), None)
            if oldest is not None and launched - oldest.launch >= config.max_messages_in_flight:
                return
            outgoing = remote.outbox.popleft()
            if outgoing.expires <= self.now:
                self._expire(remote, outgoing, "time to live ran out while queued")
                continue
            messenger = Messenger(self, remote, outgoing)
            self._launched[remote.uid] = messenger.launch = launched + 1
            messenger.start()

    def _stall(self, messenger: Messenger) -> None:
        self._stalled.setdefault(messenger.remote.uid, {})[messenger] = None

    def _window_opened(self, remote: Remote) -> None:
        self._pump(remote)

    def _sent(self, remote: Remote, outgoing: Outgoing) -> None:
        self.stats.messages_sent += 1
        self._emit(events.MessageSent(remote.name, outgoing.message_id))

    def _requeue(self, remote: Remote, outgoing: Outgoing) -> None:
        if outgoing.expires <= self.now:
            self._expire(remote, outgoing, "time to live ran out")
            return
        # back in transmit order: several messengers requeued one after another must
        # not come out reversed (the outbox is ordered by message id)
        position = 0
        for queued in remote.outbox:
            if queued.message_id > outgoing.message_id:
                break
            position += 1
        remote.outbox.insert(position, outgoing)
        self._watch_expiry(remote, outgoing.expires)

    def _expire(self, remote: Remote, outgoing: Outgoing, reason: str) -> None:
        self.stats.messages_expired += 1
        self._emit(events.MessageExpired(remote.name, outgoing.message_id, outgoing.body,
                                         reason))

    def _delivered(self, remote: Remote, messengent: Messengent, body: Any,
                   segments: int) -> None:
        remote.done_transactions[messengent.transaction_id] = self.now + self.config.done_memory
        if len(remote.done_transactions) == 1:
            self._schedule(remote)  # its cleanup time
        while len(remote.done_transactions) > 100_000:
            remote.done_transactions.popitem(last=False)
        self.stats.messages_received += 1
        self._emit(events.MessageReceived(remote.name, body, messengent.session_id,
                                          messengent.transaction_id, segments))

