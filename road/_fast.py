"""Fast mode between two raetlike estates: AEAD datagrams, coalescing, acks and NewReno.

Both sides advertise ``rlk`` in their join bodies (RAET 0.6.8 ignores unknown
keys).  When both did, every allow derives two per-direction ChaCha20-Poly1305
keys from the allow's short-term session box, and messages to that remote go
through a :class:`FastLink` instead of RAET message transactions: several
messages (and acks) per datagram, packet numbers as nonces, a sliding replay
window, cumulative and selective acks, loss detection and a paced NewReno
window.  Join, allow and alive stay RAET transactions.  docs/road.md, "Fast
mode", has the whole story.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from raetlike.crypto import AEAD_TAG_SIZE, AeadKey, counter_nonce, random_bytes
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from raetlike.wire.body import pack_body, parse_body
from raetlike.wire.kinds import BodyKind
from road import events
from road._fast_control import CongestionControl, ReceivedRanges, ReplayWindow
from road._fast_events import message_received, message_sent
from road._fast_wire import (
    FAST_HEADER_SIZE,
    FRAME_MESSAGE_SIZE,
    MESSAGE_HEAD,
    MESSAGE_KIND,
    MessageFields,
    pack_abandon,
    pack_ack,
    pack_header,
    pack_message_head,
    read_frames,
    read_header,
)
from road.stats import Drop

if TYPE_CHECKING:
    from road.remote import Address, Outgoing, Remote
    from road.stack import RoadStack

__all__ = ["CAPABILITY", "FAST_VERSION", "FastLink", "FastRoad"]

log = logging.getLogger(__name__)

CAPABILITY = "rlk"  # the join body key that advertises fast mode
FAST_VERSION = 1
_CONTEXT = b"raetlike fast v1 "
_ACK_ROOM = 2 + 16 * 4  # an ack frame of up to 4 ranges rides along with data
_REKEY_AT = 1 << 62  # packet numbers: ask for a new allow long before 2**64
_MAX_PROBE_INTERVAL = 0.5
_BODY_KINDS = {int(kind): kind for kind in BodyKind}
_RAW = int(BodyKind.RAW)
_NEVER = float("inf")
_SHORT_ACK_SPACING = 0.001  # at most one early ack for short datagrams per millisecond


class _Sending:
    """One message in flight: its payload, cut into fixed chunks, and which are acked."""

    __slots__ = ("acked", "acked_count", "body_kind", "chunk_size", "chunks", "number",
                 "outgoing", "payload", "view")

    acked: bytearray | bytes

    def __init__(self, number: int, outgoing: Outgoing, payload: bytes, body_kind: int,
                 chunk_size: int) -> None:
        self.number = number
        self.outgoing = outgoing
        self.payload = payload
        self.body_kind = body_kind
        self.chunk_size = chunk_size
        length = len(payload)
        if length <= chunk_size:  # one chunk: acked once it leaves FastLink.messages
            self.chunks = 1
            self.acked = _NOT_ACKED
            self.view = None
        else:
            self.chunks = chunks = -(-length // chunk_size)
            self.acked = bytearray(chunks)
            self.view = memoryview(payload)
        self.acked_count = 0

    def frame(self, index: int) -> tuple[bytes, bytes | memoryview]:
        """Chunk ``index`` as its frame head and its bytes (a view: the datagram joins once)."""
        size = self.chunk_size
        view = self.view
        data = self.payload if view is None else view[index * size:(index + 1) * size]
        return pack_message_head(self.number, len(self.payload), index, self.chunks,
                                 body_kind=self.body_kind, size=len(data)), data

    def frame_size(self, index: int) -> int:
        """The bytes chunk ``index`` takes in a datagram, frame head included."""
        if index < self.chunks - 1:
            return FRAME_MESSAGE_SIZE + self.chunk_size
        return FRAME_MESSAGE_SIZE + len(self.payload) - index * self.chunk_size


class _Partial:
    """Chunks of one message still arriving."""

    __slots__ = ("chunks", "pieces", "total")

    def __init__(self, total: int, chunks: int) -> None:
        self.total = total
        self.chunks = chunks
        self.pieces: dict[int, bytes | memoryview] = {}


_NOT_ACKED = bytes(1)  # the acked flags of every one-chunk message (never written)

# a chunk a datagram carried: a one-chunk message as itself, others as (message, chunk index)
_Carried = _Sending | tuple[_Sending, int]
# a datagram awaiting its ack: (sent at, size, chunks it carried, abandons it carried)
_Sent = tuple[float, int, list[_Carried], list[int]]


class FastLink:
    """The fast-mode state with one remote: a sending stream and a receiving stream."""

    def __init__(self, road: FastRoad, remote: Remote) -> None:
        self.road = road
        self.stack = road.stack
        self.remote = remote
        config = self.stack.config
        self.datagram_size = config.fast_datagram_size
        self.chunk_size = (self.datagram_size - FAST_HEADER_SIZE - AEAD_TAG_SIZE
                           - FRAME_MESSAGE_SIZE - _ACK_ROOM)
        if self.chunk_size < 64:
            raise LocalProtocolError("fast_datagram_size is too small")
        self.ack_delay = config.fast_ack_delay
        self.short_datagram = self.datagram_size // 2  # acked at once (see _ack_later)
        self.last_ack = -_NEVER  # when an ack frame last went
        self.keyed = False
        self.sending_ok = False
        self.key_id = 0
        self.send_key: AeadKey | None = None
        self.receive_key: AeadKey | None = None
        # sending
        self.stream_id = int.from_bytes(random_bytes(4), "big")
        self.next_number = 1
        self.oldest = 1  # no message below this one is in flight (see _oldest)
        self.messages: dict[int, _Sending] = {}
        self.queue: deque[tuple[_Sending, int]] = deque()
        self.again: deque[tuple[_Sending, int]] = deque()
        self.abandons: deque[int] = deque()
        self.sent: dict[int, _Sent] = {}
        self.next_packet = 0
        self.sent_floor = 0  # no packet below this one awaits its ack (see _first_sent)
        self.largest_acked = -1
        self.last_eliciting = 0.0
        self.loss_time: float | None = None
        self.probes = 0
        self.probe_count = 0
        self.paused = False
        self.control = CongestionControl(self.datagram_size, config.fast_max_window)
        self.expiry_check = 0.0
        # the soonest expiry of a message that joined the outbox through FastRoad.queued
        self.outbox_expiry = _NEVER
        # fallback: has the peer acknowledged any fast datagram under the current keys?
        self.answered = False
        self.unanswered_since: float | None = None
        # receiving
        self.peer_stream: int | None = None
        self.floor = 1
        self.delivered: set[int] = set()
        self.partials: dict[int, _Partial] = {}
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.ack_pending = 0
        self.ack_due: float | None = None

    # -- keys ------------------------------------------------------------------------
    def rekey(self) -> None:
        """New session keys from the allow just completed; unacked data goes again."""
        remote = self.remote
        box, peer = remote.session_box, remote.short_peer
        if box is None or peer is None:
            return
        mine, theirs = remote.short_private.public_key.raw, peer.raw
        self.send_key = AeadKey(box.derive(_CONTEXT + mine + theirs))
        self.receive_key = AeadKey(box.derive(_CONTEXT + theirs + mine))
        self.key_id = box.derive(_CONTEXT + b"id" + min(mine, theirs) + max(mine, theirs))[0]
        self.keyed = True
        self.sending_ok = False
        self.answered = False
        self.unanswered_since = None
        self._forget_sent()
        self.next_packet = 0
        self.sent_floor = 0
        self.largest_acked = -1
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.ack_pending = 0
        self.ack_due = None

    def _forget_sent(self) -> None:
        """Every datagram in flight is history: its unacked chunks and abandons go again."""
        for _, size, chunks, abandons in self.sent.values():
            self.control.on_forgotten(size)
            self._requeue(chunks, abandons)
        self.sent.clear()
        self.loss_time = None
        self.probe_count = 0
        self.probes = 0

    def _requeue(self, chunks: list[_Carried], abandons: list[int]) -> None:
        for item in chunks:
            sending, index = item if isinstance(item, tuple) else (item, 0)
            if not sending.acked[index] and sending.number in self.messages:
                self.again.append((sending, index))
        self.abandons.extend(abandons)

    # -- sending -----------------------------------------------------------------
    def _oldest(self) -> int:
        """The lowest message number still in flight (next_number when none is).

        A pointer moved forward lazily: ``next(iter(messages))`` would walk
        every entry acknowledged since the dict last resized (microseconds
        per call with thousands in flight).
        """
        messages, oldest, upto = self.messages, self.oldest, self.next_number
        while oldest < upto and oldest not in messages:
            oldest += 1
        self.oldest = oldest
        return oldest

    def _first_sent(self) -> int:
        """The lowest packet number awaiting its ack (next_packet when none does); lazy too."""
        sent, first, upto = self.sent, self.sent_floor, self.next_packet
        while first < upto and first not in sent:
            first += 1
        self.sent_floor = first
        return first

    def _outbox_ready(self) -> bool:
        """Whether a message could leave the outbox now (no side effects)."""
        return bool(self.remote.outbox) and (
            self.next_number - self._oldest() < self.stack.config.fast_messages_in_flight)

    def _packed(self, outgoing: Outgoing) -> tuple[bytes, int] | None:
        """The message's payload and body kind, or None when it expired or cannot be packed."""
        stack = self.stack
        if outgoing.expires <= stack.now:
            stack._expire(self.remote, outgoing, "time to live ran out while queued")
            return None
        body = outgoing.body
        if type(body) is bytes:
            return body, _RAW
        kind = BodyKind.RAW if isinstance(body, bytes | bytearray) else stack.config.body_kind
        try:
            return pack_body(kind, body), int(kind)
        except (LocalProtocolError, PacketError, TypeError, ValueError) as exc:
            stack._expire(self.remote, outgoing, f"cannot be packed: {exc}")
            return None

    def _start(self, outgoing: Outgoing, payload: bytes, kind: int) -> _Sending:
        """Give a message its number and put it in flight (its chunks not yet queued)."""
        sending = _Sending(self.next_number, outgoing, payload, kind, self.chunk_size)
        self.expiry_check = min(self.expiry_check, outgoing.expires) \
            if self.messages else outgoing.expires
        self.messages[self.next_number] = sending
        self.next_number += 1
        return sending

    def _has_data(self) -> bool:
        return bool(self.again or self.queue or self.abandons or self._outbox_ready())

    def can_send_data(self, now: float) -> bool:
        """Whether a data datagram may go now (keys, window, pacing, presence)."""
        if not (self.keyed and self.sending_ok) or self.paused or self.remote.alive is False:
            return False
        if self.probes:
            return self._has_data()
        control = self.control
        return (control.can_send(self.datagram_size) and control.pace_next <= now
                and self._has_data())

    def build(self, now: float) -> bytes | None:
        """One datagram (data, acks or both), or None when nothing may go now."""
        if not (self.ack_pending or self.again or self.queue or self.abandons
                or self.remote.outbox):
            return None  # the common second call of a round: nothing at all to say
        if not self.keyed or self.send_key is None:
            return None
        if self.next_packet >= _REKEY_AT:
            self.road.stack._start_allow(self.remote)
            return None
        data = self.can_send_data(now)
        ack_now = self.ack_pending and (data or (self.ack_due is not None and self.ack_due <= now))
        if not data and not ack_now:
            return None
        parts: list[bytes | memoryview] = []
        room = self.datagram_size - FAST_HEADER_SIZE - AEAD_TAG_SIZE
        if ack_now:
            ranges = self.received.highest_first()
            frame = pack_ack(ranges[:4] if data else ranges)
            parts.append(frame)
            room -= len(frame)
            self.ack_pending = 0
            self.ack_due = None
            self.last_ack = now
        chunks: list[_Carried] = []
        abandons: list[int] = []
        if data:
            self._fill(parts, room, chunks, abandons)
            if not parts:
                return None  # the outbox held only messages that expired or could not be packed
        number = self.next_packet
        self.next_packet += 1
        header = pack_header(self.key_id, self.remote.far_uid, self.stream_id, number)
        sealed = self.send_key.seal(b"".join(parts), counter_nonce(0, number), header)
        datagram = header + sealed
        if chunks or abandons:
            self.sent[number] = (now, len(datagram), chunks, abandons)
            self.control.on_sent(len(datagram), now)
            self.last_eliciting = now
            if self.probes:
                self.probes -= 1
            if not self.answered and self.unanswered_since is None:
                self.unanswered_since = now
        self.stack.stats.fast_datagrams_sent += 1
        return datagram

    def _fill(self, parts: list[bytes | memoryview], room: int, chunks: list[_Carried],
              abandons: list[int]) -> None:
        """Abandons, then resends, then queued chunks, then fresh messages, while they fit."""
        while self.abandons and room >= 9:
            number = self.abandons.popleft()
            abandons.append(number)
            parts.append(pack_abandon(number))
            room -= 9
        again, queue, messages = self.again, self.queue, self.messages
        while True:
            if again:
                source = again
            elif queue:
                source = queue
            else:
                room = self._fill_fresh(parts, room, chunks)
                if not queue:
                    return
                source = queue  # a long message, or one that did not fit what is left
            sending, index = source[0]
            if sending.acked[index] or sending.number not in messages:
                source.popleft()
                continue
            size = sending.frame_size(index)
            if size > room:
                return
            source.popleft()
            parts.extend(sending.frame(index))
            chunks.append((sending, index))
            room -= size

    def _fill_fresh(self, parts: list[bytes | memoryview], room: int,
                    chunks: list[_Carried]) -> int:
        """Messages straight from the outbox into this datagram; the room left.

        The hot path of small messages: each becomes one frame here, never
        queued.  A message longer than one chunk, or one that does not fit
        what is left, goes into the queue (its chunks) and the loop ends.
        """
        outbox = self.remote.outbox
        if not outbox:
            return room
        messages = self.messages
        alone = not messages
        limit = self._oldest() + self.stack.config.fast_messages_in_flight
        chunk_size, number, now = self.chunk_size, self.next_number, self.stack.now
        head, append, track = MESSAGE_HEAD.pack, parts.append, chunks.append
        earliest = _NEVER
        while outbox and number < limit:
            outgoing = outbox.popleft()
            body = outgoing.body
            if type(body) is bytes and outgoing.expires > now:
                payload, kind = body, _RAW
            else:
                packed = self._packed(outgoing)
                if packed is None:
                    continue
                payload, kind = packed
            size = len(payload)
            if size > chunk_size or FRAME_MESSAGE_SIZE + size > room:
                self.next_number = number
                self._note_expiry(earliest, alone)
                sending = self._start(outgoing, payload, kind)
                self.queue.extend((sending, index) for index in range(sending.chunks))
                return room
            sending = _Sending(number, outgoing, payload, kind, chunk_size)
            messages[number] = sending
            append(head(MESSAGE_KIND, number, size, 0, 1, kind, size))
            append(payload)
            track(sending)
            room -= FRAME_MESSAGE_SIZE + size
            number += 1
            expires = outgoing.expires  # (not min(): a call costs ten times the comparison)
            earliest = expires if expires < earliest else earliest
        self.next_number = number
        self._note_expiry(earliest, alone)
        return room

    def _note_expiry(self, earliest: float, alone: bool) -> None:
        """Messages just put in flight expire at ``earliest`` at the soonest.

        ``alone``: none was in flight before them (the old check means nothing).
        """
        if earliest != _NEVER:
            self.expiry_check = earliest if alone else min(self.expiry_check, earliest)

    # -- receiving ----------------------------------------------------------------
    def receive(self, data: bytes, header_stream: int, number: int, now: float) -> None:
        """An authenticated-to-be datagram for this link (header already parsed)."""
        stack = self.stack
        if not self.replay.fresh(number):
            stack.stats.drop(Drop.REPLAYED)
            return
        assert self.receive_key is not None  # noqa: S101 - keyed links have keys
        try:
            plain = self.receive_key.open(data[FAST_HEADER_SIZE:], counter_nonce(0, number),
                                          data[:FAST_HEADER_SIZE])
        except CryptoError:
            stack.stats.drop(Drop.BAD_COAT)
            return
        try:
            messages, ranges, abandons = read_frames(plain)
        except PacketError:
            stack.stats.drop(Drop.MALFORMED)
            return
        self.replay.mark(number)
        self.received.add(number)
        self.sending_ok = True
        if self.peer_stream != header_stream:
            self._new_peer_stream(header_stream)
        if messages:
            self._take(messages)
        if ranges:
            self._on_ack(ranges, now)
        for abandoned in abandons:
            self._abandoned(abandoned)
        if messages or abandons:
            self._ack_later(len(data) < self.short_datagram, now)
        self._heard(now)

    def _ack_later(self, short: bool, now: float) -> None:
        """An ack-eliciting datagram arrived: when its ack is due.

        Every second one at once; a short one (a sender with more to say fills
        its datagrams, so it is a burst's tail or a lone message) at once too,
        but at most one such ack per _SHORT_ACK_SPACING, so a stream of short
        datagrams keeps the every-second cadence; any other after the delay.
        """
        self.ack_pending += 1
        if self.ack_pending >= 2:
            self.ack_due = now
            return
        due = self.ack_due if self.ack_due is not None else now + self.ack_delay
        if short:
            due = min(due, max(now, self.last_ack + _SHORT_ACK_SPACING))
        self.ack_due = due

    def _heard(self, now: float) -> None:
        """An authenticated datagram is proof of presence (no RAET alive needed meanwhile)."""
        stack, remote = self.stack, self.remote
        if remote.alive is not True or self.paused:
            stack._presence(remote, alive=True)
            return
        config = stack.config
        remote.presence_due = now + config.period + (0.0 if stack.local.main else config.offset)
        remote.reap_due = now + config.reap_interval

    def _new_peer_stream(self, stream: int) -> None:
        if self.peer_stream is not None:
            log.debug("%s: %s restarted its fast stream", self.stack.name, self.remote.name)
        self.peer_stream = stream
        self.floor = 1
        self.delivered.clear()
        self.partials.clear()

    def _done(self, number: int) -> bool:
        return number < self.floor or number in self.delivered

    def _mark_done(self, number: int) -> None:
        self.partials.pop(number, None)
        if number != self.floor:
            self.delivered.add(number)
            return
        self.floor += 1
        delivered = self.delivered
        while self.floor in delivered:
            delivered.discard(self.floor)
            self.floor += 1

    def _take(self, messages: list[MessageFields]) -> None:
        """A datagram's message frames: one-chunk messages inline, their events in one batch."""
        stack = self.stack
        made: list[events.Event] = []
        delivered, partials = self.delivered, self.partials
        name, session = self.remote.name, self.remote.remote_session_id
        received = message_received
        for fields in messages:
            number, total, _, chunks, body_kind, data = fields
            if chunks != 1:
                event = self._chunk(fields)
                if event is not None:
                    made.append(event)
                continue
            if number < self.floor or number in delivered or len(data) != total:
                stack.stats.drop(Drop.MALFORMED if len(data) != total and not self._done(number)
                                 else Drop.DUPLICATE)
                continue
            if partials:
                partials.pop(number, None)
            if number == self.floor:  # done: the floor rises past every number done already
                floor = number + 1
                while floor in delivered:
                    delivered.discard(floor)
                    floor += 1
                self.floor = floor
            else:
                delivered.add(number)
            if body_kind == _RAW:
                body: Any = data if type(data) is bytes else bytes(data)
            else:
                body = self._body(body_kind, bytes(data))
                if body is None:
                    continue
            made.append(received(name, body, session, number & 0xFFFFFFFF, 1))
        if made:
            stack.stats.messages_received += len(made)
            stack._emit_all(made)

    def _chunk(self, fields: MessageFields) -> events.MessageReceived | None:
        """One chunk of a long message; its event when it completes the message."""
        number, total, index, chunks, body_kind, data = fields
        if number < self.floor or number in self.delivered:
            self.stack.stats.drop(Drop.DUPLICATE)
            return None
        partial = self.partials.get(number)
        if partial is None:
            partial = self.partials[number] = _Partial(total, chunks)
        if partial.chunks != chunks or partial.total != total:
            self.stack.stats.drop(Drop.MALFORMED)
            return None
        if index in partial.pieces:
            self.stack.stats.drop(Drop.DUPLICATE)
            return None
        partial.pieces[index] = data
        if len(partial.pieces) < partial.chunks:
            return None
        pieces = partial.pieces
        whole = b"".join(pieces[i] for i in range(partial.chunks))
        self._mark_done(number)
        if len(whole) != partial.total:
            self.stack.stats.drop(Drop.MALFORMED)
            return None
        body = self._body(body_kind, whole)
        if body is None:
            return None
        return events.MessageReceived(self.remote.name, body, self.remote.remote_session_id,
                                      number & 0xFFFFFFFF, partial.chunks)

    def _body(self, body_kind: int, payload: bytes) -> Any:
        """The message a payload carries; None (dropped, counted) when it does not parse."""
        kind = _BODY_KINDS.get(body_kind)
        try:
            if kind is None:
                raise PacketError("bad-body", f"unknown body kind {body_kind}")
            return parse_body(kind, payload)
        except PacketError:
            self.stack.stats.drop(Drop.BAD_BODY)
            return None

    def _abandoned(self, number: int) -> None:
        if not self._done(number) and number < self.floor + (1 << 32):
            self._mark_done(number)

    def _on_ack(self, ranges: list[tuple[int, int]], now: float) -> None:
        sent = self.sent
        largest = ranges[0][1]
        if largest >= self.next_packet:
            self.stack.stats.drop(Drop.INVALID_BODY)
            return
        self.answered = True
        self.unanswered_since = None
        control = self.control
        newest: _Sent | None = None
        done: list[_Sending] = []
        for first, last in ranges:
            if not sent:
                break
            low = max(first, self._first_sent())
            if last < low:
                continue
            numbers: Any = range(low, last + 1) if last - low < len(sent) else \
                [n for n in sent if low <= n <= last]
            for number in numbers:
                packet = sent.pop(number, None)
                if packet is None:
                    continue
                if number == largest:
                    newest = packet
                sent_at, size, chunks, _ = packet
                control.on_acked(size, sent_at)
                self._settle(chunks, done)
        if done:
            stack = self.stack
            stack.stats.messages_sent += len(done)
            name, sent_event = self.remote.name, message_sent
            stack._emit_all([sent_event(name, sending.outgoing.message_id) for sending in done])
        self.largest_acked = max(self.largest_acked, largest)
        if newest is not None:
            control.sample(now - newest[0])
            self.probe_count = 0
            self.probes = 0
        self._detect_losses(now)

    def _settle(self, chunks: list[_Carried], done: list[_Sending]) -> None:
        """Mark the chunks an acked datagram carried; messages now whole go to ``done``."""
        messages = self.messages
        for item in chunks:
            if not isinstance(item, tuple):  # a one-chunk message: done when acked
                if messages.pop(item.number, None) is not None:
                    done.append(item)
                continue
            sending, index = item
            if sending.chunks == 1:  # one sent again (from the again queue)
                if messages.pop(sending.number, None) is not None:
                    done.append(sending)
                continue
            acked = sending.acked
            if acked[index]:
                continue
            acked[index] = 1  # type: ignore[index]
            sending.acked_count += 1
            if (sending.acked_count == sending.chunks
                    and messages.pop(sending.number, None) is not None):
                done.append(sending)

    def _detect_losses(self, now: float) -> None:
        self.loss_time = None
        sent = self.sent
        if not sent:
            return
        control = self.control
        delay = control.loss_delay(control.smoothed_rtt)
        largest = self.largest_acked
        lost: list[int] = []
        number = self._first_sent()
        while number <= largest:
            packet = sent.get(number)
            number += 1
            if packet is None:
                continue  # acknowledged out of order
            # packet[0] + delay is the loss time this method sets: compare that same sum
            if number <= largest - 2 or packet[0] + delay <= now:
                lost.append(number - 1)
            else:
                self.loss_time = packet[0] + delay
                break
        for number in lost:
            sent_at, size, chunks, abandons = sent.pop(number)
            control.on_lost(size, sent_at, now)
            self._requeue(chunks, abandons)
            self.stack.stats.fast_datagrams_lost += 1

    # -- time ---------------------------------------------------------------------
    def probe_deadline(self) -> float | None:
        if not self.sent or self.paused:
            return None
        backoff = float(1 << min(self.probe_count, 16))
        interval = min(self.control.probe_timeout(self.ack_delay) * backoff, _MAX_PROBE_INTERVAL)
        return self.last_eliciting + interval

    def deadline(self, now: float) -> float | None:
        """The next moment this link wants ``handle_timer`` (or to send)."""
        earliest = self.ack_due if self.ack_pending else None
        if self.loss_time is not None and (earliest is None or self.loss_time < earliest):
            earliest = self.loss_time
        if self.sent:
            probe = self.probe_deadline()
            if probe is not None and (earliest is None or probe < earliest):
                earliest = probe
            if not self.answered:
                fallback = self.fallback_deadline()
                if fallback is not None and (earliest is None or fallback < earliest):
                    earliest = fallback
        if self.messages and (earliest is None or self.expiry_check < earliest):
            earliest = self.expiry_check
        if self.remote.outbox and (earliest is None or self.outbox_expiry < earliest):
            earliest = self.outbox_expiry
        # The same conditions as can_send_data, or the loop spins at one instant.
        if ((self.again or self.queue or self.abandons or self._outbox_ready())
                and self.keyed and self.sending_ok and not self.paused
                and self.remote.alive is not False
                and (self.probes or self.control.can_send(self.datagram_size))):
            send = now if self.probes else max(self.control.pace_next, now)
            if earliest is None or send < earliest:
                earliest = send
        return earliest

    def fallback_deadline(self) -> float | None:
        """When to give fast mode up if the peer still has not acknowledged anything."""
        after = self.stack.config.fast_fallback_after
        if self.answered or self.unanswered_since is None or after <= 0:
            return None
        return self.unanswered_since + after

    def handle_timer(self, now: float) -> None:
        """Losses by time, probe timeouts, fallback and expiries."""
        fallback = self.fallback_deadline()
        if fallback is not None and fallback <= now:
            self.road.fall_back(self, f"no fast datagram acknowledged in "
                                      f"{self.stack.config.fast_fallback_after:g} s")
            return
        if self.loss_time is not None and self.loss_time <= now:
            self._detect_losses(now)
        probe = self.probe_deadline()
        if probe is not None and probe <= now:
            self._probe_timeout(now)
            if self.road.links.get(self.remote.uid) is not self:
                return  # fell back to RAET mode
        if self.messages and self.expiry_check <= now:
            self._expire_in_flight(now)
        if self.outbox_expiry <= now:
            self._expire_queued(now)

    def _probe_timeout(self, now: float) -> None:
        self.probe_count += 1
        limit = self.stack.config.fast_fallback_probes
        if not self.answered and 0 < limit <= self.probe_count:
            self.road.fall_back(self, f"{self.probe_count} fast-mode probes unanswered")
            return
        if self.probe_count > self.stack.config.max_redos:
            self.pause()
            self.stack._presence(self.remote, alive=False,
                                 reason="fast-mode datagrams not acknowledged")
            return
        if self.probe_count >= 3:
            self.control.collapse()
        # the oldest datagram goes again (as if lost, without a window cut) plus one more
        _, size, chunks, abandons = self.sent.pop(self._first_sent())
        self.control.on_forgotten(size)
        self._requeue(chunks, abandons)
        self.probes = 2
        self.last_eliciting = now

    def _expire_in_flight(self, now: float) -> None:
        upcoming = float("inf")
        for number, sending in list(self.messages.items()):
            expires = sending.outgoing.expires
            if expires <= now:
                del self.messages[number]
                self.abandons.append(number)
                self.stack._expire(self.remote, sending.outgoing,
                                   "time to live ran out in flight")
            else:
                upcoming = min(upcoming, expires)
        self.expiry_check = upcoming

    def _expire_queued(self, now: float) -> None:
        """Give back the outbox's messages whose time to live ran out; watch the rest."""
        remote, stack = self.remote, self.stack
        upcoming = _NEVER
        if any(outgoing.expires <= now for outgoing in remote.outbox):
            keep: deque[Outgoing] = deque()
            for outgoing in remote.outbox:
                if outgoing.expires <= now:
                    stack._expire(remote, outgoing, "time to live ran out while queued")
                else:
                    keep.append(outgoing)
            remote.outbox = keep
        for outgoing in remote.outbox:
            upcoming = min(upcoming, outgoing.expires)
        self.outbox_expiry = upcoming

    def pause(self) -> None:
        """The remote is dead: stop sending; everything in flight goes again on resume."""
        self.paused = True
        self._forget_sent()

    def resume(self) -> None:
        """The remote answers again."""
        if self.paused:
            self.paused = False
            self.probe_count = 0
            self.control.collapse()

    def take_back(self) -> list[Outgoing]:
        """Every message in the stream, in order, and the stream emptied (fallback)."""
        taken = [sending.outgoing for sending in self.messages.values()]
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
        self.abandons.clear()
        for _, size, _, _ in self.sent.values():
            self.control.on_forgotten(size)
        self.sent.clear()
        return taken

    def give_back(self, reason: str) -> None:
        """Return every message in the stream as MessageExpired (close, removal)."""
        for sending in self.messages.values():
            self.stack._expire(self.remote, sending.outgoing, reason)
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
        self.sent.clear()


class FastRoad:
    """The stack's fast-mode links, one per remote that negotiated it."""

    def __init__(self, stack: RoadStack) -> None:
        self.stack = stack
        self.links: dict[int, FastLink] = {}
        self._turn = 0
        self.fallen_back: dict[int, str] = {}  # uid -> why, until the next allow

    def join_extras(self) -> dict[str, Any]:
        """What our join bodies advertise."""
        return {CAPABILITY: FAST_VERSION} if self.stack.config.fast else {}

    def negotiated(self, remote: Remote) -> bool:
        """Whether both sides advertised fast mode."""
        return self.stack.config.fast and CAPABILITY in remote.capabilities

    def session_started(self, remote: Remote) -> None:
        """An allow completed its key exchange: (re)key the remote's link.

        A remote we fell back from gets a fresh try (the path or its build may
        have changed); the fallback repeats if it still does not answer.
        """
        self.fallen_back.pop(remote.uid, None)
        if not self.negotiated(remote):
            link = self.links.pop(remote.uid, None)
            if link is not None:
                link.give_back("the remote no longer speaks fast mode")
                self._release(remote)
            return
        link = self.links.get(remote.uid)
        if link is None:
            link = self.links[remote.uid] = FastLink(self, remote)
        link.rekey()

    def allowed(self, remote: Remote) -> None:
        """The allow finished on our side: the link may send."""
        link = self.links.get(remote.uid)
        if link is not None and link.keyed:
            link.sending_ok = True

    def takes(self, remote: Remote) -> bool:
        """Whether messages to ``remote`` go by fast mode (the link pulls from the outbox)."""
        link = self.links.get(remote.uid)
        if link is None or not link.keyed:
            return False
        if remote.alive is not False:
            link.resume()
        return True

    def queued(self, remote: Remote, expires: float) -> bool:
        """A message joined ``remote``'s outbox: True when its fast link takes it.

        The link then pulls it as its window opens and watches its time to
        live (the stack puts no timer on its heap for it); False leaves the
        message to the stack (RAET mode, or a remote not allowed or not alive).
        """
        link = self.links.get(remote.uid)
        if (link is None or not link.keyed or not remote.allowed or remote.session_box is None
                or remote.alive is False):
            return False
        if link.paused:
            link.resume()
        soonest = link.outbox_expiry
        link.outbox_expiry = expires if expires < soonest else soonest  # (cheaper than min())
        return True

    def _release(self, remote: Remote) -> None:
        """A link is gone: the stack watches every queued message's time to live again."""
        if remote.outbox:
            self.stack._watch_expiry(remote, min(outgoing.expires for outgoing in remote.outbox))

    def receive(self, data: bytes, now: float) -> None:
        """One fast datagram; garbage is dropped and counted."""
        stack = self.stack
        try:
            _, key_id, destination, stream, number = read_header(data)
        except PacketError:
            stack.stats.drop(Drop.MALFORMED)
            return
        link = self.links.get(destination)
        if link is None or not link.keyed:
            stack.stats.drop(Drop.UNKNOWN_REMOTE)
            return
        if key_id != link.key_id:
            stack.stats.drop(Drop.STALE_KEY)
            return
        link.receive(data, stream, number, now)

    def datagrams(self, now: float) -> list[tuple[bytes, Address]]:
        """Datagrams from every link, one per link per round (fair sharing)."""
        out: list[tuple[bytes, Address]] = []
        if len(self.links) == 1:
            link = next(iter(self.links.values()))
            while (datagram := link.build(now)) is not None:
                out.append((datagram, link.remote.host_address))
            return out
        links = list(self.links.values())
        if not links:
            return out
        self._turn = (self._turn + 1) % len(links)
        active = links[self._turn:] + links[:self._turn]
        while active:
            still: list[FastLink] = []
            for link in active:
                datagram = link.build(now)
                if datagram is not None:
                    out.append((datagram, link.remote.host_address))
                    still.append(link)
            active = still
        return out

    def deadline(self, now: float) -> float | None:
        """The earliest deadline of any link."""
        if len(self.links) == 1:
            return next(iter(self.links.values())).deadline(now)
        times = [t for link in self.links.values() if (t := link.deadline(now)) is not None]
        return min(times) if times else None

    def handle_timer(self, now: float) -> None:
        """Let every link's timers fire."""
        for link in list(self.links.values()):
            link.handle_timer(now)

    def fall_back(self, link: FastLink, reason: str) -> None:
        """The remote never acknowledged fast mode: its messages go in RAET mode, none lost.

        Unacknowledged messages go back into the outbox in transmit order and
        RAET message transactions carry them (``stats.fast_fallbacks``,
        ``FastModeFallback``).  If the peer did receive some of them (only its
        acks were lost) those arrive twice: at least once, never lost.
        """
        remote, stack = link.remote, self.stack
        if self.links.get(remote.uid) is not link:
            return
        del self.links[remote.uid]
        self.fallen_back[remote.uid] = reason
        waiting = []
        for outgoing in link.take_back():  # all older than anything still in the outbox
            if outgoing.expires <= stack.now:
                stack._expire(remote, outgoing, "time to live ran out in flight")
            else:
                waiting.append(outgoing)
        remote.outbox.extendleft(reversed(waiting))
        stack._schedule(remote)
        self._release(remote)
        stack.stats.fast_fallbacks += 1
        log.warning("%s: falling back to RAET mode with %s: %s", stack.name, remote.name, reason)
        stack._emit(events.FastModeFallback(remote.name, reason))
        stack._pump(remote)

    def remove(self, remote: Remote, reason: str) -> None:
        """The remote is gone: its stream's messages come back."""
        link = self.links.pop(remote.uid, None)
        if link is not None:
            link.give_back(f"remote removed: {reason}")

    def close(self) -> None:
        """The stack closes: every message in every stream comes back."""
        for link in self.links.values():
            link.give_back("stack closed")
