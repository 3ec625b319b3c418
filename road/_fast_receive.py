"""Fast mode, receiving: datagrams opened, messages reassembled and delivered, acks owed.

:class:`ReceivingSide` checks the replay window, opens the AEAD, delivers
one-chunk messages inline (their events in one batch), reassembles long ones,
hands ack frames to road/_fast_recovery.py and decides when our ack is due.
"""

from __future__ import annotations

import logging
from typing import Any

from raetlike.crypto import counter_nonce
from raetlike.errors import CryptoError, PacketError
from raetlike.wire.body import parse_body
from raetlike.wire.kinds import BodyKind
from road import events
from road._fast_events import message_received
from road._fast_state import LinkState
from road._fast_wire import FAST_HEADER_SIZE, MessageFields, read_frames
from road.stats import Drop

__all__ = ["Partial", "ReceivingSide"]

log = logging.getLogger(__name__)

_BODY_KINDS = {int(kind): kind for kind in BodyKind}
_RAW = int(BodyKind.RAW)
_SHORT_ACK_SPACING = 0.001  # at most one early ack for short datagrams per millisecond


class Partial:
    """Chunks of one message still arriving."""

    __slots__ = ("chunks", "pieces", "total")

    def __init__(self, total: int, chunks: int) -> None:
        self.total = total
        self.chunks = chunks
        self.pieces: dict[int, bytes | memoryview] = {}


class ReceivingSide(LinkState):
    """The link's datagrams in: the peer's stream, delivered in any order, each message once."""

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
            partial = self.partials[number] = Partial(total, chunks)
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
