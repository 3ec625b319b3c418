"""Fast mode, sending: our stream of messages to one remote, numbered and cut into chunks.

:class:`SendStream` owns the messages in flight until the peer has every
chunk of them, and fills the data part of each datagram the link builds:
abandons, chunks to send again, queued chunks, then fresh messages straight
from the remote's outbox, in that order.  When a datagram may go (window,
pacing, keys) is the link's business (road/_fast_link.py); which datagrams
were lost is recovery's (road/_fast_recovery.py), which hands their chunks
back here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from raetlike.crypto import random_bytes
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire.body import pack_body
from raetlike.wire.kinds import BodyKind
from road._fast_wire import (
    FRAME_MESSAGE_SIZE,
    MESSAGE_HEAD,
    MESSAGE_KIND,
    pack_abandon,
    pack_message_head,
)

if TYPE_CHECKING:
    from road.config import RoadConfig
    from road.remote import Outgoing, Remote

__all__ = ["NEVER", "Carried", "SendStream", "Sending"]

NEVER = float("inf")
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


class SendStream:
    """Our messages to one remote: numbered, in flight until every chunk is acknowledged.

    ``expire(outgoing, reason)`` gives a message back as expired (the stack's
    MessageExpired); the stream never sees the stack.
    """

    __slots__ = ("abandons", "again", "chunk_size", "config", "expire", "expiry_check",
                 "messages", "next_number", "oldest", "outbox_expiry", "queue", "remote",
                 "stream_id")

    def __init__(self, remote: Remote, chunk_size: int, config: RoadConfig,
                 expire: Callable[[Outgoing, str], None]) -> None:
        self.remote = remote  # fresh messages come from its outbox
        self.chunk_size = chunk_size
        # read at each use: fast_messages_in_flight (the bound on message numbers in
        # flight) and body_kind (how a mapping is packed)
        self.config = config
        self.expire = expire
        self.stream_id = int.from_bytes(random_bytes(4), "big")
        self.next_number = 1
        self.oldest = 1  # no message below this one is in flight (see oldest_in_flight)
        self.messages: dict[int, Sending] = {}
        self.queue: deque[tuple[Sending, int]] = deque()  # chunks of long messages, in order
        self.again: deque[tuple[Sending, int]] = deque()  # chunks of lost datagrams
        self.abandons: deque[int] = deque()  # numbers of messages given up, to tell the peer
        self.expiry_check = 0.0  # no message in flight expires before this (while any is)
        # the soonest expiry of a message that joined the outbox (see FastRoad.queued)
        self.outbox_expiry = NEVER

    def oldest_in_flight(self) -> int:
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

    def outbox_ready(self) -> bool:
        """Whether a message could leave the outbox now (no side effects)."""
        return bool(self.remote.outbox) and (
            self.next_number - self.oldest_in_flight() < self.config.fast_messages_in_flight)

    def has_data(self) -> bool:
        """Whether anything waits to go: abandons, chunks again or queued, or fresh messages."""
        return bool(self.again or self.queue or self.abandons or self.outbox_ready())

    def watch(self, expires: float) -> None:
        """A message that expires at ``expires`` joined the outbox."""
        soonest = self.outbox_expiry
        self.outbox_expiry = expires if expires < soonest else soonest  # (cheaper than min())

    # -- filling a datagram ----------------------------------------------------------
    def fill(self, parts: list[bytes | memoryview], room: int, chunks: list[Carried],
             abandons: list[int], now: float) -> None:
        """Abandons, then resends, then queued chunks, then fresh messages, while they fit.

        Frames go into ``parts``; what the datagram carries into ``chunks``
        and ``abandons`` (recovery keeps them until it is acked or lost).
        """
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
                room = self._fill_fresh(parts, room, chunks, now)
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

    def _fill_fresh(self, parts: list[bytes | memoryview], room: int, chunks: list[Carried],
                    now: float) -> int:
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
        limit = self.oldest_in_flight() + self.config.fast_messages_in_flight
        chunk_size, number = self.chunk_size, self.next_number
        head, append, track = MESSAGE_HEAD.pack, parts.append, chunks.append
        earliest = NEVER
        while outbox and number < limit:
            outgoing = outbox.popleft()
            body = outgoing.body
            if type(body) is bytes and outgoing.expires > now:
                payload, kind = body, _RAW
            else:
                packed = self._packed(outgoing, now)
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

    def _packed(self, outgoing: Outgoing, now: float) -> tuple[bytes, int] | None:
        """The message's payload and body kind, or None when it expired or cannot be packed."""
        if outgoing.expires <= now:
            self.expire(outgoing, "time to live ran out while queued")
            return None
        body = outgoing.body
        if type(body) is bytes:
            return body, _RAW
        kind = BodyKind.RAW if isinstance(body, bytes | bytearray) else self.config.body_kind
        try:
            return pack_body(kind, body), int(kind)
        except (LocalProtocolError, PacketError, TypeError, ValueError) as exc:
            self.expire(outgoing, f"cannot be packed: {exc}")
            return None

    def _start(self, outgoing: Outgoing, payload: bytes, kind: int) -> Sending:
        """Give a message its number and put it in flight (its chunks not yet queued)."""
        sending = Sending(self.next_number, outgoing, payload, kind, self.chunk_size)
        self.expiry_check = min(self.expiry_check, outgoing.expires) \
            if self.messages else outgoing.expires
        self.messages[self.next_number] = sending
        self.next_number += 1
        return sending

    def _note_expiry(self, earliest: float, alone: bool) -> None:
        """Messages just put in flight expire at ``earliest`` at the soonest.

        ``alone``: none was in flight before them (the old check means nothing).
        """
        if earliest != NEVER:
            self.expiry_check = earliest if alone else min(self.expiry_check, earliest)

    # -- what became of the datagrams ------------------------------------------------
    def settle(self, chunks: list[Carried], done: list[Sending]) -> None:
        """An acked datagram carried ``chunks``: messages now whole go to ``done``."""
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

    def requeue(self, chunks: list[Carried], abandons: list[int]) -> None:
        """A lost or forgotten datagram's unacked chunks and abandons go again."""
        messages, again = self.messages, self.again
        for item in chunks:
            sending, index = item if isinstance(item, tuple) else (item, 0)
            if not sending.acked[index] and sending.number in messages:
                again.append((sending, index))
        self.abandons.extend(abandons)

    def expire_in_flight(self, now: float) -> None:
        """Give up the messages in flight whose time to live ran out (the peer is told)."""
        upcoming = NEVER
        for number, sending in list(self.messages.items()):
            expires = sending.outgoing.expires
            if expires <= now:
                del self.messages[number]
                self.abandons.append(number)
                self.expire(sending.outgoing, "time to live ran out in flight")
            else:
                upcoming = min(upcoming, expires)
        self.expiry_check = upcoming

    def take_back(self) -> list[Outgoing]:
        """Every message in the stream, in order, and the stream emptied (fallback)."""
        taken = [sending.outgoing for sending in self.messages.values()]
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
        self.abandons.clear()
        return taken

    def give_back(self, reason: str) -> None:
        """Every message in the stream given back as expired (close, removal).

        Abandons still waiting stay: a closing stack may yet tell the peer.
        """
        for sending in self.messages.values():
            self.expire(sending.outgoing, reason)
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
