"""RoadStack: a sans-IO UDP stack of estates.

Feed datagrams in with :meth:`RoadStack.receive_datagram`, take datagrams
out with :meth:`RoadStack.datagrams_to_send`, sleep until
:meth:`RoadStack.get_timer`, then call :meth:`RoadStack.handle_timer`; read
what happened with :meth:`RoadStack.next_event`.  ``now`` is monotonic
seconds, always passed in: the stack has no clock and no socket.

This module holds the stack's state, its commands, the datagram and event queues, inbound
dispatch (RAET's processRx: a packet's remote, its transaction, nacks), a remote's
lifecycle (added, handshakes started and finished, presence, removed), its timers and the
fate of its messages (sent, put back, expired), all as methods.  It owns the register of
remotes and the strangers among them (:mod:`road._register`), two deadline heaps
(:mod:`road._deadlines`), the admission of keys (:class:`road.keeping.Admission`), RAET
mode's message pump (:mod:`road._pump`) and fast mode (:mod:`road._fast`); none of them
imports this module.  Its settings live in :mod:`road.config`.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import Any

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.errors import BackpressureError, CryptoError, LocalProtocolError, PacketError
from raetlike.wire.body import parse_body, uncoat
from raetlike.wire.head import Head
from raetlike.wire.kinds import Acceptance, CoatKind, Flag, FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet, parse_packet
from road import events
from road._alive import Aliver, FallbackTrial, PathProbe, answer_alive
from road._allow import Allowent, Allower
from road._amplification import AddressBudget, JoinRate
from road._deadlines import Deadlines
from road._fast import FastRoad
from road._fast_wire import is_fast
from road._join import Joinent, Joiner
from road._message import Messengent, Messenger, Partials, done_again
from road._pump import MessagePump
from road._register import Register, Strangers
from road._transaction import Index, Transaction, rx_index
from road.config import LocalEstate, RoadConfig
from road.keeping import Admission, MemoryKeep, RoadKeep
from road.remote import Address, Outgoing, Remote, message_body
from road.stats import Drop, RemoteStats, RoadStats

__all__ = ["LocalEstate", "RoadConfig", "RoadStack"]

log = logging.getLogger(__name__)

_BROADCAST = int(Flag.BROADCAST)
_CORRESPONDENT = int(Flag.CORRESPONDENT)
_OPENING = frozenset({(TransactionKind.JOIN, PacketKind.REQUEST),
                      (TransactionKind.ALLOW, PacketKind.HELLO)})  # a handshake's first packet
_NACK_KINDS = frozenset({
    PacketKind.NACK, PacketKind.UNJOINED, PacketKind.UNALLOWED, PacketKind.RENEW,
    PacketKind.REFUSE, PacketKind.REJECT,
})

MAX_DONE_REMEMBERED = 100_000
"""Delivered RAET-mode transactions a remote's done memory holds at most (oldest first out)."""


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
        self.register = Register(local.uid)
        self.remotes: dict[int, Remote] = self.register.by_uid  # (the register's indexes,
        self.names: dict[str, Remote] = self.register.by_name  # read-only here)
        self.joinees: dict[Address, Remote] = self.register.joinees
        self._live_remote: Callable[[int], bool] = self.remotes.__contains__
        self._message_id = 0
        self._out: deque[tuple[bytes, Address]] = deque()
        self._events: deque[events.Event] = deque()
        self._transactions: dict[Transaction, None] = {}
        # open Joinents and open Allowents, apart (a flood of unsigned joins never holds an
        # allow, whose hello is signed by a joined remote, off), oldest first, each with
        # when it took its place
        self._handshakes: dict[TransactionKind, dict[Transaction, float]] = {
            TransactionKind.JOIN: {}, TransactionKind.ALLOW: {}}
        # joins evicted unproven while their ack was on its way (_make_room), by index, each
        # until it would have timed out: a late ack still completes one (_late_join_ack)
        self._evicted_joins: dict[Index, tuple[Joinent, float]] = {}
        live = self._transactions  # get_timer's tests of a heap entry, made once
        self._live_transaction: Callable[[Transaction], bool] = (
            lambda transaction: not transaction.ended and transaction in live)
        self.messages = MessagePump(self.config, self._messenger, self._expire)
        self._want_joined: dict[int, float] = {}  # uid -> next join attempt
        # Lazy timer heaps: a key's deadline moved later is not pushed (its earlier entry
        # wakes it, and handle_timer pushes the real one then); an entry of a key gone only
        # costs one early handle_timer.  Each holds at most 2 entries per pending key + 64.
        self._transaction_timers: Deadlines[Transaction] = Deadlines()
        self._remote_timers: Deadlines[int] = Deadlines()  # remote uids
        self.strangers = Strangers(self.config)
        self._fast = FastRoad(self)
        self._heard: Remote | None = None  # who the datagram being handled proved to be from
        # join spam and reflection (road._amplification, docs/security.md)
        self._budget = AddressBudget(self.config.max_unvalidated_addresses)
        self._join_rate = JoinRate(self.config.join_rate_per_source,
                                   self.config.join_burst_per_source,
                                   self.config.max_unvalidated_addresses)
        self._retries: dict[int, int] = {}  # uid -> our unanswered attempts in a row (backoff)
        # uid -> (session id, transaction id) of the newest "alive?" it asked us: only a
        # newer one says it is there (_fresh_alive)
        self._alive_asked: dict[int, tuple[int, int]] = {}
        self.admission = Admission(self.keep, self.config)
        self._partials = Partials(self.config, self.stats)  # messages partly received (both modes)
        # the last packet authenticated at the door, with its remote (see _process)
        self._authentic: tuple[Packet | None, Remote | None] = (None, None)
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
            remote = self.register.named(name)
        elif address is not None:
            remote = self.register.at(address) or self.add_remote(address)
        else:
            raise LocalProtocolError("join needs an address or a remote name")
        remote.sought = True
        self._want_joined[remote.uid] = self.now
        self._start_join(remote)
        return remote.name

    def add_remote(self, address: Address, name: str | None = None) -> Remote:
        """Record a remote estate we intend to talk to (not yet joined)."""
        remote = Remote(uid=self.register.next_uid(), name=name or f"{address[0]}:{address[1]}",
                        host_address=address, fqdn=address[0])
        self._add_remote(remote)
        return remote

    def allow(self, name: str, *, now: float | None = None) -> None:
        """Start an allow handshake with the remote ``name`` (joining first if needed)."""
        self._tick(now)
        self._start_allow(self.register.named(name))

    def alive(self, name: str, *, now: float | None = None) -> None:
        """Check the presence of the remote ``name`` now."""
        self._tick(now)
        self._start_alive(self.register.named(name), asked=True)

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None, now: float | None = None) -> int:
        """Queue ``message`` for the remote ``to``; returns its message id.

        The message waits in a bounded outbox until the remote is allowed and
        the window has room.  Raises :class:`BackpressureError` when the
        outbox is full.  Its fate comes back as ``MessageSent`` or
        ``MessageExpired`` (never silence).
        """
        if now is not None and now > self.now:  # _tick, in line: the hot path
            self.now = now
        if self.closed:
            raise LocalProtocolError("the stack is closed")
        # bytes, the common case, as it is: no ABC check, no copy
        body = message if type(message) is bytes else message_body(message)
        remote = self.names.get(to) or self.register.named(to)
        config = self.config
        if len(remote.outbox) >= config.outbox_limit:
            raise BackpressureError(
                f"outbox to {to} is full ({config.outbox_limit} messages)")
        self._message_id += 1
        expires = self.now + (config.message_ttl if ttl is None else ttl)
        remote.outbox.append(Outgoing(self._message_id, body, expires))
        if not (self._fast.links and self._fast.queued(remote, expires)):
            # (a fast link watches its outbox's expiries itself: no heap entry per message)
            self._watch_expiry(remote, expires)
            self._pump(remote)
        return self._message_id

    def withdraw(self, to: str, message_ids: Collection[int]) -> list[int]:
        """Take back those of ``message_ids`` that still wait in the outbox of ``to``, never
        sent; returns their ids (no ``MessageSent`` or ``MessageExpired`` follows for them).

        A message already begun (in flight, or put back after it was partly sent) stays:
        the remote may have it.  :class:`raetlike.multimain.MultiMain` moves what it takes
        back to another main.
        """
        remote = self.names.get(to)
        if remote is None or not remote.outbox:
            return []
        wanted = set(message_ids)
        kept: deque[Outgoing] = deque()
        taken = []
        for outgoing in remote.outbox:
            if outgoing.message_id in wanted and outgoing.begun is None:
                taken.append(outgoing.message_id)
            else:
                kept.append(outgoing)
        remote.outbox = kept
        return taken

    def continue_ids(self, next_id: int) -> None:
        """Number the next message ``next_id`` or later: ids that go on from a store's
        (:class:`raetlike.durable.DurableRoad` keeps its ids and the stack's equal)."""
        self._message_id = max(self._message_id, next_id - 1)

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
        self.keep.close()  # remote records still waiting for the keep's writer
        self.closed = True

    def remote(self, name: str) -> Remote:
        """The remote estate called ``name``."""
        return self.register.named(name)

    # == sans-IO pump ======================================================

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        """Take one datagram from ``source``; garbage is dropped and counted, never raised.

        Not even a bug of ours that a datagram trips is raised: it is logged (with its
        traceback, the first time and then every 1000th) and counted as
        ``dropped[internal-error]``, and the stack goes on with the next datagram.
        """
        self._tick(now)
        stats = self.stats
        stats.datagrams_received += 1
        stats.bytes_received += len(data)
        drops = stats.drops
        self._heard = None
        if source not in self._budget.validated:
            self._budget.credit(source, len(data))  # its answers may be 3x this (RFC 9000 8.1)
        try:
            if is_fast(data):
                self._fast.receive(data, source, self.now)
                return
            try:
                packet = parse_packet(data)
            except PacketError as exc:
                self.stats.drop(Drop.MALFORMED)
                log.debug("%s: malformed datagram from %s: %s", self.name, source, exc)
                return
            self._process(packet, source)
        except (PacketError, CryptoError) as exc:
            self.stats.drop(Drop.MALFORMED)
            log.debug("%s: bad packet from %s: %s", self.name, source, exc)
        except Exception:  # a bug of ours must not let a datagram kill the estate
            self.stats.drop(Drop.INTERNAL_ERROR)
            if self.stats.dropped[Drop.INTERNAL_ERROR] % 1000 == 1:
                log.exception("%s: datagram from %s tripped an internal error (%d so far); "
                              "dropped", self.name, source,
                              self.stats.dropped[Drop.INTERNAL_ERROR])
        finally:
            heard = self._heard
            if heard is not None and stats.drops != drops and stats.last_drop is not None:
                heard.traffic.dropped[stats.last_drop] += stats.drops - drops

    def _heard_from(self, remote: Remote, size: int, *, fresh: bool = True) -> None:
        """An authenticated datagram of ``size`` bytes came from ``remote``; ``fresh``: not
        a replay either (else :meth:`_spoke` says so once it is known)."""
        self._heard = remote
        traffic = remote.traffic
        traffic.datagrams_in += 1
        traffic.bytes_in += size
        if fresh:
            traffic.last_heard = self.now

    def _spoke(self, remote: Remote) -> None:
        """A RAET packet of ``remote`` that is no replay of an old one (a request of its
        current session, or an answer an open transaction of ours waits for): heard now,
        and presence checks of it resume if it was reaped.  A signed answer replayed
        (it verifies for good) does neither."""
        remote.traffic.last_heard = self.now
        if remote.reaped:
            remote.reaped = False
            self._schedule(remote)  # presence checks resume

    def remote_stats(self) -> list[RemoteStats]:
        """A snapshot of every remote's counters (for metrics; off the hot path).

        Derived figures (mode, round trip, queue depth, seconds since heard) are
        computed here, when read, from state the stack keeps anyway.
        """
        snapshot = []
        for remote in list(self.remotes.values()):
            link = self._fast.links.get(remote.uid)
            fast = link is not None and link.keyed
            rtt = link.smoothed_rtt() if link is not None and fast else None
            if rtt is None:
                rtt = remote.round_trip.smoothed
            traffic = remote.traffic
            queued = len(remote.outbox) + self.messages.held(remote.uid)
            if link is not None:
                queued += len(link.sending.messages)
            heard = traffic.last_heard
            snapshot.append(RemoteStats(
                name=remote.name, address=remote.host_address,
                mode="fast" if fast else "raet", joined=bool(remote.joined),
                allowed=bool(remote.allowed), alive=remote.alive, rtt=rtt,
                resends=traffic.resends, datagrams_in=traffic.datagrams_in,
                bytes_in=traffic.bytes_in, datagrams_out=traffic.datagrams_out,
                bytes_out=traffic.bytes_out, queued=queued,
                last_heard=None if heard is None else max(0.0, self.now - heard),
                dropped={reason.value: n for reason, n in dict(traffic.dropped).items()},
            ))
        return snapshot

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        """Everything queued for the wire, in order."""
        self._tick(now)
        # (built first: building may queue a RAET packet, e.g. the allow of a rekey)
        fast = self._fast.datagrams(self.now) if self._fast.links else None
        queued = self._out
        if queued:
            out = list(queued)
            queued.clear()
            if fast:
                out.extend(fast)
        elif fast is not None:
            out = fast  # (a fresh list: FastRoad.datagrams keeps no reference to it)
        else:
            return []
        if out:
            stats, size = self.stats, 0
            for data, _ in out:
                size += len(data)
            stats.datagrams_sent += len(out)
            stats.bytes_sent += size
        return out

    def get_timer(self) -> float | None:
        """The earliest moment the stack wants :meth:`handle_timer`, or None when idle."""
        # (asked several times a loop round: no list, no closure made per call)
        earliest = self._transaction_timers.earliest(self._live_transaction)
        soonest = self._remote_timers.earliest(self._live_remote)
        if soonest is not None and (earliest is None or soonest < earliest):
            earliest = soonest
        if self._want_joined:
            soonest = min(self._want_joined.values())
            if earliest is None or soonest < earliest:
                earliest = soonest
        if self._fast.links and (soonest := self._fast.deadline(self.now)) is not None and (
                earliest is None or soonest < earliest):
            earliest = soonest
        return earliest

    def handle_timer(self, now: float) -> None:
        """Let due timers fire: redos, timeouts, presence, reaping, expiries, rejoins."""
        self._tick(now)
        now = self.now  # (never behind the clock)
        for transaction in self._transaction_timers.due(now):
            if transaction.ended or transaction not in self._transactions:
                continue
            deadline = transaction.deadline()
            if deadline is not None and deadline <= now:
                transaction.handle_timer(now)
                if transaction.ended:
                    continue
                deadline = transaction.deadline()
            # a deadline later than the one pending was not pushed (road/_deadlines.py): now
            if deadline is not None and deadline > now:
                self._wake(transaction, deadline)
        for uid in self._remote_timers.due(now):
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
                # a join still open keeps its turn: look again later, never spin on a past
                # deadline
                self._want_joined[uid] = now + self.config.rejoin_interval
                if not wanted.in_process(TransactionKind.JOIN):
                    self._start_join(wanted)

    def next_event(self) -> events.Event | None:
        """The oldest event not yet taken, or None."""
        return self._events.popleft() if self._events else None

    # == helpers for the transactions =====================================

    def _delivered(self, remote: Remote, session_id: int, transaction_id: int, body: Any,
                   segments: int) -> None:
        """A RAET-mode message arrived whole: remember its (session, transaction) for
        ``done_memory`` (a repeat is answered *done*, never delivered) and hand it over."""
        done = remote.done_transactions
        done[(session_id, transaction_id)] = self.now + self.config.done_memory
        if len(done) == 1:
            self._schedule(remote)  # its cleanup time
        while len(done) > MAX_DONE_REMEMBERED:
            done.popitem(last=False)
        self.stats.messages_received += 1
        self._emit(events.MessageReceived(remote.name, body, session_id, transaction_id,
                                          segments))

    def _acceptance(self, role: str, verify_key: VerifyKey,
                    public_key: PublicKey) -> Acceptance | None:
        """The admission's verdict on a role's keys now (None: too many keys pending)."""
        expired = self.admission.expired
        try:
            return self.admission.verdict(role, verify_key, public_key, self.now)
        finally:  # (counted even when the keep fails after the sweep)
            self.stats.pending_keys_expired += self.admission.expired - expired

    def _tick(self, now: float | None) -> None:
        """Move the clock to ``now``; never back (a ``now`` behind it is ignored, as the
        lane stack does: timers and expiries are measured on a clock that only goes on)."""
        if now is not None and now > self.now:
            self.now = now

    def _queue(self, data: bytes, address: Address) -> None:
        budget = self._budget
        if address in budget.validated or budget.spend(address, len(data)):
            self._out.append((data, address))
        else:
            self.stats.amplification_limited += 1  # unvalidated: 3x what it sent us, no more

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

    def _track(self, transaction: Transaction) -> None:
        self._transactions[transaction] = None
        if isinstance(transaction, Messenger):
            self.messages.track(transaction)
        elif isinstance(transaction, Joinent):
            self._handshakes[TransactionKind.JOIN][transaction] = self.now
        elif isinstance(transaction, Allowent):
            self._handshakes[TransactionKind.ALLOW][transaction] = self.now

    def _untrack(self, transaction: Transaction) -> None:
        self._transactions.pop(transaction, None)
        self._transaction_timers.forget(transaction)
        if isinstance(transaction, Messenger):
            self.messages.untrack(transaction)
        elif isinstance(transaction, Joinent):
            self._handshakes[TransactionKind.JOIN].pop(transaction, None)
        elif isinstance(transaction, Allowent):
            self._handshakes[TransactionKind.ALLOW].pop(transaction, None)

    def _ask_raet_alive(self, remote: Remote) -> bool:
        """Fast mode wonders whether to fall back: a RAET alive asks whether the peer answers
        signed packets (road._fast_link, ``_fallback_due``).  False when one is open already
        (asked earlier: its answer says nothing of what we sent since)."""
        if remote.in_process(TransactionKind.ALIVE):
            return False
        FallbackTrial(self, remote).start()  # (its silence is no presence verdict)
        return True

    def _alive_answered(self, remote: Remote, asked_at: float) -> None:
        """A RAET alive asked at ``asked_at`` was answered (fast mode may be waiting on it)."""
        if self._fast.links:
            self._fast.alive_answered(remote, asked_at)

    def _handshake_waits(self, transaction: Transaction) -> None:
        """``transaction`` waits for an operator's decision (minutes): it holds no place among
        ``max_open_handshakes`` (``max_pending_keys`` bounds those)."""
        self._handshakes[TransactionKind.JOIN].pop(transaction, None)

    def _shed(self, head: Head, source: Address) -> bool:
        """Whether to drop a handshake's first packet unverified: ``max_open_handshakes``
        joins (or allows) are open here, it is not a redo of one of them, and none of them
        may be evicted for it (:meth:`_evictable`)."""
        kind = head.transaction_kind
        if ((kind, head.packet_kind) not in _OPENING
                or len(self._handshakes[kind]) < self.config.max_open_handshakes):
            return False
        remote = (self.joinees.get(source) if head.destination_uid == 0
                  else self.remotes.get(head.destination_uid))
        if remote is not None and rx_index(head, source) in remote.transactions:
            return False
        if self._evictable(kind) is not None:
            return False  # it may take that one's place once it is open (_make_room)
        self.stats.drop(Drop.HANDSHAKES_BUSY)
        return True

    def _evictable(self, kind: TransactionKind) -> Transaction | None:
        """The oldest open handshake of ``kind`` still unproven ``handshake_grace`` after it
        took its place (its peer never showed it receives what we sent), or None."""
        cutoff = self.now - self.config.handshake_grace
        for transaction, since in self._handshakes[kind].items():
            if since > cutoff:
                return None  # (oldest first: the rest are younger still)
            if not transaction.proven:
                return transaction
        return None

    def _make_room(self, kind: TransactionKind) -> None:
        """A handshake of ``kind`` just opened (its first packet checked, answered): past
        ``max_open_handshakes``, the oldest unproven ones give their places up."""
        places = self._handshakes[kind]
        while len(places) > self.config.max_open_handshakes:
            victim = self._evictable(kind)
            if victim is None:
                return  # (never: _shed let the packet in only with a victim to take)
            self.stats.handshakes_evicted += 1
            awaiting = (victim if isinstance(victim, Joinent)
                        and victim.state is Joinent.States.RESPONDED else None)
            until = victim.timeout_at
            victim.evict()
            if awaiting is not None and until is not None and awaiting.index is not None:
                self._keep_evicted_join(awaiting, awaiting.index, until)

    def _keep_evicted_join(self, joinent: Joinent, index: Index, until: float) -> None:
        """Remember an evicted join that awaited its ack, until ``until`` (when it would have
        timed out), at most ``max_pending_joins`` of them (the oldest forgotten first)."""
        held, now, limit = self._evicted_joins, self.now, self.config.max_pending_joins
        while held:
            older, (_, expires) = next(iter(held.items()))
            if expires > now and len(held) < limit:
                break
            del held[older]
        if limit > 0:
            held[index] = (joinent, until)

    def _late_join_ack(self, packet: Packet, source: Address) -> bool:
        """A join ack that finds no open join: whether it was the ack of a join evicted
        unproven (:meth:`_make_room`) from the address that join came from, before that
        join would have timed out, while its remote is still ours and in no other join;
        then it completes that join as it would have completed it open.  (A blind ack
        completes an open join as well: this adds nothing a spoofer could not do.)"""
        if packet.head.packet_kind != PacketKind.ACK:
            return False
        index = rx_index(packet.head, source)
        entry = self._evicted_joins.get(index)
        if entry is None or entry[0].address != source:
            return False  # (another address's ack leaves the entry to the joiner's own)
        joinent, until = self._evicted_joins.pop(index)
        remote = joinent.remote
        if (until <= self.now or self.remotes.get(remote.uid) is not remote
                or remote.in_process(TransactionKind.JOIN)):
            return False
        self.stats.late_join_acks += 1
        joinent.receive(packet, source)
        return True

    def _messenger(self, remote: Remote, outgoing: Outgoing) -> Messenger:
        return Messenger(self, remote, outgoing)

    def _pump(self, remote: Remote) -> None:
        """Send what waits for ``remote``: fast mode pulls it as its window opens, RAET
        mode's pump starts messengers (:class:`road._pump.MessagePump`)."""
        if not remote.allowed or remote.session_box is None or remote.alive is False:
            return
        if self._fast.links and self._fast.takes(remote):
            return  # the fast link pulls from the outbox as its window opens
        self.messages.pump(remote, self.now)

    def _stall(self, messenger: Messenger) -> None:
        self.messages.stall(messenger)

    # == inbound dispatch (RAET's processRx): a packet's remote, its transaction, nacks ==

    def _process(self, packet: Packet, source: Address) -> None:
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
            self.stats.drop(Drop.BROADCAST)
            return
        if not flags & _CORRESPONDENT and self._shed(head, source):
            return
        remote: Remote | None
        if head.transaction_kind == TransactionKind.JOIN:
            proceed, remote = self._join_remote(packet, source)
            if not proceed:
                return
        else:
            remote = self._authenticated_remote(packet)
            if remote is None or not self._session_current(remote, packet, source):
                return
            if (source != remote.host_address and head.transaction_kind != TransactionKind.ALLOW
                    and head.session_id == (remote.session_id if flags & _CORRESPONDENT
                                            else remote.remote_session_id)):
                # it may have moved: ask it there (an allow from there moves it by itself:
                # Allowent).  Only a packet of the current session: an answer carries our
                # session id, which the session rule above does not check, and one of an
                # ended session (signed for good) must not start probes at will
                self._probe_path(remote, source)
        if remote is not None:
            transaction = remote.transactions.get(rx_index(head, source))
            if transaction is not None:
                if flags & _CORRESPONDENT and head.transaction_kind != TransactionKind.JOIN:
                    self._spoke(remote)
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

    def _join_remote(self, packet: Packet, source: Address,
    ) -> tuple[bool, Remote | None]:
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
                if not self._late_join_ack(packet, source):
                    self.stats.drop(Drop.JOIN_STALE)
                return False, None
            remote = Remote(uid=self.register.next_uid(), name=f"{source[0]}:{source[1]}",
                            host_address=source, fqdn=source[0])
        return True, remote

    def _authenticated_remote(self, packet: Packet) -> Remote | None:
        """The remote a non-join packet is about, once its signature has verified; else None.

        Drops (and counts) a packet with a zero session or id, for an unknown
        remote, unsigned, or not signed by that remote's key.  Changes nothing else.
        """
        head = packet.head
        if head.session_id == 0:
            self.stats.drop(Drop.ZERO_SESSION)
            return None
        if head.destination_uid == 0 or head.source_uid == 0:
            self.stats.drop(Drop.ZERO_ID)
            return None
        remote = self.remotes.get(head.destination_uid)
        if remote is None:
            self.stats.drop(Drop.UNKNOWN_REMOTE)
            return None
        if not self._verify(remote, packet, signed=True):
            return None
        self._authentic = (packet, remote)  # handlers' verify() finds it checked already
        self._heard_from(remote, len(packet.raw_head) + len(packet.coat) + len(packet.foot),
                         fresh=False)
        return remote

    def _session_current(self, remote: Remote, packet: Packet, source: Address) -> bool:
        """RAET's session rule for an authenticated packet: nack a stale session, take a
        newer one."""
        head = packet.head
        if not int(head.flags) & _CORRESPONDENT:
            if not remote.remote_session_is_valid(head.session_id):
                self.stats.drop(Drop.STALE_SESSION)
                self._reply_stale(packet, source)
                return False
            if head.session_id != remote.remote_session_id:
                remote.remote_session_id = head.session_id
                self._remove_stale_correspondents(remote)
            self._spoke(remote)  # (an answer: once its transaction is found, _process)
        return True

    def _correspond(self, packet: Packet, source: Address, remote: Remote) -> None:
        head = packet.head
        kinds = (head.transaction_kind, head.packet_kind)
        index = rx_index(head, source)
        if kinds == (TransactionKind.JOIN, PacketKind.REQUEST):
            Joinent(self, remote, packet, source).start(index)
            self._make_room(TransactionKind.JOIN)
        elif kinds == (TransactionKind.ALLOW, PacketKind.HELLO):
            Allowent(self, remote, packet, source).start(index)
            self._make_room(TransactionKind.ALLOW)
        elif kinds == (TransactionKind.ALIVE, PacketKind.REQUEST):
            if answer_alive(self, remote, packet) and self._fresh_alive(remote, head):
                self._presence(remote, alive=True)
        elif kinds == (TransactionKind.MESSAGE, PacketKind.MESSAGE):
            tid = head.transaction_id
            if (head.session_id, tid) in remote.done_transactions:
                done_again(self, remote, packet, source)
            elif head.flags & Flag.AGAIN:
                self.stats.drop(Drop.STALE_PACKET)
                self._reply_stale(packet, source)
            elif (remote.delivered is not None and remote.delivered_session == head.session_id
                  and remote.delivered.seen(tid)):
                # delivered in this session already (or too far behind to tell): never twice
                self.stats.drop(Drop.REPLAYED)
                self._reply_stale(packet, source)
            else:
                Messengent(self, remote, packet, source).start(index, packet)
        elif kinds == (TransactionKind.JOIN, PacketKind.ACK) and self._late_join_ack(
                packet, source):
            return
        else:
            self.stats.drop(Drop.STALE_PACKET)

    def _fresh_alive(self, remote: Remote, head: Head) -> bool:
        """Whether an "alive?" of ``remote`` (verified, acked) is newer than any it asked
        before in its session, and so says it is there.  A captured request replayed
        (from anywhere, after the remote is gone) is answered all the same, as RAET's
        wire wants, but fakes no presence.  The remote numbers its transactions upward
        in a session (mod 2^32); a new session, or new keys, start over."""
        session, tid = head.session_id, head.transaction_id
        newest = self._alive_asked.get(remote.uid)
        if (newest is not None and newest[0] == session
                and not 0 < (tid - newest[1]) % 0x1_0000_0000 < 0x8000_0000):
            return False
        self._alive_asked[remote.uid] = (session, tid)
        return True

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
        if source != remote.host_address and self.register.addressed(source):
            # replayed from another remote's address: our nack of an answer is a request
            # in this remote's session, which that estate would take as its own newest
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

    def _verify(self, remote: Remote, packet: Packet, *, signed: bool) -> bool:
        """Whether ``packet`` is signed by ``remote`` (or, with ``signed`` False, unsigned);
        a packet already authenticated at the door is not checked twice."""
        authentic = self._authentic
        if authentic[0] is packet and authentic[1] is remote:
            return True
        if packet.head.foot_kind == FootKind.NACL:
            if remote.verify_key is None:
                self.stats.drop(Drop.UNVERIFIABLE)
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

    # == a remote's lifecycle: handshakes started and finished, presence ============

    def _main_to(self, remote: Remote) -> bool:
        """Whether we are main toward ``remote``: we are a main estate and it is not one we
        asked to join (``Remote.sought``: a relay is a minion of its upstream main)."""
        return self.local.main and not remote.sought

    def _retry_delay(self, remote: Remote) -> float:
        """Seconds to the remote's next presence check (:meth:`RoadConfig.presence_delay`,
        with our attempts in a row it left unanswered)."""
        return self.config.presence_delay(self._main_to(remote),
                                          self._retries.get(remote.uid, 0))

    def _start_join(self, remote: Remote, *, renewal: bool = False,
                   afresh: bool = False) -> None:
        if remote.in_process(TransactionKind.JOIN):
            return
        if remote.uid in self._want_joined and self.strangers.reap_time(remote.uid) is None:
            # we were asked to join this address (join(), a rejoin): our own choice, so no
            # anti-amplification limit on it (road._amplification)
            self._budget.validate(remote.host_address)
        self._want_joined.setdefault(remote.uid, self.now)
        self._want_joined[remote.uid] = self.now + self.config.rejoin_interval
        Joiner(self, remote, renewal=renewal, afresh=afresh).start()

    def _start_allow(self, remote: Remote) -> None:
        if remote.in_process(TransactionKind.JOIN) or remote.in_process(TransactionKind.ALLOW):
            return
        if not remote.joined:
            self._start_join(remote)
            return
        Allower(self, remote).start()

    def _probe_path(self, remote: Remote, address: Address) -> None:
        """An authenticated datagram of ``remote`` came from ``address``, not its host
        address: ask "alive?" there (:class:`~road._alive.PathProbe`), one probe at a
        time; its answer moves the remote.  Never for a main we joined (its address is
        the one we were given, and multi-main knows its mains by it), a remote not
        allowed (no session to coat the probe with), or to another remote's address."""
        if remote.main or not remote.allowed or remote.session_box is None:
            return
        if self.register.addressed(address):
            # another remote's address (a datagram replayed from there): our request,
            # signed and in this remote's session, would reach the wrong estate, which
            # takes our signature and may take the session id as its own newest
            return
        if any(isinstance(t, PathProbe) for t in remote.in_process(TransactionKind.ALIVE)):
            return
        log.debug("%s: %s speaks from %s; asking it there", self.name, remote.name, address)
        PathProbe(self, remote, address).start()

    def _start_alive(self, remote: Remote, *, asked: bool = False) -> None:
        """The periodic presence check: join, allow or ask "alive?", whichever is due.

        Never a join to a stranger (an estate that joined us vacuously): its joiner joins and
        allows, we only answer.  Each join or allow we start counts as an attempt for the
        back-off of :meth:`_retry_delay` until one completes.  Not main, a remote that left
        ``allow_tries_before_rejoin`` checks unanswered is allowed again, and after as many
        unanswered allows joined afresh (docs/road.md, "A main that lost us"), unless the
        check was ``asked`` for (:meth:`RoadStack.alive`: "alive?" it is, a RAET alive
        always).  Between fast-mode peers the periodic "alive?" is a ping over the fast
        link (:meth:`FastRoad.ask_alive`, docs/road.md "Presence in fast mode").
        """
        busy = remote.in_process(TransactionKind.JOIN) or remote.in_process(TransactionKind.ALLOW)
        limit = 0 if self._main_to(remote) or asked else self.config.allow_tries_before_rejoin
        if not remote.joined:
            if self.strangers.reap_time(remote.uid) is not None:
                return  # a stranger: it joins and allows, we only answer
            if remote.uid in self._want_joined or remote.far_uid:
                if not busy:
                    tries = self._retries[remote.uid] = self._retries.get(remote.uid, 0) + 1
                    if limit and remote.far_uid and tries > limit:
                        # joins by the far uid fail (no answer, or renew refused on an
                        # immutable road: a main that lost us): a vacuous one, as below
                        self._start_join(remote, afresh=True)
                        return
                self._start_join(remote)
            return
        if not remote.allowed or (limit and remote.unanswered_checks >= limit):
            # not allowed yet, or (not main) it stopped answering "alive?": a main that came
            # back without us drops our checks unanswered; an allow finds out
            if not busy:
                tries = self._retries[remote.uid] = self._retries.get(remote.uid, 0) + 1
                if limit and tries > limit:
                    # unanswered allows too: the main may have lost our join (killed before
                    # it kept it).  A vacuous join finds it either way (a main reuses the
                    # remote of the same name): only the far uid may change; name, role and
                    # keys must stay (or an immutable road rejects the answer)
                    self._start_join(remote, afresh=True)
                    return
            self._start_allow(remote)
            return
        if remote.in_process(TransactionKind.ALIVE):
            return
        if not asked and self._fast.links and self._fast.ask_alive(remote):
            return  # the periodic check over the fast link: no signatures (docs/road.md)
        Aliver(self, remote).start()

    def _joined(self, remote: Remote, *, initiator: bool) -> None:
        self.stats.joins_completed += 1
        remote.failure_warned = False
        self.strangers.joined(remote.uid)
        self._retries.pop(remote.uid, None)
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
        # the allow proved the keys, and the cookie it echoed proved the address
        self._budget.validate(remote.host_address)
        self.strangers.proven(remote.uid)
        self._retries.pop(remote.uid, None)
        self._alive_asked.pop(remote.uid, None)  # new keys: the remote may number afresh
        self.admission.proven(remote.role)
        remote.session_keys_changed()  # the one event that may clear message dedup
        remote.done_transactions.clear()
        remote.next_session_id()
        self._replace_stale_initiators(remote)
        self._fast.session_started(remote)
        self._save_remote(remote)
        self._presence(remote, alive=True)

    def _release_address(self, address: Address) -> None:
        """Forget that ``address`` was validated once no remote of ours is there any more."""
        if address in self._budget.validated and not self.register.addressed(address):
            self._budget.forget(address)

    def _moved(self, remote: Remote, address: Address) -> None:
        """``remote`` proved it holds the session's keys at ``address``, not its host
        address: it moved (docs/road.md, "A remote that moves").

        Only a proof moves a remote (its answer to a :class:`~road._alive.PathProbe`
        sent there only, or an allow completed from there), so a forged or replayed
        datagram never redirects our traffic.  Its uid, keys and session stay, the
        address is validated (no 3x limit: it answered), and the keep records it.
        """
        old = remote.host_address
        self.register.readdress(remote, address)
        self.stats.remotes_moved += 1
        self._budget.validate(address)
        self._release_address(old)
        self._save_remote(remote)
        for transaction in remote.transactions.values():
            transaction.follow(old, address)  # (resends of open messages go there too)
        self._fast.moved(remote)
        log.debug("%s: %s moved from %s:%d to %s:%d", self.name, remote.name, old[0], old[1],
                  address[0], address[1])
        self._emit(events.RemoteMoved(remote.name, old, address))

    def _allowed(self, remote: Remote) -> None:
        self.stats.allows_completed += 1
        remote.failure_warned = False
        self._emit(events.Allowed(remote.name, remote.session_id))
        self._fast.allowed(remote)
        self._pump(remote)

    def _presence(self, remote: Remote, *, alive: bool, reason: str = "") -> None:
        if alive:
            remote.unanswered_checks = 0
            self._retries.pop(remote.uid, None)
        elif self._main_to(remote):
            self._retries[remote.uid] = self._retries.get(remote.uid, 0) + 1
        remote.presence_due = self.now + self._retry_delay(remote)
        if alive:
            remote.reap_due = self.now + self.config.reap_interval
            remote.reaped = False
            self._schedule(remote)
            if remote.alive is not True:
                remote.alive = True
                self._emit(events.Alive(remote.name))
                self._pump(remote)
            return
        remote.unanswered_checks += 1
        if remote.alive is not False:
            remote.alive = False
            self._emit(events.RemoteLost(remote.name, reason))
        for messenger in self.messages.flying(remote.uid):
            messenger.requeue(resume=True)  # gone silent: the session stands

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

    # == a remote in the register: added, saved, removed; its timers ==================

    def _add_remote(self, remote: Remote) -> None:
        """File ``remote`` in the register and start its timers."""
        self.register.add(remote)
        remote.presence_due = self.now + self.config.presence_delay(self.local.main)
        remote.reap_due = self.now + self.config.reap_interval
        self._schedule(remote)

    def _stranger(self, remote: Remote) -> None:
        """A vacuous join added ``remote``: count it among the strangers, evicting the oldest
        that never finished joining; reaped unless an allow proves it (:meth:`_manage`)."""
        evicted = self.strangers.add(remote.uid, self.now)
        if self.config.unallowed_reap_after > 0:
            self._schedule(remote)
        for uid in evicted:
            oldest = self.remotes.get(uid)
            if oldest is not None and not oldest.joined:
                self.stats.joins_evicted += 1
                self._drop_stranger(oldest, "too many estates that never finished joining")

    def _remove_remote(self, remote: Remote, reason: str) -> None:
        for transaction in list(remote.transactions.values()):
            transaction.end()
        self.register.drop(remote)
        self._remote_timers.forget(remote.uid)
        self._want_joined.pop(remote.uid, None)
        self.strangers.forget(remote.uid)
        self._retries.pop(remote.uid, None)
        self._alive_asked.pop(remote.uid, None)
        self._release_address(remote.host_address)
        self._fast.remove(remote, reason)
        while remote.outbox:
            self._expire(remote, remote.outbox.popleft(), f"remote removed: {reason}")
        self.keep.remove_remote(remote)
        self._emit(events.RemoteRemoved(remote.name, reason))

    def _drop_stranger(self, remote: Remote, reason: str) -> None:
        """Remove a stranger that never proved its keys, and forget the unproven roles whose
        time has come: a reaped one's own, unless a later join claimed it again (auto once:
        :meth:`Admission.forget_unproven`)."""
        self._remove_remote(remote, reason)
        self.admission.forget_unproven(self.now)

    def _save_remote(self, remote: Remote) -> None:
        if remote.uid in self.remotes:
            self.keep.save_remote(remote)

    def _join_extras(self) -> dict[str, Any]:
        """What our join bodies carry beyond RAET's keys (fast mode's advertisement)."""
        return self._fast.join_extras()

    def _wake(self, transaction: Transaction, at: float) -> None:
        """``transaction`` wants :meth:`handle_timer` at ``at``."""
        self._transaction_timers.push(at, transaction)

    def _schedule(self, remote: Remote, at: float | None = None) -> None:
        """Put the remote's next presence, reap, expiry or cleanup time on the heap."""
        config, times = self.config, [] if at is None else [at]
        if (unproven := self.strangers.reap_time(remote.uid)) is not None:
            times.append(unproven)
        if not remote.reaped:
            if config.keepalive:
                times.append(remote.presence_due)
            if config.reap_interval > 0 and self._main_to(remote):
                times.append(remote.reap_due)
        if remote.outbox and remote.outbox_soonest < math.inf:
            times.append(remote.outbox_soonest)
        if remote.done_transactions:
            times.append(next(iter(remote.done_transactions.values())))
        if times:
            self._remote_timers.push(min(times), remote.uid)

    def _manage(self, remote: Remote) -> None:
        """The remote's time came: reap a stranger, check presence, expire what waited."""
        config, now = self.config, self.now
        unproven = self.strangers.reap_time(remote.uid)
        if unproven is not None and unproven <= now:
            # a stranger that joined (or began to) and never proved its keys with an allow
            self.stats.strangers_reaped += 1
            self._drop_stranger(remote, f"no allow within {config.unallowed_reap_after:g} s "
                                        "of its join")
            return
        if not remote.reaped and config.keepalive and remote.presence_due <= now:
            self._start_alive(remote)
            remote.presence_due = now + self._retry_delay(remote)
        if (config.reap_interval > 0 and not remote.reaped and remote.reap_due <= now
                and self._main_to(remote)):
            remote.reaped = True
            self._emit(events.RemoteReaped(remote.name))
        if remote.outbox_soonest <= now:
            remote.outbox_soonest = self._expire_queued(remote, now)
        while remote.done_transactions:
            tid, expires = next(iter(remote.done_transactions.items()))
            if expires > now:
                break
            del remote.done_transactions[tid]

    # == the fate of a message: sent, put back, expired ==============================

    def _sent(self, remote: Remote, outgoing: Outgoing) -> None:
        self.stats.messages_sent += 1
        self._emit(events.MessageSent(remote.name, outgoing.message_id))

    def _expire(self, remote: Remote, outgoing: Outgoing, reason: str) -> None:
        self.stats.messages_expired += 1
        self._emit(events.MessageExpired(remote.name, outgoing.message_id, outgoing.body,
                                         reason))

    def _requeue(self, remote: Remote, outgoing: Outgoing) -> None:
        """A message not delivered goes back into the outbox, in transmit order."""
        if outgoing.expires <= self.now:
            self._expire(remote, outgoing, "time to live ran out")
            return
        # several messengers requeued one after another must not come out reversed (the
        # outbox is ordered by message id)
        position = 0
        for queued in remote.outbox:
            if queued.message_id > outgoing.message_id:
                break
            position += 1
        remote.outbox.insert(position, outgoing)
        self._watch_expiry(remote, outgoing.expires)

    def _expire_queued(self, remote: Remote, now: float) -> float:
        """Give back the outbox's messages whose time to live ran out by ``now``
        (MessageExpired); the soonest expiry among those left (inf: none)."""
        soonest = math.inf
        keep: deque[Outgoing] = deque()
        for outgoing in remote.outbox:
            if outgoing.expires <= now:
                self._expire(remote, outgoing, "time to live ran out while queued")
            else:
                keep.append(outgoing)
                soonest = min(soonest, outgoing.expires)
        remote.outbox = keep
        return soonest

    def _watch_expiry(self, remote: Remote, expires: float) -> None:
        """A message with time to live until ``expires`` joined the outbox: make sure a timer
        is due by then (one heap entry per new soonest expiry, not one per message)."""
        if expires < remote.outbox_soonest:
            remote.outbox_soonest = expires
            self._schedule(remote)
