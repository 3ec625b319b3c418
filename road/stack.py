"""RoadStack: a sans-IO UDP stack of estates.

Feed datagrams in with :meth:`RoadStack.receive_datagram`, take datagrams
out with :meth:`RoadStack.datagrams_to_send`, sleep until
:meth:`RoadStack.get_timer`, then call :meth:`RoadStack.handle_timer`; read
what happened with :meth:`RoadStack.next_event`.  ``now`` is monotonic
seconds, always passed in: the stack has no clock and no socket.

This module holds the stack's state, its commands and the datagram/event queues.  The
rest is shared out by job into modules of functions that :class:`RoadStack` binds as
its methods (plain functions in the class body: no extra call on the hot path):
packet dispatch (:mod:`road._dispatch`), the outbox and message pump
(:mod:`road._outbox`), timers on lazy heaps (:mod:`road._timers`), a remote's
lifecycle (:mod:`road._lifecycle`) and the register of remotes (:mod:`road._remotes`).
Its settings live in :mod:`road.config`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from raetlike.errors import BackpressureError, CryptoError, LocalProtocolError, PacketError
from raetlike.wire.packet import Packet, parse_packet
from road import _dispatch, _lifecycle, _outbox, _remotes, _timers, events
from road._amplification import AddressBudget, JoinRate
from road._deadlines import Deadlines
from road._fast import FastRoad
from road._fast_wire import is_fast
from road._message import Messenger, Partials
from road._register import Register
from road._transaction import Transaction, tx_index
from road.config import LocalEstate, RoadConfig
from road.keeping import MemoryKeep, PendingKeys, RoadKeep
from road.remote import Address, Outgoing, Remote
from road.stats import Drop, RemoteStats, RoadStats

__all__ = ["LocalEstate", "RoadConfig", "RoadStack"]

log = logging.getLogger(__name__)

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
        self._transaction_timers: Deadlines[Transaction] = Deadlines()
        self._remote_timers: Deadlines[int] = Deadlines()  # remote uids
        self._strangers: dict[int, None] = {}  # uids added by vacuous joins, not joined yet
        self._fast = FastRoad(self)
        self._heard: Remote | None = None  # who the datagram being handled proved to be from
        # join spam and reflection (road._amplification, docs/security.md)
        self._budget = AddressBudget(self.config.max_unvalidated_addresses)
        self._join_rate = JoinRate(self.config.join_rate_per_source,
                                   self.config.join_burst_per_source,
                                   self.config.max_unvalidated_addresses)
        self._unallowed: dict[int, float] = {}  # uid -> when a stranger never allowed goes
        self._retries: dict[int, int] = {}  # uid -> our unanswered attempts in a row (backoff)
        self._key_sweep_at = 0.0  # when the keep's expired pending roles are next swept
        self._pending_keys = PendingKeys()  # strangers' keys in the keep (road._remotes)
        self._partials = Partials()  # RAET-mode messages partly received
        # the last packet authenticated at the door, with its remote (see road._dispatch)
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
        exact = type(message) is bytes  # the common case: no ABC check, no copy
        if not exact and not isinstance(message, Mapping | bytes | bytearray):
            raise LocalProtocolError(
                f"a message must be a mapping or bytes, not {type(message).__name__}")
        remote = self.names.get(to) or self.register.named(to)
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
                self._fast.receive(data, self.now)
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

    def _heard_from(self, remote: Remote, size: int) -> None:
        """An authenticated datagram of ``size`` bytes came from ``remote``."""
        self._heard = remote
        traffic = remote.traffic
        traffic.datagrams_in += 1
        traffic.bytes_in += size
        traffic.last_heard = self.now

    def remote_stats(self) -> list[RemoteStats]:
        """A snapshot of every remote's counters (for metrics; off the hot path).

        Derived figures (mode, round trip, queue depth, seconds since heard) are
        computed here, when read, from state the stack keeps anyway.
        """
        snapshot = []
        for remote in list(self.remotes.values()):
            link = self._fast.links.get(remote.uid)
            fast = link is not None and link.keyed
            if link is not None and fast and link.control.min_rtt > 0:
                rtt: float | None = link.control.smoothed_rtt
            else:
                rtt = remote.round_trip.smoothed
            traffic = remote.traffic
            queued = (len(remote.outbox) + len(self._in_flight.get(remote.uid, ()))
                      + len(self._stalled.get(remote.uid, ())))
            if link is not None:
                queued += len(link.messages)
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
        fast = self._fast.datagrams(self.now) if self._fast.links else []
        out = list(self._out)
        self._out.clear()
        out.extend(fast)
        self.stats.datagrams_sent += len(out)
        self.stats.bytes_sent += sum(len(d) for d, _ in out)
        return out

    get_timer = _timers.get_timer
    handle_timer = _timers.handle_timer

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
            self._in_flight.setdefault(transaction.remote.uid, {})[transaction] = None

    def _untrack(self, transaction: Transaction) -> None:
        self._transactions.pop(transaction, None)
        if isinstance(transaction, Messenger):
            self._in_flight.get(transaction.remote.uid, {}).pop(transaction, None)
            self._stalled.get(transaction.remote.uid, {}).pop(transaction, None)

    def _tx_index_of(self, data: bytes, destination: Address) -> Any:
        return tx_index(parse_packet(data).head, destination)

    # == bound by job from the road._* modules (names the transactions call) ==

    # inbound dispatch (RAET's processRx)
    _process = _dispatch.process
    _join_remote = _dispatch.join_remote
    _correspond = _dispatch.correspond
    _nack_head = _dispatch.nack_head
    _send_nack = _dispatch.send_nack
    _stale = _dispatch.stale
    _reply_stale = _dispatch.reply_stale
    _renew = _dispatch.renew
    _verify = _dispatch.verify
    _open = _dispatch.open_body

    # the outbox and message pump
    _pump = _outbox.pump
    _stall = _outbox.stall
    _window_opened = _outbox.window_opened
    _sent = _outbox.sent
    _requeue = _outbox.requeue
    _expire = _outbox.expire
    _expire_queued = _outbox.expire_queued
    _watch_expiry = _outbox.watch_expiry

    # timers on lazy heaps
    _wake = _timers.wake
    _schedule = _timers.schedule
    _manage = _timers.manage

    # a remote's lifecycle: handshakes started and finished, presence
    _start_join = _lifecycle.start_join
    _start_allow = _lifecycle.start_allow
    _start_alive = _lifecycle.start_alive
    _joined = _lifecycle.joined
    _join_ended = _lifecycle.join_ended
    _session_started = _lifecycle.session_started
    _allowed = _lifecycle.allowed
    _presence = _lifecycle.presence
    _replace_stale_initiators = _lifecycle.replace_stale_initiators
    _remove_stale_correspondents = _lifecycle.remove_stale_correspondents

    # the register of remotes
    _stranger = _remotes.stranger
    _add_remote = _remotes.add_remote
    _remove_remote = _remotes.remove_remote
    _save_remote = _remotes.save_remote
    _acceptance = _remotes.acceptance
    _join_extras = _remotes.join_extras
    _capabilities = _remotes.capabilities
