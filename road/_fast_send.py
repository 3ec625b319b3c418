"""Fast mode, sending: the records of messages in flight and the building of datagrams.

:class:`SendingSide` fills each datagram with an ack (when one is due),
abandons, chunks to send again, queued chunks and fresh messages straight
from the remote's outbox, in that order, within the window and the pacing
of :class:`~road._fast_control.CongestionControl`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raetlike.crypto import AEAD_TAG_SIZE, counter_nonce
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.body import pack_body
from raetlike.wire.kinds import BodyKind
from road._fast_state import NEVER, LinkState
from road._fast_wire import (
    FAST_HEADER_SIZE,
    FRAME_MESSAGE_SIZE,
    MESSAGE_HEAD,
    MESSAGE_KIND,
    pack_abandon,
    pack_ack,
    pack_header,
    pack_message_head,
)

if TYPE_CHECKING:
    from road.remote import Outgoing

__all__ = ["Carried", "Sending", "SendingSide", "Sent"]

_REKEY_AT = 1 << 62  # packet numbers: ask for a new allow long before 2**64
_RAW = int(BodyKind.RAW)


class Sending:
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



_NOT_ACKED = bytes(1)  # the acked flags of every one-chunk message (never written)

# a chunk a datagram carried: a one-chunk message as itself, others as (message, chunk index)
Carried = Sending | tuple[Sending, int]
# a datagram awaiting its ack: (sent at, size, chunks it carried, abandons it carried)
Sent = tuple[float, int, list[Carried], list[int]]


class SendingSide(LinkState):
    """The link's datagrams out: what may go now, and what each one carries."""

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

    def _start(self, outgoing: Outgoing, payload: bytes, kind: int) -> Sending:
        """Give a message its number and put it in flight (its chunks not yet queued)."""
        sending = Sending(self.next_number, outgoing, payload, kind, self.chunk_size)
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
        chunks: list[Carried] = []
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

    def _fill(self, parts: list[bytes | memoryview], room: int, chunks: list[Carried],
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
                    chunks: list[Carried]) -> int:
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
        earliest = NEVER
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
            sending = Sending(number, outgoing, payload, kind, chunk_size)
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
        if earliest != NEVER:
            self.expiry_check = earliest if alone else min(self.expiry_check, earliest)
