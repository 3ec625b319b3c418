"""LaneStack: a sans-IO stack of yards on UNIX-domain datagram sockets.

Feed datagrams in with :meth:`LaneStack.receive_datagram`, take datagrams out
with :meth:`LaneStack.datagrams_to_send`, report the ones the kernel refused
with :meth:`LaneStack.send_failed`, sleep until :meth:`LaneStack.get_timer`,
then call :meth:`LaneStack.handle_timer`; read what happened with
:meth:`LaneStack.next_event`.  ``now`` is monotonic seconds, always passed in:
the stack has no clock and no socket.  Addresses are socket paths (``str``).

Delivery contract with the driver: datagrams are tried in the order
``datagrams_to_send`` hands them out.  The first one the kernel refused for
an address is reported with ``send_failed`` before the driver makes any other
call on the stack; the driver then tries no later datagram of that round for
that address, and they count as refused with it (reporting them too is
harmless).  A datagram not reported by then counts as taken.
A message leaves the outbox only once every one of its pages was taken.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lane import coalesce, events
from lane.pages import PageReader, PageWriter, fast_decode
from lane.stats import Drop, LaneStats
from lane.yard import LocalYard, Outgoing, RemoteYard, check_name, yard_path
from raetlike.errors import BackpressureError, LocalProtocolError, PacketError
from raetlike.names import safe_name
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import Binder, PageHead, parse_page

__all__ = ["BUSY_ERRORS", "LaneConfig", "LaneStack"]

log = logging.getLogger(__name__)

BUSY_ERRORS = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})
"""Errors that mean "the yard is there but its queue is full": resume where we were."""

BUSY_WINDOW = 16
"""Fewest pages handed out per round to a yard whose queue was full (a Linux yard's queue
holds ``net.unix.max_dgram_qlen`` + 1 datagrams, 11 by default): room a wake-up may have
made, without building many pages the kernel will refuse."""

EVICTION_SCAN = 32
"""Yards looked at, least recently heard first, for one that may make room for a new yard
(one with something queued, a main yard or a yard others are routed through goes to the
back of the line instead): making room costs O(1) however many yards are known."""


@dataclass(frozen=True, slots=True)
class LaneConfig:
    """Settings of a LaneStack."""

    page_kind: PageKind = PageKind.JSON
    """How our messages are serialized (RAET's lane default is JSON)."""
    accept: bool = True
    """Accept yards we do not know when they first send (RAET's default), else refuse them."""
    allow: frozenset[str] | None = None
    """Main yard: when given, only these yards are accepted (and routed to), whatever ``accept``."""
    main_yard: str | None = None
    """Name of the lane's main yard; a non-main yard routes to unknown yards through it."""
    outbox_limit: int = 1024
    """Messages waiting per yard before ``transmit`` raises BackpressureError."""
    pages_per_round: int = 256
    """Most pages handed out per yard per ``datagrams_to_send`` (fairness between yards)."""
    busy_retry: float = 0.002
    """First back-off after the yard's queue was full (EAGAIN, ENOBUFS)."""
    gone_retry: float = 0.1
    """First back-off after the yard was not there (ECONNREFUSED, ENOENT, ...)."""
    max_retry: float = 1.0
    """Back-off doubles up to this."""
    unreachable_after: float = 10.0
    """A yard failing this long gets its messages handed back as YardUnreachable."""
    max_open_books: int = 64
    """Half-received books kept at once."""
    max_buffered_bytes: int = 256 * 1024 * 1024
    """Section bytes kept at once over all half-received books."""
    coalesce: bool = True
    """Between raetlike yards, carry many messages in one datagram (docs/lane.md,
    "Coalescing"); RAET yards always get one page per datagram.  False: pages only."""
    coalesce_limit: int = MAX_PAGE_SIZE
    """The largest batch we take (told to the yards we grant, and held to: a larger one is
    dropped, ``Drop.BATCH_TOO_LARGE``); at most 65,535 bytes.  A batch carries at most a
    quarter as many messages (4 bytes of length each)."""
    batch_size: int = 16 * 1024
    """The largest batch we send (within the receiver's grant).  Small enough that our
    socket's send buffer (425,984 bytes under Linux's default cap) holds more batches than a
    receiver's queue holds datagrams (11 by default): a refusal then means the receiver is
    busy, which is what the driver waits out, and not that our own buffer is full."""
    max_yards: int = 4096
    """Yards known at once (``LaneStack.yards``).  Past it a new yard takes the place of the
    least recently heard one with nothing queued (not a main yard, nor one others are routed
    through: ``stats.yards_evicted``); when there is none, a yard's page is dropped
    (``Drop.YARDS_FULL``) and ``transmit`` to a new yard raises BackpressureError."""

    max_forward_bytes: int = 64 * 1024 * 1024
    """Main yard: bytes of pages routed on to other yards and not yet taken by the kernel,
    over all of them.  A page past it is dropped (``Drop.FORWARD_FULL``): without it,
    pages addressed to yards that never read (or to made-up names) held up to
    ``max_yards`` x ``outbox_limit`` pages for ``unreachable_after`` seconds."""

    def __post_init__(self) -> None:
        """Refuse settings no stack can run with (LocalProtocolError)."""
        if type(self.max_yards) is not int or self.max_yards < 1:
            raise LocalProtocolError(
                f"LaneConfig.max_yards must be an int of at least 1, not {self.max_yards!r}")
        if type(self.max_forward_bytes) is not int or self.max_forward_bytes < 0:
            raise LocalProtocolError("LaneConfig.max_forward_bytes must be an int of at least 0, "
                                     f"not {self.max_forward_bytes!r}")


def _yard_name(name: str) -> bool:
    """True if ``name`` can name a yard (a page head may carry any other word)."""
    try:
        check_name("yard", name)
    except LocalProtocolError:
        return False
    return True


class LaneStack:
    """A sans-IO lane stack: one local yard and the yards it talks to."""

    def __init__(self, local: LocalYard, config: LaneConfig | None = None,
                 now: float = 0.0) -> None:
        self.local = local
        self.config = config or LaneConfig()
        self.now = now
        self.stats = LaneStats()
        self.binder = Binder(max_open_books=self.config.max_open_books,
                             max_buffered_bytes=self.config.max_buffered_bytes,
                             stats=self.stats.binder)
        self.yards: dict[str, RemoteYard] = {}
        # the yards by when we last heard from (or sent to) them, least recently first
        self._heard: OrderedDict[str, None] = OrderedDict()
        self._mains: dict[str, str] = {}  # main yards: socket path -> name
        self._routers: set[str] = set()  # yards others were routed through (never evicted)
        self._book_base = 0  # the highest book id used with an evicted yard
        self._events: deque[events.Event] = deque()
        self._message_id = 0
        self._handed: set[str] = set()
        # what the last datagrams_to_send handed out, in order: one entry per message
        # (or routed page) as (yard, message, first page, end page, address)
        self._round: list[tuple[RemoteYard, Outgoing, int, int, str]] = []
        self._refused_addresses: set[str] = set()
        # grants to hand out at the end of the next round, and those the last round handed
        # out (a refusal for their address undoes them: the yard's next page asks again)
        self._grants: list[tuple[bytes, str, RemoteYard, str]] = []
        self._granted: list[tuple[RemoteYard, str]] = []
        self._waiting = False  # some outbox may hold pages: datagrams_to_send must look
        self._forwarding = 0  # bytes of routed pages in the outboxes (max_forward_bytes)
        self._writer = PageWriter(local.name, local.yard_session, self.config.page_kind)
        self._reader = PageReader()
        self.closed = False
        main = self.config.main_yard
        if main is not None and main != local.name:
            self.add_yard(main, main=True)

    @property
    def name(self) -> str:
        """The local yard's name."""
        return self.local.name

    @property
    def path(self) -> str:
        """The local yard's socket path."""
        return self.local.path

    # == commands ==========================================================

    def add_yard(self, name: str, *, path: str | None = None, main: bool = False,
                 via: str | None = None) -> RemoteYard:
        """Record the yard ``name`` (socket at ``path``, default the lane layout).

        ``main`` marks the lane's main yard; ``via`` names the main yard to
        route through instead of sending to the yard's own socket.
        Past ``LaneConfig.max_yards`` it takes the place of the least recently heard
        yard with nothing queued; BackpressureError when there is none.
        """
        check_name("yard", name)
        if name == self.local.name:
            raise LocalProtocolError(f"{name!r} is the local yard")
        if name in self.yards:
            raise LocalProtocolError(f"yard {name!r} is already known")
        if via is not None and via not in self.yards:
            raise LocalProtocolError(f"no yard {via!r} to route through")
        if not self._make_room(keep=via):
            raise BackpressureError(
                f"no room for yard {name}: {len(self.yards)} yards known (LaneConfig.max_yards), "
                "none of them idle")
        remote = RemoteYard(name=name,
                            path=path or yard_path(self.local.directory, self.local.lane, name),
                            via=via, main=main)
        remote.last_book_id = self._book_base  # above any book id an evicted yard had
        self.yards[name] = remote
        self._heard[name] = None
        if main:
            self._mains.setdefault(remote.path, name)
        if via is not None:
            self._routers.add(via)
        return remote

    def _make_room(self, keep: str | None = None) -> bool:
        """Room in ``yards`` for one more: True when there is, evicting an idle yard if it
        must (never ``keep``); False when the first EVICTION_SCAN yards looked at are busy."""
        yards = self.yards
        if len(yards) < self.config.max_yards:
            return True
        heard = self._heard
        for _ in range(min(EVICTION_SCAN, len(heard))):
            name = next(iter(heard))
            remote = yards[name]
            if remote.outbox or remote.queued or remote.main or name in self._routers \
                    or name == keep or name in self._handed:
                heard.move_to_end(name)  # not now: look at the next one
                continue
            del heard[name]
            del yards[name]
            self._book_base = max(self._book_base, remote.last_book_id)
            self.stats.yards_evicted += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: yard %s forgotten to make room (max_yards %d)", self.name,
                          safe_name(name), self.config.max_yards)
            return True
        return False

    def transmit(self, message: Mapping[str, Any], to: str, *, now: float | None = None) -> int:
        """Queue ``message`` for the yard ``to``; returns its message id.

        An unknown yard is added (through the main yard when one is known).
        Raises BackpressureError when that yard's outbox is full (or the yard is
        new and no known yard may make room for it: ``LaneConfig.max_yards``), and
        LocalProtocolError for a message that is not a serializable mapping
        or is larger than a lane message may be.  If the yard stays
        unreachable the message comes back in a YardUnreachable event.
        """
        if now is not None and now > self.now:
            self.now = now
        if self._handed:
            self._confirm()
        if self.closed:
            raise LocalProtocolError("the stack is closed")
        if type(message) is not dict and not isinstance(message, Mapping):
            raise LocalProtocolError(f"a message must be a mapping, not {type(message).__name__}")
        remote = self.yards.get(to) or self._add_destination(to)
        self._heard.move_to_end(to)
        if remote.queued >= self.config.outbox_limit:
            raise BackpressureError(
                f"outbox to yard {to} is full ({self.config.outbox_limit} messages)")
        body = self._writer.body(message)
        self._message_id += 1
        if not (remote.batch_limit and self._batch(remote, self._message_id, message, body)):
            remote.outbox.append(Outgoing(self._message_id, message, self._writer.pages(
                to, remote.next_book_id(), message, body)))
        remote.queued += 1
        self._waiting = True
        return self._message_id

    def _batch(self, remote: RemoteYard, message_id: int, message: Mapping[str, Any],
               body: bytes) -> bool:
        """Put a message in ``remote``'s open batch (or a new one); False if too large."""
        limit = min(remote.batch_limit, self.config.batch_size)
        last = remote.outbox[-1] if remote.outbox else None
        batch = last.batch if last is not None else None
        if batch is None or not batch.fits(body, limit):
            batch = coalesce.Batch(coalesce.batch_head(
                self.local.name, remote.name, self.local.yard_session, self.config.page_kind))
            if not batch.fits(body, limit):
                return False  # a message this large goes as pages
            remote.outbox.append(Outgoing(message_id, message, [b""], batch=batch))
        batch.add(message_id, message, body)
        return True

    def close(self, *, now: float | None = None) -> None:
        """Stop; every message not yet taken by the kernel comes back as YardUnreachable."""
        self._tick(now)
        self._confirm()
        for remote in self.yards.values():
            if remote.outbox:
                self._give_up(remote, "stack closed")
        self.closed = True

    # == sans-IO pump ======================================================

    def receive_datagram(self, data: bytes, source: str | None, now: float) -> None:
        """Take one datagram from the socket ``source``; garbage is dropped and counted.

        Not even a bug of ours that a datagram trips is raised: it is logged (with its
        traceback, the first time and then every 1000th) and counted as
        ``dropped[internal-error]``, and the stack goes on with the next datagram.
        """
        self.now = max(self.now, now)
        stats = self.stats
        stats.datagrams_received += 1
        stats.bytes_received += len(data)
        try:
            if self._handed:
                self._confirm()
            if data[:2] == b"rl":
                if data.startswith(coalesce.BATCH_MAGIC):
                    self._read_batch(data, source)
                    return
                if data.startswith(coalesce.GRANT_MAGIC):
                    self._read_grant(data, source)
                    return
            if self._read_known(data, source):
                return
            self._read_page(data, source)
        except Exception:  # a bug of ours must not let a datagram kill the yard
            stats.drop(Drop.INTERNAL_ERROR)
            if stats.dropped[Drop.INTERNAL_ERROR] % 1000 == 1:
                log.exception("%s: datagram from %s tripped an internal error (%d so far); "
                              "dropped", self.name, safe_name(source),
                              stats.dropped[Drop.INTERNAL_ERROR])

    def _read_page(self, data: bytes, source: str | None) -> None:
        """The full path for a page: parse, check, admit, bind."""
        try:
            head, body = parse_page(data)
        except PacketError as exc:
            self.stats.drop(Drop.MALFORMED)
            log.debug("%s: malformed page from %s: %s", self.name, safe_name(source), exc)
            return
        if head.source == self.local.name:
            self.stats.drop(Drop.OWN_NAME)
            return
        if head.destination != self.local.name:
            if not self.local.main:
                self.stats.drop(Drop.WRONG_DESTINATION)
                log.debug("%s: page for %s dropped", self.name, safe_name(head.destination))
                return
            self._route(head, data, source)
            return
        remote = self.yards.get(head.source)
        if remote is None or (source and source != remote.path):
            remote = self._admit(head.source, source)
            if remote is None:
                return
        self._heard.move_to_end(remote.name)
        if remote.yard_session != head.yard_session:
            self._note_session(remote, head.yard_session)
        try:
            message = self.binder.add_page(head, body)
        except PacketError as exc:
            self.stats.drop(Drop.BAD_BODY)
            log.debug("%s: book from %s did not decode: %s", self.name, safe_name(head.source),
                      exc)
            return
        if message is not None:
            self.stats.messages_received += 1
            self._events.append(events.MessageReceived(
                head.source, message, head.yard_session, head.page_count))
            if head.page_count == 1 and (not source or source == remote.path):
                self._reader.remember(data, head)
        if remote.granted != head.yard_session:
            self._grant(remote, head.yard_session, source)

    def _read_known(self, data: bytes, source: str | None) -> bool:
        """Take ``data`` by the fast path if it is a one-page book under a head accepted
        before, from the yard's current session and socket; False to take the full path."""
        known = self._reader.read(data)
        if known is None:
            return False
        head, body = known
        remote = self.yards.get(head.source)
        if remote is None or remote.yard_session != head.yard_session \
                or (source and source != remote.path):
            return False
        self._heard.move_to_end(remote.name)
        # a one-page book under a head already accepted whole (what ``Binder`` does for it)
        binder = self.binder.stats
        binder.pages += 1
        try:
            message = fast_decode(body, head.kind)
        except PacketError as exc:
            self.stats.drop(Drop.BAD_BODY)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: book from %s did not decode: %s", self.name, remote.name, exc)
            return True
        binder.messages += 1
        self.stats.messages_received += 1
        self._events.append(events.MessageReceived(remote.name, message, head.yard_session, 1))
        if remote.granted != head.yard_session:
            self._grant(remote, head.yard_session, source)
        return True

    # -- coalescing (docs/lane.md, "Coalescing") ----------------------------------------

    def _grant(self, remote: RemoteYard, session: str, source: str | None) -> None:
        """Let a raetlike yard heard directly under ``session`` send us batches."""
        if not (self.config.coalesce and session.startswith(coalesce.COALESCING_MARK)
                and remote.via is None and source == remote.path):
            return
        remote.granted = session
        limit = max(0, min(self.config.coalesce_limit, MAX_PAGE_SIZE))
        self._grants.append((coalesce.grant(self.local.name, remote.name,
                                            self.local.yard_session, limit),
                             remote.path, remote, session))
        self._waiting = True
        self.stats.grants_sent += 1

    def _read_grant(self, data: bytes, source: str | None) -> None:
        """A yard lets us send it batches: only from its own socket, to us, if we coalesce."""
        grant = coalesce.read_grant(data)
        if grant is None:
            self.stats.drop(Drop.MALFORMED)
            return
        grantor, grantee, session, limit = grant
        remote = self.yards.get(grantor)
        if grantee != self.local.name or remote is None or remote.via is not None \
                or source != remote.path:
            self.stats.drop(Drop.ADDRESS_MISMATCH)
            return
        self._heard.move_to_end(grantor)
        if not self.config.coalesce:
            return
        if remote.yard_session != session:
            self._note_session(remote, session)
        remote.batch_limit = min(limit, MAX_PAGE_SIZE)
        self.stats.grants_received += 1

    def _read_batch(self, data: bytes, source: str | None) -> None:
        """Messages a granted yard coalesced: each delivered as a one-page book would be."""
        if len(data) > self.config.coalesce_limit:
            self.stats.drop(Drop.BATCH_TOO_LARGE)
            return
        head = coalesce.read_batch_head(data)
        if head is None:
            self.stats.drop(Drop.MALFORMED)
            return
        name, destination, session, kind, offset = head
        if name == self.local.name:
            self.stats.drop(Drop.OWN_NAME)
            return
        if destination != self.local.name:
            self.stats.drop(Drop.WRONG_DESTINATION)  # batches are never routed
            return
        remote = self.yards.get(name)
        if remote is None or (source and source != remote.path):
            remote = self._admit(name, source)
            if remote is None:
                return
        self._heard.move_to_end(name)
        if remote.yard_session != session:
            self._note_session(remote, session)
        stats = self.stats
        stats.batches_received += 1
        append = self._events.append
        received = events.MessageReceived
        taken = offset
        for body in coalesce.bodies(data, offset):
            taken += coalesce.LENGTH_SIZE + len(body)
            try:
                message = fast_decode(body, kind)
            except PacketError:
                stats.drop(Drop.BAD_BODY)
                continue
            stats.messages_received += 1
            append(received(name, message, session, 1))
        if taken != len(data):
            stats.drop(Drop.MALFORMED)  # a cut batch: the whole bodies before the cut count
        if remote.granted != session:
            self._grant(remote, session, source)

    def _unbatch(self, remote: RemoteYard) -> None:
        """Turn ``remote``'s batches not yet handed out back into pages (it may be RAET now)."""
        remote.batch_limit = 0
        if not any(o.batch is not None and o.next_page == 0 for o in remote.outbox):
            return
        outbox: deque[Outgoing] = deque()
        for outgoing in remote.outbox:
            batch = outgoing.batch
            if batch is None or outgoing.next_page:
                outbox.append(outgoing)
                continue
            for message_id, message, body in zip(batch.message_ids, batch.messages,
                                                 batch.bodies(), strict=True):
                outbox.append(Outgoing(message_id, message, self._writer.pages(
                    remote.name, remote.next_book_id(), message, body)))
        remote.outbox = outbox

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, str]]:
        """What to put on the wire now, as ``(page, socket path)``, in order per yard."""
        self._tick(now)
        if self._handed:
            self._confirm()
        # a new round: what the last one refused or granted is settled (a round that handed
        # out only a grant confirms nothing, so this is not left to _confirm)
        self._refused_addresses.clear()
        self._granted = []
        out: list[tuple[bytes, str]] = []
        if not self._waiting:
            return out  # every outbox was empty at the last call, and nothing came since
        for remote in self.yards.values():
            if remote.outbox:
                self._hand_out(remote, now, out)
        if self._grants:  # last: a refused grant leaves no page of the round behind it
            out.extend((data, address) for data, address, _, _ in self._grants)
            self._granted = [(remote, session) for _, _, remote, session in self._grants]
            self._grants = []
        # an outbox keeps a message until a later call confirms it: it empties only then
        self._waiting = any(remote.outbox for remote in self.yards.values())
        if out:
            self.stats.datagrams_sent += len(out)
            self.stats.bytes_sent += sum([len(page) for page, _ in out])
        return out

    def _hand_out(self, remote: RemoteYard, now: float, out: list[tuple[bytes, str]]) -> None:
        """Add to ``out`` the pages of ``remote`` this round may take (its window)."""
        if remote.blocked_until is not None:
            if remote.blocked_until > now:
                return
            remote.blocked_until = None
            self.stats.retries += 1
        append = out.append
        entries = self._round
        address = self._address(remote)
        budget = remote.window or self.config.pages_per_round
        for outgoing in remote.outbox:
            first = outgoing.next_page
            if outgoing.batch is not None and not outgoing.batch.sealed:
                outgoing.pages[0] = outgoing.batch.seal()
                self.stats.batches_sent += 1
            pages = outgoing.pages
            stop = min(len(pages), first + budget)
            if stop <= first:
                continue
            if stop - first == 1:
                append((pages[first], address))
            else:
                out.extend([(page, address) for page in pages[first:stop]])
            entries.append((remote, outgoing, first, stop, address))
            outgoing.next_page = stop
            budget -= stop - first
            if budget <= 0:
                break
        remote.window_filled = budget <= 0
        self._handed.add(remote.name)

    def send_failed(self, address: str, data: bytes, error: int, now: float) -> None:
        """The kernel refused ``data`` for ``address`` with ``error`` (an errno).

        That page and every later page of this round for ``address`` count as
        refused.  The messages are kept and tried again after a back-off (or
        at once on ``send_ready``): from the refused page when the yard was
        busy, from their first page when it was gone (a restarted yard needs
        the whole book).  A yard failing for ``unreachable_after`` seconds gets
        its messages handed back.
        """
        self._tick(now)
        for remote, session in self._granted:  # its grant did not go (or a page before it)
            if remote.path == address and remote.granted == session:
                remote.granted = None
        if address in self._refused_addresses:
            return  # counted with the first refusal for this address this round
        if data.startswith(coalesce.GRANT_MAGIC):
            self._refused_addresses.add(address)
            return  # asked again by the yard's next page
        found = self._refused_entries(address, data)
        if found is None:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: failure for a page not handed out this round (%s)",
                          self.name, address)
            return
        refused, index, position = found
        self.stats.send_failures += 1
        busy = error in BUSY_ERRORS
        untaken = 0
        untaken_bytes = 0
        taken_before: dict[str, int] = {}  # yard -> pages it got in before the refusal
        leading = True  # the entry holding ``data``: refused from ``index`` on
        for remote, outgoing, first, stop, _ in refused:  # mostly one-page books: keep it lean
            start = index if leading else first
            pages = outgoing.pages
            untaken += stop - start
            untaken_bytes += len(pages[start]) if stop - start == 1 \
                else sum(map(len, pages[start:stop]))
            rewind = start if busy else 0
            outgoing.next_page = min(outgoing.next_page, rewind)
            if remote.name not in taken_before:
                taken_before[remote.name] = position if leading else 0
            leading = False
        self.stats.datagrams_sent -= untaken  # counted when handed out; not taken after all
        self.stats.bytes_sent -= untaken_bytes
        for name, position in taken_before.items():
            self._refused(self.yards[name], busy, position, error)

    def _refused_entries(self, address: str, data: bytes) -> tuple[
            list[tuple[RemoteYard, Outgoing, int, int, str]], int, int] | None:
        """This round's entries for ``address`` from the one holding ``data`` on, its page
        index, and how many pages its yard got in before it this round.

        Those entries leave the round (a later report for them is a no-op).
        """
        entries = self._round
        taken: dict[str, int] = {}
        for number, (remote, outgoing, first, stop, at) in enumerate(entries):
            if at != address:
                continue
            pages = outgoing.pages
            if stop - first == 1 and pages[first] is not data:  # most books: one page
                taken[remote.name] = taken.get(remote.name, 0) + 1
                continue
            for index in range(first, stop):
                if pages[index] is data:
                    self._refused_addresses.add(address)
                    refused = [entry for entry in entries[number:] if entry[4] == address]
                    self._round = entries[:number] + [
                        entry for entry in entries[number:] if entry[4] != address]
                    return refused, index, taken.get(remote.name, 0) + index - first
            taken[remote.name] = taken.get(remote.name, 0) + stop - first
        return None

    def _refused(self, remote: RemoteYard, busy: bool, position: int, error: int) -> None:
        """Back off ``remote`` after a refusal; it had ``position`` pages taken this round."""
        if busy:  # hand out about what its queue took, not a whole round's budget, next time
            remote.window = min(max(position, BUSY_WINDOW), self.config.pages_per_round)
        if not busy and not remote.rewound:
            remote.rewound = True
            for later in itertools.takewhile(lambda o: o.next_page > 0, remote.outbox):
                later.next_page = 0  # a restarted yard needs whole books
            if remote.batch_limit or remote.granted is not None:
                remote.granted = None  # whatever comes back there is granted anew
                self._unbatch(remote)  # and gets pages until it grants
        if remote.blocked_until is not None and remote.blocked_until >= self.now:
            return  # already backing off
        if busy and position > 0:  # the yard took pages this round: it drains; wait for room
            remote.failing_since = None
            remote.retry_delay = 0.0
            remote.blocked_until = self.now + self.config.busy_retry
            return
        self._back_off(remote, busy, os.strerror(error))

    def send_ready(self, address: str, now: float) -> None:
        """The driver saw room again in the queue of the socket at ``address``.

        Yards reached through that socket that are backing off retry at once
        (the next ``datagrams_to_send``); a driver that cannot tell leaves
        them to their timers.
        """
        self._tick(now)
        for remote in self.yards.values():
            if remote.blocked_until is not None and remote.outbox \
                    and self._address(remote) == address:
                remote.blocked_until = self.now

    def get_timer(self) -> float | None:
        """The earliest moment the stack wants attention, or None when idle."""
        if self._grants:
            return self.now
        for name in self._handed:  # what the kernel took leaves the outbox (frees room) then
            remote = self.yards.get(name)
            if remote is not None and remote.outbox \
                    and remote.outbox[0].next_page >= len(remote.outbox[0].pages):
                return self.now
        if not self._waiting:
            return None
        earliest: float | None = None
        for remote in self.yards.values():
            outbox = remote.outbox
            if not outbox:
                continue
            if remote.blocked_until is not None:
                timer = remote.blocked_until
            elif outbox[-1].next_page < len(outbox[-1].pages):  # handed out in order
                timer = self.now
            else:
                continue
            if earliest is None or timer < earliest:
                earliest = timer
        return earliest

    def handle_timer(self, now: float) -> None:
        """Let due timers fire (back-offs end; the next ``datagrams_to_send`` retries)."""
        self._tick(now)
        self._confirm()

    def next_event(self) -> events.Event | None:
        """The oldest event not yet taken, or None."""
        if self._handed:
            self._confirm()
        return self._events.popleft() if self._events else None

    # == inbound ===========================================================

    def _acceptable(self, name: str) -> bool:
        allow = self.config.allow
        if allow is not None:
            return name in allow
        return self.config.accept

    def _admit(self, name: str, source: str | None) -> RemoteYard | None:
        """The known yard ``name`` sending from ``source``, or a newly accepted one."""
        remote = self.yards.get(name)
        if remote is not None:
            if source and source != remote.path and source not in self._mains:
                self.stats.drop(Drop.ADDRESS_MISMATCH)
                log.debug("%s: page of %s from %s dropped", self.name, name, safe_name(source))
                return None
            return remote
        if not self._acceptable(name):
            self.stats.drop(Drop.REFUSED)
            log.debug("%s: unaccepted yard %s dropped", self.name, safe_name(name))
            return None
        if not _yard_name(name):
            self.stats.drop(Drop.MALFORMED)  # the head parses, but names no possible yard
            return None
        via = self._mains.get(source) if source else None
        if not self._make_room(keep=via):
            self.stats.drop(Drop.YARDS_FULL)
            log.debug("%s: no room for yard %s: dropped", self.name, safe_name(name))
            return None
        own = yard_path(self.local.directory, self.local.lane, name)
        path = own if via is not None or not source else source
        remote = self.add_yard(name, path=path, via=via)
        self.stats.yards_added += 1
        self._events.append(events.YardAdded(name, self._address(remote)))
        return remote

    def _note_session(self, remote: RemoteYard, session: str) -> None:
        old = remote.yard_session
        remote.yard_session = session
        if old is None or old == session:
            return
        if remote.batch_limit and session not in remote.past_sessions:
            self._unbatch(remote)  # a new process: batches again only once it grants
        if session not in remote.past_sessions:
            self._events.append(events.YardRestarted(remote.name, old, session))
        remote.past_sessions.append(old)

    def _route(self, head: PageHead, data: bytes, source: str | None) -> None:
        """Main yard: pass a page on to the yard it is addressed to."""
        sender = self._admit(head.source, source)
        if sender is None:
            return
        self._heard.move_to_end(sender.name)
        destination = self.yards.get(head.destination)
        if destination is None:
            if not self._acceptable(head.destination) or not _yard_name(head.destination):
                self.stats.drop(Drop.UNKNOWN_DESTINATION)
                return
            if not self._make_room(keep=sender.name):
                self.stats.drop(Drop.YARDS_FULL)
                return
            destination = self.add_yard(head.destination)
        if destination.via is not None or destination.queued >= self.config.outbox_limit:
            self.stats.drop(Drop.UNKNOWN_DESTINATION)
            return
        if self._forwarding + len(data) > self.config.max_forward_bytes:
            self.stats.drop(Drop.FORWARD_FULL)
            return
        self._forwarding += len(data)
        destination.outbox.append(Outgoing(0, None, [data]))
        destination.queued += 1
        self._waiting = True
        self.stats.pages_forwarded += 1

    # == outbound ==========================================================

    def _add_destination(self, name: str) -> RemoteYard:
        main = None if self.local.main else next(iter(self._mains.values()), None)
        return self.add_yard(name, via=main)

    def _address(self, remote: RemoteYard) -> str:
        if remote.via is not None:
            return self.yards[remote.via].path
        return remote.path

    def _confirm(self) -> None:
        """Messages fully handed out last round and not reported as failed are sent."""
        for name in self._handed:
            remote = self.yards.get(name)
            if remote is None:
                continue
            outbox = remote.outbox
            while outbox and outbox[0].next_page >= len(outbox[0].pages):
                sent = outbox.popleft()
                remote.queued -= sent.count
                if sent.message is None:  # a routed page
                    self._forwarding -= len(sent.pages[0])
                if sent.message is not None:
                    self.stats.messages_sent += sent.count
            if remote.blocked_until is None:
                remote.failing_since = None
                remote.retry_delay = 0.0
                if remote.window and remote.window_filled:  # all taken, and it wanted more
                    remote.window = min(remote.window * 2, self.config.pages_per_round)
            remote.rewound = False
        self._handed.clear()
        self._round = []
        self._refused_addresses.clear()

    def _back_off(self, remote: RemoteYard, busy: bool, reason: str) -> None:
        remote.last_error = reason
        if remote.failing_since is None:
            remote.failing_since = self.now
        first = self.config.busy_retry if busy else self.config.gone_retry
        remote.retry_delay = (first if remote.retry_delay == 0.0
                              else min(remote.retry_delay * 2, self.config.max_retry))
        if self.now - remote.failing_since >= self.config.unreachable_after:
            self._give_up(remote, reason)
            return
        remote.blocked_until = self.now + remote.retry_delay
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: yard %s %s; retry in %.3f s", self.name, remote.name, reason,
                      remote.retry_delay)

    def _give_up(self, remote: RemoteYard, reason: str) -> None:
        message_ids: list[int] = []
        messages: list[Mapping[str, Any]] = []
        routed = 0
        for outgoing in remote.outbox:
            if outgoing.batch is not None:
                message_ids += outgoing.batch.message_ids
                messages += outgoing.batch.messages
            elif outgoing.message is not None:
                message_ids.append(outgoing.message_id)
                messages.append(outgoing.message)
            else:
                routed += 1
                self._forwarding -= len(outgoing.pages[0])
        remote.outbox.clear()
        remote.queued = 0
        remote.blocked_until = None
        remote.failing_since = None
        remote.retry_delay = 0.0
        self.stats.yards_unreachable += 1
        self.stats.messages_undelivered += len(messages)
        self.stats.forwarded_pages_undelivered += routed
        log.info("%s: yard %s unreachable (%s): %d messages handed back", self.name,
                 remote.name, reason, len(messages))
        self._events.append(events.YardUnreachable(
            remote.name,
            tuple(message_ids),
            tuple(messages),
            routed,
            reason,
        ))

    def _tick(self, now: float | None) -> None:
        if now is not None and now > self.now:
            self.now = now
