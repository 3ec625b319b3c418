"""Fast mode, receiving: the peer's stream of messages, and the acks we owe it.

road/_fast_link.py's :meth:`~road._fast_link.FastLink.receive` authenticates
every datagram at the door (key id, replay window, AEAD tag) and hands these
parts only opened frames, so nothing here can act on a forged field.

:class:`ReceiveStream` delivers each message of the peer's stream once, in
any order: one-chunk messages inline (their events in one batch), long ones
reassembled within the bounds of :class:`road.config.RoadConfig`
(``max_message_size``, ``max_open_messages``, ``max_open_messages_total``,
``max_reassembly_bytes``, ``max_reassembly_share``, ``reassembly_timeout``: memory follows the bytes
received, never a declared size).  :class:`AckState` keeps the peer's packet
numbers (the replay window and the ranges to acknowledge) and decides when
our ack is due.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raetlike.errors import PacketError
from raetlike.wire.body import parse_body
from raetlike.wire.kinds import BodyKind
from road import events
from road._fast_control import ReceivedRanges, ReplayWindow
from road._fast_wire import MessageFields, pack_ack
from road.stats import Drop

if TYPE_CHECKING:
    from road._message import Partials
    from road.config import RoadConfig
    from road.remote import Remote
    from road.stats import RoadStats

__all__ = ["MIN_CHUNK", "PIECE_COST", "VIEW_PIECE_COST", "AckState", "Partial", "ReceiveStream"]

NEVER = float("inf")

_BODY_KINDS = {int(kind): kind for kind in BodyKind}
_RAW = int(BodyKind.RAW)
_SHORT_ACK_SPACING = 0.001  # at most one early ack for short datagrams per millisecond
MIN_CHUNK = 64
"""The smallest chunk but a message's last (senders cut at least this; FastLink checks)."""
PIECE_COST = 128
"""Bytes a held chunk costs beyond its own, charged to ``max_reassembly_bytes`` with it:
its bytes object's header and its entry in the partial message's dict (key included),
94-117 bytes measured with tracemalloc (CPython 3.11, 64-bit), rounded up.  Counted
bare, 64-byte chunks held 2.6 times the bound (docs/security.md)."""
VIEW_PIECE_COST = 448
"""The same for a chunk held as a view into its datagram (a chunk of half the datagram or
more, kept uncopied), which is charged the whole opened datagram it keeps alive beside
this: the view, its buffer's record, the datagram's bytes header and the dict entry,
~400 bytes measured, rounded up."""
_SWEEP_SPACING = 1.0  # partials are swept for quiet ones at most once a second


class Partial:
    """Chunks of one message still arriving: only what came, never slots for what was declared."""

    __slots__ = ("charged", "chunk_size", "chunks", "held", "last", "pieces", "total")

    def __init__(self, total: int, chunks: int, now: float) -> None:
        self.total = total
        self.chunks = chunks
        self.chunk_size = 0  # the size of every chunk but the last, once one of them came
        self.held = 0  # bytes of the pieces held (never more than total)
        self.charged = 0  # what they cost, counted in max_reassembly_bytes (PIECE_COST)
        self.last = now  # when the last new piece came (reassembly_timeout counts from it)
        self.pieces: dict[int, bytes | memoryview] = {}


class ReceiveStream:
    """The peer's messages: each delivered once, whatever the order or repetition.

    Everything here changes only on frames of a datagram whose AEAD tag verified.
    """

    __slots__ = ("config", "dedup_window", "delivered", "floor", "partials", "partials_check",
                 "peer_stream", "pinned", "reassembly", "remote", "stats")

    def __init__(self, remote: Remote, config: RoadConfig, stats: RoadStats,
                 reassembly: Partials) -> None:
        self.remote = remote  # its name and session go into every MessageReceived
        self.config = config
        self.stats = stats
        self.reassembly = reassembly  # the bounds shared with RAET mode and other remotes
        self.peer_stream: int | None = None
        self.pinned = False  # the peer's stream is fixed for the current keys
        self.floor = 1  # every message number below it is done (delivered or abandoned)
        self.delivered: set[int] = set()  # numbers done above the floor (may hold stale ones)
        # how far above the floor a message may be before the floor moves up to it
        self.dedup_window = max(config.dedup_window, 2 * config.fast_messages_in_flight)
        self.partials: dict[int, Partial] = {}
        self.partials_check = NEVER  # when partials may next have gone quiet too long

    def accepts(self, stream: int) -> bool:
        """Whether a datagram of ``stream`` belongs here (the first under new keys names it).

        A new stream means the peer restarted: what was done is forgotten.
        A second stream under the same keys: no honest peer sends that.
        """
        if stream != self.peer_stream:
            if self.pinned:
                return False
            self.peer_stream = stream
            self.floor = 1
            self.delivered.clear()
            self.release_partials()
        self.pinned = True
        return True

    # -- each message once ----------------------------------------------------------
    def _done(self, number: int) -> bool:
        return number < self.floor or number in self.delivered

    def _mark_done(self, number: int) -> None:
        """Message ``number`` (not done yet) is delivered or abandoned."""
        if number != self.floor:
            self._done_above(number)
            return
        floor, delivered = number + 1, self.delivered
        while floor in delivered:
            delivered.discard(floor)
            floor += 1
        self.floor = floor

    def _done_above(self, number: int) -> None:
        """Message ``number``, above the floor, is done: remembered within the dedup window.

        A number a window or more above the floor moves the floor up to a
        window below it (what lies under is done from then on: an honest
        peer never has so many messages open), and the set is cleaned of
        numbers under the floor once it holds two windows' worth, so it never
        holds more, at an amortized O(1) per message.
        """
        delivered, window = self.delivered, self.dedup_window
        if number - self.floor >= window:
            floor = number - window + 1
            while floor in delivered:
                delivered.discard(floor)
                floor += 1
            self.floor = floor
        delivered.add(number)
        if len(delivered) > 2 * window:
            floor = self.floor
            delivered.difference_update([done for done in delivered if done < floor])

    def take(self, messages: list[MessageFields], now: float, plain_size: int,
             made: list[events.Event]) -> bool:
        """A datagram's message frames; a MessageReceived into ``made`` for each completed.

        True when a chunk was refused for want of room (open messages or
        reassembly bytes): the datagram then goes unacknowledged, so its
        sender sends the chunk again later; what the datagram delivered stays
        delivered, once.
        """
        stats = self.stats
        delivered, partials = self.delivered, self.partials
        name, session = self.remote.name, self.remote.remote_session_id
        received = events.MessageReceived
        refused = False
        for fields in messages:
            number, total, _, chunks, body_kind, data = fields
            if chunks != 1:
                refused = self._chunk(fields, now, plain_size, made) or refused
                continue
            floor = self.floor
            if number < floor or number in delivered or len(data) != total:
                stats.drop(Drop.MALFORMED if len(data) != total and not self._done(number)
                           else Drop.DUPLICATE)
                continue
            if partials and number in partials:  # chunks of it came before: a confused peer
                self._drop_partial(number)
            if number == floor:  # done: the floor rises past every number done already
                floor += 1
                while floor in delivered:
                    delivered.discard(floor)
                    floor += 1
                self.floor = floor
            else:
                self._done_above(number)
            if body_kind == _RAW:
                body: Any = data if type(data) is bytes else bytes(data)
            else:
                body = self._body(body_kind, bytes(data))
                if body is None:
                    continue
            made.append(received(name, body, session, number & 0xFFFFFFFF, 1))
        return refused

    def abandoned(self, number: int) -> None:
        """The peer gave message ``number`` up: its chunks go, and it counts as done."""
        if not self._done(number):
            self._drop_partial(number)
            self._mark_done(number)

    # -- reassembly within bounds ---------------------------------------------------
    def _chunk(self, fields: MessageFields, now: float, plain_size: int,
               made: list[events.Event]) -> bool:
        """One chunk of a long message (its event into ``made`` when it completes one).

        True when refused for want of room; every other refusal is dropped
        and counted (the datagram is still acknowledged).
        """
        number, total, index, chunks, body_kind, data = fields
        stats = self.stats
        if number < self.floor or number in self.delivered:
            stats.drop(Drop.DUPLICATE)
            return False
        size = len(data)
        # a view into the datagram when the chunk is most of it (no copy), else its own
        # bytes; either is charged what it keeps in memory (PIECE_COST, VIEW_PIECE_COST)
        view = 2 * size >= plain_size
        cost = plain_size + VIEW_PIECE_COST if view else size + PIECE_COST
        last = chunks - 1
        # every chunk but the last has one size, at least MIN_CHUNK, and they add up to total
        if ((index < last and not (size >= MIN_CHUNK and last * size < total <= chunks * size))
                or size == 0):
            stats.drop(Drop.MALFORMED)
            return False
        partial = self.partials.get(number)
        if partial is None:
            opened = self._open_partial(number, total, chunks, cost, now)
            if not isinstance(opened, Partial):
                return opened
            partial = opened
        elif partial.chunks != chunks or partial.total != total:
            stats.drop(Drop.MALFORMED)
            return False
        pieces = partial.pieces
        if index in pieces:
            stats.drop(Drop.DUPLICATE)
            return False
        if index < last and size != partial.chunk_size:
            if partial.chunk_size:
                stats.drop(Drop.MALFORMED)
                return False
            partial.chunk_size = size
        if partial.held + size > total:
            stats.drop(Drop.MALFORMED)
            return False
        shared = self.reassembly
        if not shared.room(self.remote, cost):  # within the total and our share (counted)
            return True
        pieces[index] = data if view else bytes(data)
        partial.held += size
        partial.charged += cost
        shared.charge(self.remote, cost)
        partial.last = now
        if len(pieces) == partial.chunks:
            self._complete(number, partial, body_kind, made)
        return False

    def _complete(self, number: int, partial: Partial, body_kind: int,
                  made: list[events.Event]) -> None:
        """Every chunk of message ``number`` is in: deliver it (its event into ``made``)."""
        pieces = partial.pieces
        whole = b"".join([pieces[i] for i in range(partial.chunks)])
        self._drop_partial(number)
        self._mark_done(number)
        if len(whole) != partial.total:
            self.stats.drop(Drop.MALFORMED)
            return
        body = self._body(body_kind, whole)
        if body is not None:
            made.append(events.MessageReceived(self.remote.name, body,
                                               self.remote.remote_session_id,
                                               number & 0xFFFFFFFF, partial.chunks))

    def _open_partial(self, number: int, total: int, chunks: int, cost: int,
                      now: float) -> Partial | bool:
        """A new partial message for a first chunk costing ``cost``, or why not: True when
        refused for want of room (the datagram goes unacked, its sender retries), False
        when refused for good."""
        config, shared = self.config, self.reassembly
        if total > config.max_message_size:
            self.stats.drop(Drop.MESSAGE_TOO_LARGE)
            return False
        if not shared.room(self.remote, cost):  # within the total and our share (counted)
            return True
        if not shared.open(self.remote, total):  # counts its refusal
            return True
        partial = self.partials[number] = Partial(total, chunks, now)
        if self.partials_check == NEVER:
            self.partials_check = now + config.reassembly_timeout
        return partial

    def _drop_partial(self, number: int) -> None:
        """Forget the partial message ``number`` and what it held."""
        partial = self.partials.pop(number, None)
        if partial is not None:
            self.reassembly.close(self.remote, partial.charged)

    def release_partials(self) -> None:
        """Forget every partial message (a new peer stream, the link gone)."""
        shared, remote = self.reassembly, self.remote
        for partial in self.partials.values():
            shared.close(remote, partial.charged)
        self.partials.clear()
        self.partials_check = NEVER

    def sweep_partials(self, now: float) -> None:
        """Free every partial message without a new piece for ``reassembly_timeout``.

        Whatever its state: an honest sender that stays away that long lets
        the message expire (``MessageExpired`` on its side) and abandons it.
        Sweeps come at most once per second, so a partial goes at most a
        second after its timeout; each costs one pass over the open partials.
        """
        timeout = self.config.reassembly_timeout
        soonest = NEVER
        for number, partial in list(self.partials.items()):
            due = partial.last + timeout
            if due <= now:
                self._drop_partial(number)
                self.stats.drop(Drop.REASSEMBLY_TIMEOUT)
            elif due < soonest:
                soonest = due
        self.partials_check = (max(soonest, now + min(_SWEEP_SPACING, timeout))
                               if soonest != NEVER else NEVER)

    def _body(self, body_kind: int, payload: bytes) -> Any:
        """The message a payload carries; None (dropped, counted) when it does not parse."""
        kind = _BODY_KINDS.get(body_kind)
        try:
            if kind is None:
                raise PacketError("bad-body", f"unknown body kind {body_kind}")
            return parse_body(kind, payload)
        except PacketError:
            self.stats.drop(Drop.BAD_BODY)
            return None


class AckState:
    """The peer's packet numbers under the current keys: which came, and when we say so."""

    __slots__ = ("delay", "due", "last_sent", "pending", "previous_short", "received", "replay")

    def __init__(self, delay: float) -> None:
        self.delay = delay  # how long an ack may wait for a second datagram to cover
        self.last_sent = -NEVER  # when an ack frame last went
        self.previous_short = False  # the last ack-eliciting datagram was short
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.pending = 0  # ack-eliciting datagrams not yet acknowledged
        self.due: float | None = None

    def reset(self) -> None:
        """New keys: packet numbers start again."""
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.pending = 0
        self.due = None
        self.previous_short = False

    def later(self, short: bool, now: float) -> None:
        """An ack-eliciting datagram arrived: when its ack is due.

        Every second one at once; a short one (a sender with more to say fills
        its datagrams, so it is a burst's tail or a lone message) at once too:
        always when a full one came before it (the tail of a burst), else at
        most one such ack per _SHORT_ACK_SPACING, so a stream of short
        datagrams keeps the every-second cadence; any other after the delay.

        A burst's tail used to be held like a stream's short datagram: it
        arrives just after the every-second ack of the full datagrams before
        it, so its ack waited a millisecond for a timer, longer when the woken
        process then waited for a CPU (issue 16; docs/performance-floors.md,
        "Short bursts").
        """
        self.pending += 1
        tail = short and not self.previous_short
        self.previous_short = short
        if self.pending >= 2 or tail:
            self.due = now
            return
        due = self.due if self.due is not None else now + self.delay
        if short:
            due = min(due, max(now, self.last_sent + _SHORT_ACK_SPACING))
        self.due = due

    def frame(self, now: float, *, with_data: bool) -> bytes:
        """The ack frame to send now (at most 4 ranges beside data); nothing is pending after."""
        ranges = self.received.highest_first()
        self.pending = 0
        self.due = None
        self.last_sent = now
        return pack_ack(ranges[:4] if with_data else ranges)
