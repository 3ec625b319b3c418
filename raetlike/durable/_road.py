"""DurableRoad: a RoadStack whose accepted messages and delivered ids survive a crash.

It is driven exactly like the stack (the same sans-IO calls), so the loop, the UDP
driver, asyncio and the simulated link drive it unchanged.  What it adds:

- :meth:`DurableRoad.transmit` stores the message (written to the OS) before it
  returns, and gives back its *durable id*: 1, 2, ... for the life of the store, across
  restarts.  ``MessageSent`` and ``MessageExpired`` come out carrying that id.  A
  message leaves the store when the remote acknowledged it or it expired; closing the
  stack keeps it.  Opening the store again queues every message still held, in order,
  with the time to live it had left.
- The message travels in an envelope: a mapping body as ``{"durable": [store, seq],
  "body": body}``, a bytes body behind a 24-byte prefix (:data:`RAW_MAGIC`, then store
  and seq as little-endian u64), so raw bytes stay raw on the wire whatever the body
  packing.  ``seq`` numbers the store's messages to that one remote (1, 2, ...).  The
  receiving DurableRoad unwraps it, and hands over each (sender, store, seq) once,
  however often either side restarted.  A repeat is dropped and counted (``duplicates``).
- The dedup marks of everything received are written before any datagram leaves the
  process (:meth:`datagrams_to_send` commits first), so no acknowledgement can leave for
  a message whose mark a crash would lose.  With a journal, each durable delivery is
  journaled here, and that line is its mark (see :mod:`raetlike.durable._seen`).
- A store or journal that cannot be written (a full disk, EIO, EROFS, a removed
  directory, ...) never raises out of the road, but from :meth:`transmit` as
  :class:`~raetlike.errors.StoreWriteError` (a BackpressureError: nothing stored): a
  round whose marks cannot be written sends nothing and is counted (:attr:`held_for_room`,
  :attr:`held_for_errors`), a failed interval sync is counted (:attr:`sync_errors`) and
  due again an interval on, and :meth:`close` logs what it could not write.

See docs/reliability.md, "Durable delivery", for what survives what.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from raetlike.durable._api import DurableConfig, DurableMessageReceived
from raetlike.durable._log import write_error
from raetlike.durable._outbox import RAW_HEAD, RAW_MAGIC, DurableOutbox, Stored
from raetlike.durable._seen import DurableSeen
from raetlike.errors import (
    BackpressureError,
    LocalProtocolError,
    StoreError,
    StoreFullError,
    StoreWriteError,
)
from raetlike.journal import JournalWriter, durable_marks_after
from road import events
from road.config import LocalEstate
from road.remote import Address, Remote, message_body
from road.stack import RoadStack

__all__ = ["DURABLE_KEY", "RAW_MAGIC", "DurableConfig", "DurableMessageReceived", "DurableRoad",
           "is_durable_envelope"]

log = logging.getLogger(__name__)

DURABLE_KEY = "durable"
"""The envelope's key for ``[store, seq]`` (beside ``body``)."""
_RAW_HEAD = RAW_HEAD
_BODY = "body"
_ENVELOPE_KEYS = frozenset({DURABLE_KEY, _BODY})
_CLOSING = "stack closed"
HOLD_RETRY = 0.05
"""Seconds between tries while the marks cannot be written (the round is held): the
stack's timer, due at once for what waits to be sent, is put off till then, so a driver
does not spin."""
CHECK_EVERY = 1.0
"""Seconds between two checks, at a round's commit, that the stores' open segments are
still linked (one fstat each; a commit that writes marks checks its segment every time):
a removed directory takes them, and appends into them still succeed and are lost."""


def is_durable_envelope(body: object) -> bool:
    """True for a durable message as it travels (see the module doc)."""
    return _opened(body) is not None


def _opened(body: object) -> tuple[int, int, Any] | None:
    """``(store, id, original body)`` of an envelope, or None for anything else."""
    if type(body) is bytes:
        if len(body) < _RAW_HEAD.size or not body.startswith(RAW_MAGIC):
            return None
        _, store, seq = _RAW_HEAD.unpack_from(body)
        return (store, seq, body[_RAW_HEAD.size:]) if store and seq else None
    if not isinstance(body, Mapping) or body.keys() != _ENVELOPE_KEYS:
        return None
    mark = body[DURABLE_KEY]
    if (isinstance(mark, list | tuple) and len(mark) == 2
            and all(type(n) is int and 0 < n < 1 << 64 for n in mark)):
        return mark[0], mark[1], body[_BODY]
    return None


class DurableRoad:
    """A :class:`RoadStack` with a durable outbox and durable dedup; see the module doc."""

    def __init__(self, stack: RoadStack, directory: Path, config: DurableConfig | None = None,
                 *, journal: JournalWriter | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        """Open (or create) the store under ``directory`` and queue what it holds.

        ``journal``: journal each durable delivery (the line is its dedup mark).
        ``wall``: the wall clock that stored expiry times are kept in.
        """
        self.stack = stack
        self.config = config = config or DurableConfig()
        self.directory = Path(directory)
        self.journal = journal
        self.wall = wall
        self.duplicates_seen = 0
        """Durable messages received again and dropped."""
        self.not_durable = 0
        """Messages received without an envelope (handed over as they are)."""
        self.held_for_room = 0
        """Rounds whose datagrams waited because the disk had no room for the marks."""
        self.held_for_errors = 0
        """Rounds whose datagrams waited because another I/O error (EIO, EROFS, a removed
        directory, ...) kept the marks (or the journal lines that are marks) from being
        written."""
        self.sync_errors = 0
        """Interval syncs of the stores that failed (each due again an interval on)."""
        self.write_errors = 0
        """Every write error the road met and did not raise: the held rounds', the failed
        syncs' and those :meth:`close` met."""
        self.last_error: StoreWriteError | None = None
        """The last of them."""
        self.journal_failures = 0
        """Durable deliveries the journal could not take (their marks kept in the store)."""
        self._lock = _lock(self.directory)
        try:
            self.outbox = DurableOutbox(
                self.directory / "outbox", fsync=config.fsync,
                interval=config.fsync_interval, max_messages=config.max_messages,
                max_bytes=config.max_bytes, segment_bytes=config.segment_bytes)
            marks = None if journal is None else (
                lambda position: durable_marks_after(journal.directory, journal.node, position))
            self.seen = DurableSeen(
                self.directory / "seen", fsync=config.fsync, interval=config.fsync_interval,
                window=config.dedup_window, max_ranges=config.dedup_ranges,
                max_senders=config.max_senders,
                journal_marks=marks)
        except BaseException:
            self._lock.close()
            raise
        self.seen.checkpoint(None if journal is None else journal.position())
        self._ids: dict[int, int] = {}  # the stack's message id -> durable id
        self._put_raw, self._queue = self.outbox.put_raw, stack.transmit  # the hot path's
        stack.continue_ids(self.outbox.next_id)  # so the two are equal while only we number
        self._events: deque[events.Event] = deque()
        self._journaled = 0  # durable deliveries journaled since the last checkpoint
        self._resends = stack.stats.resend_requests_sent
        self.closed = False
        self.resent = 0
        """Messages the store held at start and queued again (from the first call that
        brings the time: the stack's clock may not be set before)."""
        self._held = True
        self._backlog: dict[str, deque[Stored]] = {}  # remote -> held, waiting for room
        self._retry_at: float | None = None  # while a round is held: when to try again
        self._check_at = 0.0  # when the stores' files are next checked (CHECK_EVERY)

    # == what the store held ===============================================

    def _requeue(self, now: float) -> None:
        """Queue every held message again, in id order per remote, with the time it had
        left; what the stack's outbox has no room for yet waits in :attr:`_backlog`."""
        self._held = False
        for stored in self.outbox.pending():
            self._backlog.setdefault(stored.remote, deque()).append(stored)
        self._drain(now)
        if self.resent:
            log.info("%s: %d message(s) held by the durable outbox queued again%s",
                     self.stack.name, self.resent,
                     f", {self.backlog} waiting for room" if self._backlog else "")

    def _drain(self, now: float) -> None:
        """Queue waiting held messages, each remote's in order, while its outbox has room."""
        wall, limit = self.wall(), self.stack.config.outbox_limit
        for remote_name in list(self._backlog):
            waiting = self._backlog[remote_name]
            remote = self.stack.names.get(remote_name)
            while waiting and (remote is None or len(remote.outbox) < limit):
                stored = waiting.popleft()
                left = stored.expires - wall
                if left <= 0 or remote is None:
                    self.outbox.done(stored.id)
                    reason = ("time to live ran out while stopped" if left <= 0 else
                              f"remote {remote_name} is no longer known")
                    self._events.append(events.MessageExpired(remote_name, stored.id,
                                                              stored.body, reason))
                    continue
                message_id = self.stack.transmit(self._envelope(stored.seq, stored.body),
                                                 to=remote_name, ttl=left, now=now)
                self._ids[message_id] = stored.id
                self.resent += 1
            if not waiting:
                del self._backlog[remote_name]

    @property
    def backlog(self) -> int:
        """Held messages waiting for room in the stack's outbox (after a restart)."""
        return sum(len(waiting) for waiting in self._backlog.values())

    def _envelope(self, seq: int, body: Any) -> dict[str, Any] | bytes:
        if type(body) is bytes:
            return _RAW_HEAD.pack(RAW_MAGIC, self.outbox.store, seq) + body
        return {DURABLE_KEY: [self.outbox.store, seq], _BODY: body}

    # == commands ==========================================================

    @property
    def name(self) -> str:
        """The local estate's name."""
        return self.stack.name

    @property
    def names(self) -> dict[str, Remote]:
        """The stack's remotes by name."""
        return self.stack.names

    @property
    def local(self) -> LocalEstate:
        """The stack's local estate."""
        return self.stack.local

    @property
    def next_id(self) -> int:
        """The durable id the next accepted message will get."""
        return self.outbox.next_id

    def transmit(self, message: Mapping[str, Any] | bytes, to: str, *,
                 ttl: float | None = None, now: float | None = None) -> int:
        """Store ``message`` for the remote ``to`` and queue it; returns its durable id.

        The message is written to the OS (and fdatasynced under ``fsync=always``) before
        this returns.  Raises BackpressureError when the durable outbox or the stack's
        outbox is full, or the store cannot be written (StoreWriteError: a full disk,
        EIO, EROFS, ...; StoreFullError when there is no room), LocalProtocolError for an
        unknown remote, a closed stack, or a message the store cannot pack (a string with a
        lone surrogate, which a peer's JSON body may carry, an integer past 64 bits, a type
        msgpack has no form for, a body nested too deep); either way nothing is stored.
        (A plain RoadStack takes such a message and gives it back as MessageExpired,
        "cannot be packed"; a message the store cannot keep is refused at once, as a
        body that is not a mapping or bytes is by both.)
        """
        stack = self.stack
        if self.closed or self._held:
            if self.closed:
                raise LocalProtocolError("the stack is closed")
            self._requeue(stack.now if now is None else now)  # what the store held goes first
        remote = stack.names.get(to) or stack.remote(to)
        config = stack.config
        if len(remote.outbox) >= config.outbox_limit:
            raise BackpressureError(f"outbox to {to} is full ({config.outbox_limit} messages)")
        life = config.message_ttl if ttl is None else ttl
        envelope: dict[str, Any] | bytes
        if type(message) is bytes and not self._backlog:  # the common case: no ABC check
            durable_id, envelope = self._put_raw(to, message, self.wall() + life)
        else:
            body = message_body(message)
            expires = self.wall() + life
            durable_id = self.outbox.put(to, body, expires)
            seq = self.outbox.last_seq(to)
            waiting = self._backlog.get(to)
            if waiting:  # held messages to it wait for room: this one goes behind them
                waiting.append(Stored(durable_id, to, expires, body, seq))
                return durable_id
            envelope = self._envelope(seq, body)
        self._ids[self._queue(envelope, to=to, ttl=life, now=now)] = durable_id
        return durable_id

    def close(self, *, now: float | None = None) -> None:
        """Close the stack; messages still held stay in the store for the next start.

        What cannot be written now (a write error) is logged and counted, not raised, and
        the store is let go all the same: a mark not written had no acknowledgement leave
        (its message comes again), a done record not written sends its message once more.
        """
        if self.closed:
            return
        self.stack.close(now=now)
        self._take_all()
        try:
            self._commit()
        except (StoreWriteError, OSError) as exc:
            self._close_failed("the dedup marks and done records", exc)
        self.closed = True
        for store, what in ((self.outbox, "the outbox"), (self.seen, "the dedup store")):
            try:
                store.close()
            except (StoreWriteError, OSError) as exc:
                self._close_failed(what, exc)
        self._lock.close()

    def _close_failed(self, what: str, exc: StoreWriteError | OSError) -> None:
        error = self._met(exc)
        log.error("%s: closing, %s could not be written: %s", self.stack.name, what, error)

    def _met(self, exc: StoreWriteError | OSError) -> StoreWriteError:
        """Count a write error the road goes on after; the store's error for it."""
        error = exc if isinstance(exc, StoreWriteError) else write_error(
            f"{self.directory}", exc)
        self.write_errors += 1
        self.last_error = error
        return error

    def abandon(self) -> None:
        """Let go of the store as a killed process would: nothing more is written (what
        waits in memory is lost) and the files and lock are released."""
        self.closed = True
        for store in (self.outbox.log, self.seen.log):
            store.abandon()
        self._lock.close()

    # == sans-IO pump ======================================================

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None:
        """Feed one datagram to the stack."""
        if self._held:
            self._requeue(now)
        self.stack.receive_datagram(data, source, now)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]:
        """Mark everything received (durably), then take the stack's datagrams.

        When the marks cannot be written (StoreWriteError: the disk is full, EIO, EROFS,
        ...) nothing leaves this round: no acknowledgement may go out for a message whose
        mark is not down.
        """
        if self._held:
            self._requeue(now)
        elif self._backlog:
            self._drain(now)
        self._take_all()
        if not self._committed(now):
            self._retry_at = now + HOLD_RETRY
            return []
        self._retry_at = None
        return self.stack.datagrams_to_send(now)

    def get_timer(self) -> float | None:
        """The stack's next deadline, or the next interval fsync if sooner (while a round
        is held, the stack's deadline no sooner than the next try: :data:`HOLD_RETRY`)."""
        if self._held:
            return 0.0  # at once: queue what the store held
        timer, retry = self.stack.get_timer(), self._retry_at
        if retry is not None and timer is not None and timer < retry:
            timer = retry  # held: nothing can leave before the next try
        times = [timer, self.outbox.sync_due(), self.seen.sync_due()]
        return min((t for t in times if t is not None), default=None)

    def handle_timer(self, now: float) -> None:
        """Fire the stack's timers; fsync the stores when the interval is up."""
        if self._held:
            self._requeue(now)
        elif self._backlog:
            self._drain(now)
        timer = self.stack.get_timer()
        if timer is not None and timer <= now:
            self.stack.handle_timer(now)
        for store in (self.outbox, self.seen):
            due = store.sync_due()
            if due is not None and due <= now:
                if store is self.seen:
                    self._take_all()
                if not self._committed(now):
                    store.log.synced_at = now  # tried again an interval on, not at once
                    continue
                try:
                    store.sync(now)
                except (StoreWriteError, OSError) as exc:
                    store.log.synced_at = now
                    self._sync_failed(exc)

    def _sync_failed(self, exc: StoreWriteError | OSError) -> None:
        error = self._met(exc)
        self.sync_errors += 1
        if self.sync_errors % 1000 == 1:
            log.warning("%s: a durable store could not be synced (%d so far; due again "
                        "an interval on): %s", self.stack.name, self.sync_errors, error)

    def next_event(self) -> events.Event | None:
        """The next event, durable ids and original bodies in place of the stack's."""
        if not self._events:
            self._take_all()
        return self._events.popleft() if self._events else None

    # == events ============================================================

    def _take_all(self) -> None:
        """Move every event of the stack to ours, in order, durable ids in place of the
        stack's (a message sent, the commonest event, in line)."""
        pull, take, append = self.stack.next_event, self._take, self._events.append
        ids, done, sent = self._ids, self.outbox.done, events.MessageSent
        while (event := pull()) is not None:
            if type(event) is not sent:
                take(event)
                continue
            message_id = event.message_id
            durable_id = ids.pop(message_id, None)
            if durable_id is not None:
                done(durable_id)
                if durable_id != message_id:  # another sender numbered some in between
                    event = sent(event.remote, durable_id)
            append(event)

    def _take(self, event: events.Event) -> None:
        """Every event but MessageSent (see :meth:`_take_all`)."""
        kind = type(event)
        if kind is events.MessageReceived:
            self._received(event)  # type: ignore[arg-type]
            return
        if isinstance(event, events.MessageExpired):
            durable_id = self._ids.pop(event.message_id, None)
            if durable_id is not None:
                if event.reason != _CLOSING:  # closing keeps it for the next start
                    self.outbox.done(durable_id)
                opened = _opened(event.body)
                body = event.body if opened is None else opened[2]
                event = events.MessageExpired(event.remote, durable_id, body, event.reason)
        self._events.append(event)

    def _received(self, event: events.MessageReceived) -> None:
        opened = _opened(event.body)
        if opened is None:
            self.not_durable += 1
            self._events.append(event)
            return
        store, seq, body = opened
        journal = self.journal
        if not self.seen.admit(event.remote, store, seq, journaled=journal is not None):
            self.duplicates_seen += 1
            return
        delivered = DurableMessageReceived(event.remote, body, event.session_id,
                                           event.transaction_id, event.segments, store, seq)
        if journal is not None:
            requested = self.stack.stats.resend_requests_sent
            try:
                journal.record_durable(self.stack.name, delivered, self.wall(), store=store,
                                       durable_seq=seq, resends=requested - self._resends)
            except Exception:  # a journal that cannot take it must not lose the mark
                self.journal_failures += 1
                self.seen.mark(event.remote, store, seq)
                if self.journal_failures % 1000 == 1:
                    log.exception("%s: a delivery could not be journaled (%d so far); its "
                                  "mark kept in the dedup store", self.stack.name,
                                  self.journal_failures)
            else:
                self._journaled += 1
            self._resends = requested
        self._events.append(delivered)

    def _committed(self, now: float) -> bool:
        """:meth:`_commit`; False (logged now and then, counted) when it cannot be written
        (no room on the disk, or another I/O error), and then nothing that needs it may
        happen this round.  The next round tries again."""
        try:
            if now >= self._check_at:
                self._check_at = now + CHECK_EVERY
                self.outbox.check()
                self.seen.check()
            self._commit()
        except (StoreWriteError, OSError) as exc:
            error = self._met(exc)
            if isinstance(error, StoreFullError):
                self.held_for_room += 1
                held = self.held_for_room
            else:
                self.held_for_errors += 1
                held = self.held_for_errors
            if held % 1000 == 1:
                log.warning("%s: datagrams held, the dedup marks cannot be written "
                            "(%d round(s) so far): %s", self.stack.name, held, error)
            return False
        return True

    def _commit(self) -> None:
        """Write marks (the journal's lines first), and done records."""
        journal = self.journal
        if journal is not None:
            try:
                if self._journaled >= self.config.checkpoint_every:
                    self.seen.checkpoint(journal.position())
                    self._journaled = 0
                else:
                    journal.flush()
            except OSError as exc:  # (the writer counted it too: write_errors)
                raise write_error(f"journal {journal.directory}", exc) from None
        self.seen.commit()
        self.outbox.flush()


class _Lock:
    """An exclusive lock on a store directory (one process at a time)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _lock(directory: Path) -> _Lock:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"{directory}: the durable store is in use by another process") \
            from None
    return _Lock(fd)
