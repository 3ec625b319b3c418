"""Message (tk 0): segmented, acknowledged, encrypted messages.

The sender (Messenger) sends bursts of segments, the last of each burst with
the wait flag; the receiver (Messengent) answers a wait with ack (the highest
segment seen) or resend (the missing ones, at most 64 per packet), and a
complete message with done.  Bursts are bounded by the remote's window, so a
10 MB message never floods the socket buffers.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

from raetlike.dedup import BitWindow
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from raetlike.wire.body import coat as coat_body
from raetlike.wire.body import pack_body, parse_body, uncoat
from raetlike.wire.head import build_head
from raetlike.wire.kinds import BodyKind, CoatKind, Flag, FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet
from raetlike.wire.segment import Reassembly
from raetlike.wire.template import PacketTemplate
from road._transaction import Rule, Transaction
from road.stats import Drop

if TYPE_CHECKING:
    from road._host import MessageHost
    from road.config import RoadConfig
    from road.remote import Address, Outgoing, Remote
    from road.stats import RoadStats

__all__ = ["BURSTS_IN_FLIGHT", "MAX_MISSEDS_PER_ANSWER", "MAX_MISSEDS_PER_PACKET", "Messengent",
           "Messenger", "Partials"]

log = logging.getLogger(__name__)

MAX_MISSEDS_PER_PACKET = 64
MAX_MISSEDS_PER_ANSWER = 2 * MAX_MISSEDS_PER_PACKET
"""Segments one answer to a wait asks for at most (the lowest missing ones); the sender's
window (128 segments) bounds what can be in flight anyway."""
BURSTS_IN_FLIGHT = 2
"""Bursts a messenger sends before the first is answered (1 is RAET's stop-and-wait)."""

# Flags as plain ints on the per-packet path (enum flag operations cost microseconds).
_WAIT = int(Flag.WAIT)
_AGAIN = int(Flag.AGAIN)
_SEGMENTED = int(Flag.SEGMENTED)
_PER_PACKET = _WAIT | _AGAIN
_CORRESPONDENT = int(Flag.CORRESPONDENT)
_FLAGS = tuple(Flag(value) for value in range(256))


class Messenger(Transaction):
    """We send one message."""

    stack: MessageHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.MESSAGE
    timeout: ClassVar[float] = 0.0  # the message's own time to live bounds it instead
    redo_min: ClassVar[float] = 0.2
    redo_max: ClassVar[float] = 0.5

    class States(enum.Enum):
        SENDING = "sending"

    def __init__(self, stack: MessageHost, remote: Remote, outgoing: Outgoing) -> None:
        begun = outgoing.begun
        resumed = begun is not None and begun[0] == remote.session_id
        super().__init__(
            stack, remote, correspondent=False, session_id=remote.session_id,
            transaction_id=begun[1] if resumed and begun else remote.next_transaction_id(),
        )
        self.resumed = begun if resumed else None
        """The send this one takes up again (same transaction id and coat), if any."""
        outgoing.begun = None  # taken up now, or of another session: never again
        self.outgoing = outgoing
        self.packets: PacketTemplate | None = None  # packs each segment (set by start)
        self.coat = b""  # the whole coated message
        self.segmented = False
        self.count = 0  # how many segments
        self.chunk_size = 0  # coat bytes per segment
        self.flags = 0  # the flags every segment carries (SEGMENTED or none)
        self.current = 0  # next segment of the normal flow
        self.misseds: dict[int, None] = {}  # ordered set of segments to resend
        self.acked = False
        self.outstanding = 0  # segments sent and not yet answered
        self.bursts: deque[int] = deque()  # sizes of the bursts sent and not yet answered
        self.burst_times: deque[float | None] = deque()  # when each was sent (None: a resend)
        self.redos_unanswered = 0
        # the first redo waits for what answers from this remote have taken lately
        self.redo_interval = remote.round_trip.timeout(self.redo_min, self.redo_max)
        self.launch = 0  # its place in the remote's start order (the stack sets it)

    def initial_state(self) -> enum.Enum:
        return self.States.SENDING

    def start(self) -> bool:
        """Serialize, coat and segment the message; False when it cannot be packed."""
        config, remote = self.stack.config, self.remote
        body = self.outgoing.body
        body_kind = BodyKind.RAW if isinstance(body, bytes | bytearray) else config.body_kind
        try:
            if self.resumed is not None:
                payload = self.resumed[2]  # the very bytes the receiver may hold already
            else:
                payload = pack_body(body_kind, body)
                if payload:
                    assert remote.session_box is not None  # noqa: S101 - allowed remotes have one
                    payload = coat_body(payload, remote.session_box)
            template = self.head(
                PacketKind.MESSAGE, body_kind=body_kind, coat_kind=CoatKind.NACL,
                foot_kind=FootKind.NACL,
            )
            self.packets = PacketTemplate(template, self.stack.local.signing_key)
            self.segmented, self.count, self.chunk_size = self.packets.plan(len(payload))
            self.coat = payload
            self.flags = (int(template.flags) & ~_PER_PACKET
                          | (_SEGMENTED if self.segmented else 0))
        except (PacketError, LocalProtocolError, CryptoError, TypeError, ValueError) as exc:
            stats = self.stack.stats
            stats.messages_unpackable += 1
            log.log(logging.WARNING if stats.messages_unpackable % 1000 == 1 else logging.DEBUG,
                    "%s: cannot send message %d to %s (%d so far): %s", self.stack.name,
                    self.outgoing.message_id, remote.name, stats.messages_unpackable, exc)
            self.stack._expire(remote, self.outgoing, f"cannot be packed: {exc}")
            return False
        self.register((False, remote.uid, remote.far_uid, self.session_id,
                       self.transaction_id, False))
        self.pump()
        return True

    # -- sending ----------------------------------------------------------------

    def _packet(self, number: int, flags: int) -> bytes:
        """Segment ``number`` with ``flags`` (WAIT, AGAIN) added to the message's own."""
        assert self.packets is not None  # noqa: S101 - start() made it
        if not self.segmented:
            return self.packets.pack(self.coat, self.flags | flags)
        size = self.chunk_size
        chunk = self.coat[number * size:(number + 1) * size]
        return self.packets.pack(chunk, self.flags | flags, number, self.count, len(self.coat))

    def _transmit(self, numbers: list[int], again: bool) -> None:
        if not numbers:
            return
        base = _AGAIN if again else 0
        last = numbers[-1]
        queue, address = self.stack._queue, self.address
        data = b""
        size = 0
        for number in numbers:
            data = self._packet(number, base | _WAIT if number == last else base)
            queue(data, address)
            size += len(data)
        traffic = self.remote.traffic
        traffic.datagrams_out += len(numbers)
        traffic.bytes_out += size
        self.last_sent = data
        count = len(numbers)
        self.bursts.append(count)
        self.burst_times.append(None if again else self.stack.now)
        self.outstanding += count
        self.remote.segments_in_flight += count
        self.stack.stats.segments_sent += count
        if again:
            self.stack.stats.segments_resent += count
            self.remote.traffic.resends += count
        self.arm_redo(self.stack.now + self.redo_interval)

    def budget(self) -> int:
        """How many more segments the window lets this messenger send now."""
        config = self.stack.config
        room = config.window - self.remote.segments_in_flight
        return max(0, min(config.burst, room))

    def pump(self) -> None:
        """Send bursts (resends first) while the window has room, up to
        :data:`BURSTS_IN_FLIGHT` of them unanswered: the next burst is on its way
        while the receiver still works through the one before."""
        while (not self.ended and len(self.bursts) < BURSTS_IN_FLIGHT
               and (self.misseds or self.current < self.count)):
            room = self.budget()
            if room <= 0:
                if self.remote.segments_in_flight > 0:
                    if not self.bursts:  # nothing of ours to answer: wait for the window
                        self.stack._stall(self)
                    return
                room = 1
            if self.misseds:
                numbers = list(self.misseds)[:room]
                for number in numbers:
                    del self.misseds[number]
                self._transmit(numbers, again=True)
            else:
                numbers = list(range(self.current, min(self.count, self.current + room)))
                self.current = numbers[-1] + 1
                self._transmit(numbers, again=False)

    def _answered(self, *, more: bool = True) -> None:
        """The receiver answered: the burst left the window; ``more`` lets others use it now
        (an ending messenger leaves that to :meth:`end`)."""
        self.acked = True
        self.redos_unanswered = 0
        answered = self.bursts.popleft() if self.bursts else 0  # answers come in burst order
        sent_at = self.burst_times.popleft() if self.burst_times else None
        round_trip = self.remote.round_trip
        if sent_at is not None:  # Karn: a resent burst's answer times nothing
            round_trip.sample(self.stack.now - sent_at)
        self.remote.segments_in_flight -= answered
        self.outstanding -= answered
        self.redo_interval = round_trip.timeout(self.redo_min, self.redo_max)
        self.stack._presence(self.remote, alive=True)
        if more:
            self.stack._pump(self.remote)

    def end(self) -> None:
        if self.outstanding:
            self.remote.segments_in_flight -= self.outstanding
            self.outstanding = 0
        self.bursts.clear()
        self.burst_times.clear()
        super().end()
        self.stack._pump(self.remote)

    # -- answers --------------------------------------------------------------------

    def on_ack(self, packet: Packet, _body: Any) -> None:
        self._answered()
        if not self.misseds and not self.bursts:  # (a later burst explains a lower ack)
            following = packet.head.segment_number + 1
            self.current = min(self.current, following)
        self.pump()

    def on_resend(self, _packet: Packet, body: Any) -> None:
        self.stack.stats.resend_requests_received += 1
        misseds = body.get("misseds") if isinstance(body, dict) else None
        if not isinstance(misseds, list) or not all(
            isinstance(n, int) and 0 <= n < self.count for n in misseds
        ):
            self.stack.stats.drop(Drop.INVALID_BODY)
            return
        self._answered()
        for number in misseds:
            self.misseds[number] = None
        self.pump()

    def on_done(self, _packet: Packet, _body: Any) -> None:
        self._answered(more=False)
        self.end()
        self.stack._sent(self.remote, self.outgoing)

    def on_nack(self, _packet: Packet, _body: Any) -> None:
        if self.resumed is not None and not self.acked:
            # A send taken up again, refused at once: RAET 0.6.8 remembers the id of
            # every transaction it ended, delivered or not, and nacks it.  Send it as a
            # new transaction in this session (as before resuming existed), no new allow.
            self.fail("resumed send refused: sent again as a new transaction")
            self.stack._requeue(self.remote, self.outgoing)
            self.stack._pump(self.remote)
            return
        self.fail("nacked by the receiver")
        # RAET nacks every message from a remote it has not allowed (say it restarted and
        # lost the session): hold the outbox until a new allow (the presence check starts
        # one) rather than resending at once, which storms a nack loop.
        self.remote.allowed = False
        self.requeue()

    def on_redo(self) -> None:
        if self.stack.now >= self.outgoing.expires:
            self.end()
            self.stack._expire(self.remote, self.outgoing, "time to live ran out in flight")
            return
        self.redos_unanswered += 1
        self.burst_times = deque(None for _ in self.burst_times)  # Karn: answers now ambiguous
        self.remote.round_trip.back_off(self.redo_interval)
        if self.redos_unanswered > self.stack.config.max_redos:
            self.requeue(resume=True)
            self.stack._presence(self.remote, alive=False, reason="message not acknowledged")
            return
        if self.last_sent is None:
            self.pump()
            return
        if self.acked:
            # RAET resends the last packet with the again flag once it had any answer.
            last = self.current - 1 if self.current else 0
            self.last_sent = self._packet(last, _AGAIN | _WAIT)
        self.resend_last()
        self.stack.stats.segments_resent += 1

    def requeue(self, *, resume: bool = False) -> None:
        """End it and put the message back in the outbox (a newer session, a silent or
        refusing remote).  ``resume`` (the remote went silent, the session stands): if
        any of it went out, sent again in this session it is the same transaction (see
        ``Outgoing.begun``)."""
        self.end()
        if resume and self.packets is not None and self.current:
            self.outgoing.begun = (self.session_id, self.transaction_id, self.coat)
        self.stack._requeue(self.remote, self.outgoing)

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (States.SENDING, PacketKind.ACK): Rule(on_ack),
        (States.SENDING, PacketKind.RESEND): Rule(on_resend),
        (States.SENDING, PacketKind.DONE): Rule(on_done),
        (States.SENDING, PacketKind.NACK): Rule(on_nack),
    }


class Partials:
    """What partly received messages hold, per remote and in total, in both modes.

    A message is *open* from its first segment (or chunk) of several until it
    completes, fails or times out.  The bounds are :class:`road.config.RoadConfig`'s
    ``max_open_messages`` (per remote), ``max_open_messages_total``,
    ``max_reassembly_bytes`` and a remote's share of it,
    ``max_reassembly_share``: no one remote holds more than that share of the bytes,
    and when the totals are full a newcomer takes the place of the oldest RAET-mode
    partial message of the remote holding the most (``Drop.REASSEMBLY_EVICTED``; its
    sender's next segments open it again and ask for what is missing).  Fast mode's
    partial messages are never evicted (their chunks were acknowledged already), only
    held to the share.  Every refusal is a counted drop.
    """

    __slots__ = ("by_remote", "bytes", "config", "count", "evictable", "held", "stats")

    def __init__(self, config: RoadConfig, stats: RoadStats) -> None:
        self.config = config
        self.stats = stats  # where refusals are counted
        self.count = 0
        self.bytes = 0
        self.by_remote: dict[int, int] = {}  # open messages per remote uid
        self.held: dict[int, int] = {}  # bytes charged per remote uid
        # RAET-mode partial messages per remote uid, oldest first: what eviction may take
        self.evictable: dict[int, dict[Messengent, None]] = {}

    def share(self) -> int:
        """Bytes one remote may hold at most (``max_reassembly_share`` of the total)."""
        config = self.config
        return max(1, int(config.max_reassembly_bytes * config.max_reassembly_share))

    def open(self, remote: Remote, message_length: int,
             holder: Messengent | None = None) -> bool:
        """Room for one more open message from ``remote`` announcing ``message_length``?
        ``holder``: the RAET-mode transaction that holds it (evictable)."""
        config = self.config
        if message_length > config.max_message_size:
            self.stats.drop(Drop.MESSAGE_TOO_LARGE)
            return False
        uid = remote.uid
        mine = self.by_remote.get(uid, 0)
        if mine >= config.max_open_messages:
            self.stats.drop(Drop.TOO_MANY_OPEN_MESSAGES)
            return False
        while self.count >= config.max_open_messages_total:
            if not self._evict(uid, self.by_remote, mine + 1):
                self.stats.drop(Drop.TOO_MANY_OPEN_MESSAGES)
                return False
        self.count += 1
        self.by_remote[uid] = mine + 1
        if holder is not None:
            self.evictable.setdefault(uid, {})[holder] = None
        return True

    def room(self, remote: Remote, cost: int) -> bool:
        """Room to hold ``cost`` more bytes from ``remote``: within its share, and within
        the total once the largest holders' oldest RAET-mode partials are evicted as
        needed; else False, counted (``Drop.REASSEMBLY_FULL``)."""
        uid = remote.uid
        after = self.held.get(uid, 0) + cost
        if after > self.share():
            self.stats.drop(Drop.REASSEMBLY_FULL)
            return False
        limit = self.config.max_reassembly_bytes
        while self.bytes + cost > limit:
            if not self._evict(uid, self.held, after):
                self.stats.drop(Drop.REASSEMBLY_FULL)
                return False
        return True

    def charge(self, remote: Remote, cost: int) -> None:
        """``remote`` holds ``cost`` more bytes (:meth:`room` said there was room)."""
        self.bytes += cost
        self.held[remote.uid] = self.held.get(remote.uid, 0) + cost

    def _evict(self, uid: int, measure: dict[int, int], after: int) -> bool:
        """End the oldest evictable partial message of the remote that holds the most by
        ``measure`` (bytes or open messages), if that is more than ``after``, what the
        remote ``uid`` would hold; False when there is none such.  One pass over the
        remotes with evictable partials."""
        victim, most = None, after
        for other, holders in self.evictable.items():
            if other != uid and holders and measure.get(other, 0) > most:
                victim, most = other, measure.get(other, 0)
        if victim is None:
            return False
        oldest = next(iter(self.evictable[victim]))
        self.stats.drop(Drop.REASSEMBLY_EVICTED)
        oldest.evict()
        self.evictable.get(victim, {}).pop(oldest, None)  # (evict closed it already)
        return True

    def close(self, remote: Remote, held: int, holder: Messengent | None = None) -> None:
        """An open message from ``remote`` holding ``held`` bytes is gone."""
        uid = remote.uid
        self.count -= 1
        self.bytes -= held
        left = self.by_remote.get(uid, 1) - 1
        if left:
            self.by_remote[uid] = left
        else:
            self.by_remote.pop(uid, None)
        charged = self.held.get(uid, 0) - held
        if charged > 0:
            self.held[uid] = charged
        else:
            self.held.pop(uid, None)
        if holder is not None:
            holders = self.evictable.get(uid)
            if holders is not None:
                holders.pop(holder, None)
                if not holders:
                    del self.evictable[uid]


class Messengent(Transaction):
    """The remote sends us one message."""

    stack: MessageHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.MESSAGE
    timeout: ClassVar[float] = 0.0
    redo_min: ClassVar[float] = 0.2
    redo_max: ClassVar[float] = 0.5
    idle_redos: ClassVar[int] = 60  # give up on a sender silent for ~30 s
    idle_asks: ClassVar[int] = 3
    """Redos that ask a silent sender again (one packet each); later ones only wait, so one
    wait segment from a peer earns it a few answers, not one every redo for 30 s."""

    class States(enum.Enum):
        RECEIVING = "receiving"

    def __init__(self, stack: MessageHost, remote: Remote, packet: Packet,
                 source: Address | None = None) -> None:
        # answers (acks, resend requests, done) go where the message came from: a sender
        # that moved gets them at its new address (docs/road.md, "A remote that moves")
        super().__init__(
            stack, remote, correspondent=True, session_id=packet.head.session_id,
            transaction_id=packet.head.transaction_id, address=source,
        )
        first = packet.head
        self.wait_flag = _FLAGS[int(first.flags) & _WAIT]
        self.reply_flags = _FLAGS[int(first.flags) & _WAIT | _CORRESPONDENT]
        self.coat_kind, self.foot_kind = first.coat_kind, first.foot_kind
        self.body_kind = first.body_kind
        self.reassembly: Reassembly | None = None
        self.highest = 0
        self.lowest = 0
        self.idle = 0
        self.asked: set[int] = set()  # segments a resend asked for already

    def initial_state(self) -> enum.Enum:
        return self.States.RECEIVING

    def head(self, packet_kind: PacketKind, **fields: Any) -> Any:
        if not fields:  # done, nack, resend: the message's coat, foot and wait flag
            remote, config = self.remote, self.stack.config
            return build_head(
                packet_kind, self.kind, source_uid=remote.uid, destination_uid=remote.far_uid,
                session_id=self.session_id, transaction_id=self.transaction_id,
                flags=self.reply_flags, body_kind=config.body_kind, coat_kind=self.coat_kind,
                foot_kind=self.foot_kind, head_kind=config.head_kind,
            )
        fields.setdefault("coat_kind", self.coat_kind)
        fields.setdefault("foot_kind", self.foot_kind)
        fields.setdefault("flags", self.wait_flag)
        return super().head(packet_kind, **fields)

    def _reply(self, kind: PacketKind, body: dict[str, Any] | None = None, *,
               remember: bool = True, **fields: Any) -> None:
        self.send(kind, body, secure=False, remember=remember, **fields)

    def start(self, index: Any, packet: Packet) -> None:
        """Take the first segment (the stack verified its signature already)."""
        self.register(index)
        self._take(packet)

    def on_message(self, packet: Packet, _body: None) -> None:
        self._take(packet)

    def _take(self, packet: Packet) -> None:
        if not self.remote.allowed or self.remote.session_box is None:
            self._reply(PacketKind.NACK)
            self.fail("not allowed")
            return
        head = packet.head
        stack = self.stack
        stack.stats.segments_received += 1
        stack._presence(self.remote, alive=True)
        if head.segment_count <= 1:
            self.finish(packet.coat, 1)
            return
        if self.reassembly is None:
            if not stack._partials.open(self.remote, head.message_length, self):
                self._reply(PacketKind.NACK, remember=False)
                self.fail("no room to reassemble it")
                return
            try:
                self.reassembly = Reassembly(head.segment_count, head.message_length)
            except PacketError:
                stack._partials.close(self.remote, 0, self)
                stack.stats.drop(Drop.MALFORMED)
                self._reply(PacketKind.NACK, remember=False)
                self.fail("bad segment count")
                return
            # open from now on, held bytes or not: freed if no new segment comes in time
            self.arm_timeout(stack.now + stack.config.reassembly_timeout)
        chunk = packet.coat
        partials = stack._partials
        if not partials.room(self.remote, len(chunk)):  # (counted)
            return
        before = self.reassembly.received_bytes
        try:
            new = self.reassembly.add(head.segment_number, chunk)
        except PacketError:
            stack.stats.drop(Drop.MALFORMED)
            return
        if new:
            partials.charge(self.remote, self.reassembly.received_bytes - before)
            self.idle = 0
            self.arm_timeout(stack.now + stack.config.reassembly_timeout)
        self.highest = max(self.highest, head.segment_number)
        if self.reassembly.complete:
            try:
                whole = self.reassembly.coat()
            except PacketError:
                self.stack.stats.drop(Drop.MALFORMED)
                self._reply(PacketKind.NACK)
                self.fail("segments do not add up")
                return
            self.finish(whole, head.segment_count)
        elif int(head.flags) & _WAIT:
            self.answer_wait(again=bool(int(head.flags) & _AGAIN))

    def missing(self) -> list[int]:
        """The lowest segments still missing below the highest received, at most
        :data:`MAX_MISSEDS_PER_ANSWER` of them: an answer asks only for what is
        really missing, and never for more than a window's worth."""
        if self.reassembly is None:
            return []
        return self.reassembly.missing(self.lowest, self.highest, limit=MAX_MISSEDS_PER_ANSWER)

    def answer_wait(self, *, again: bool = True, limit: int | None = None) -> None:
        """Answer a wait: resend for what is missing, else ack the highest segment.

        A first-time wait (``again`` False: the end of a fresh burst) asks only
        for segments not asked for already; those are on their way when the
        sender keeps a second burst in flight.  A wait sent again, and our own
        redo, ask for everything missing.
        """
        misseds = self.missing()
        if misseds:
            self.lowest = misseds[0]
            if not again:
                misseds = [n for n in misseds if n not in self.asked]
            if len(self.asked) > 2 * MAX_MISSEDS_PER_ANSWER:  # only what lies ahead matters
                self.asked = {n for n in self.asked if n >= self.lowest}
            self.asked.update(misseds)
        if limit is not None:
            misseds = misseds[:limit]
        if misseds:
            for i in range(0, len(misseds), MAX_MISSEDS_PER_PACKET):
                if not self._may_ask():
                    self.stack.stats.drop(Drop.RESEND_LIMITED)
                    break
                self._reply(PacketKind.RESEND, {"misseds": misseds[i:i + MAX_MISSEDS_PER_PACKET]})
                self.stack.stats.resend_requests_sent += 1
        else:
            self._reply(PacketKind.ACK, None, segment_number=self.highest)

    def _may_ask(self) -> bool:
        """Take a token from the remote's resend-request bucket (refilled at
        ``resend_requests_per_second``, holding as many); False when it is empty."""
        remote, stack = self.remote, self.stack
        rate = stack.config.resend_requests_per_second
        tokens = min(rate, remote.resend_tokens + (stack.now - remote.resend_tokens_at) * rate)
        remote.resend_tokens_at = stack.now
        if tokens < 1.0:
            remote.resend_tokens = tokens
            return False
        remote.resend_tokens = tokens - 1.0
        return True

    def end(self) -> None:
        if self.reassembly is not None and not self.ended:
            self.stack._partials.close(self.remote, self.reassembly.received_bytes, self)
            self.reassembly = None
        super().end()

    def evict(self) -> None:
        """Give the room it holds to a newcomer (``Partials``; counted there): the sender's
        next new segments open the message again and ask for what is missing."""
        self.fail("evicted: reassembly room went to another remote")

    def on_timeout(self) -> None:
        self.stack.stats.drop(Drop.REASSEMBLY_TIMEOUT)
        self.fail(f"no new segment for {self.stack.config.reassembly_timeout:g} s")

    def finish(self, whole: bytes, segments: int) -> None:
        remote = self.remote
        try:
            plain = whole
            if whole and self.coat_kind and remote.session_box is not None:
                plain = uncoat(whole, remote.session_box)
            body = parse_body(self.body_kind, plain)
        except (PacketError, CryptoError):
            self.stack.stats.drop(Drop.BAD_COAT)
            self._reply(PacketKind.NACK)
            self.fail("message did not decrypt or parse")
            return
        self._reply(PacketKind.DONE, None, remember=False)  # done_again answers repeats
        self.end()
        if remote.delivered is None or remote.delivered_session != self.session_id:
            remote.delivered = BitWindow(self.stack.config.dedup_window)
            remote.delivered_session = self.session_id
        if not remote.delivered.check_and_mark(self.transaction_id):
            self.stack.stats.drop(Drop.REPLAYED)  # delivered once in this session already
            return
        self.stack._delivered(remote, self.session_id, self.transaction_id, body, segments)

    def on_nack(self, _packet: Packet, _body: Any) -> None:
        self.fail("sender gave up")

    def on_redo(self) -> None:
        self.idle += 1
        if self.idle > self.idle_redos:
            self.fail("sender went silent")
            return
        if self.idle <= self.idle_asks:
            self.answer_wait(limit=MAX_MISSEDS_PER_PACKET)

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (States.RECEIVING, PacketKind.MESSAGE): Rule(on_message, body=False),  # a segment
        (States.RECEIVING, PacketKind.NACK): Rule(on_nack),
    }


def done_again(stack: MessageHost, remote: Remote, packet: Packet,
               source: Address | None = None) -> None:
    """A message packet for a transaction already delivered: say done again (where it came
    from)."""
    answer = Messengent(stack, remote, packet, source)
    answer.send(PacketKind.DONE, None, secure=False, remember=False)
