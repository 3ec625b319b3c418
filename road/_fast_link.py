"""Fast mode with one remote: the link that coordinates its owned parts.

A :class:`FastLink` owns four parts, none of which sees the stack or the others:

- :class:`~road._fast_send.SendStream`: our messages, numbered and chunked,
  in flight until acknowledged;
- :class:`~road._fast_recovery.LossRecovery`: our datagrams in flight, acks,
  losses, probes and the congestion window;
- :class:`~road._fast_receive.ReceiveStream`: the peer's messages, each
  delivered once, long ones reassembled within bounds;
- :class:`~road._fast_receive.AckState`: the peer's packet numbers (replay
  window, ranges to acknowledge) and when our ack is due.

The link keeps what spans them: the session keys and our packet numbers,
whether the peer has ever answered (the fallback to RAET mode), pause and
resume with presence, and the deadlines of all four.  It passes chunks
between them (acked ones to be settled, lost ones to go again) and turns
their results into the stack's events and counters.
"""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import TYPE_CHECKING

from raetlike.crypto import AEAD_TAG_SIZE, AeadKey, counter_nonce
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from road import events
from road._fast_receive import AckState, ReceiveStream
from road._fast_recovery import LossRecovery, Sent
from road._fast_send import Carried, Sending, SendStream
from road._fast_wire import (
    FAST_HEADER_SIZE,
    FRAME_MESSAGE_SIZE,
    PING_FRAME,
    pack_header,
    read_frames,
)
from road.stats import Drop

if TYPE_CHECKING:
    from road.remote import Outgoing, Remote
    from road.stack import RoadStack

__all__ = ["HEARD", "NEWEST", "FastLink", "Ping"]

log = logging.getLogger(__name__)

_CONTEXT = b"raetlike fast v1 "
_ACK_ROOM = 2 + 16 * 4  # an ack frame of up to 4 ranges rides along with data
_RAET_GRACE = 0.25  # a peer that just answered RAET has this long to ack a fast datagram
# before its silence on the fast link counts (its acks of our probes come with its answer)
_REKEY_AT = 1 << 62  # packet numbers: ask for a new allow long before 2**64
HEARD = 1
"""FastLink.receive: the datagram was authentic (fresh and its tag verified); 0: it was not."""
NEWEST = 2
"""FastLink.receive: authentic, and its packet number the highest yet."""


class Ping:
    """A presence check over the link: "alive?" as an ack-eliciting datagram (docs/road.md,
    "Presence in fast mode").

    It keeps the RAET :class:`~road._alive.Aliver`'s timing (the stack passes its
    timeout and redo spacing): a ping at once, again after ``redo_min`` doubling up
    to ``redo_max``, and no ack of any of them by ``timeout_at`` is "no answer".
    ``first`` is the packet number of the first ping: an authenticated ack of it or
    of anything sent after it answers (the peer received what we sent since we asked).

    A check gives the presence verdict (``verdict``) only once the link has carried
    one answered (``proven``, under the current keys, and none unanswered since);
    until then a *trial* goes beside the stack's RAET alive, whose answer decides.
    So a path that drops fast datagrams one way costs a trial ping per check, not a
    RemoteLost per check.
    """

    __slots__ = ("first", "interval", "lapsed", "lapsed_at", "lapsed_last", "lapsed_last_at",
                 "last", "last_at", "proven", "redo_at", "redo_max", "rtt", "sent_at",
                 "timeout_at", "verdict", "wanted")

    def __init__(self) -> None:
        self.first = -1  # the first ping's packet number; -1: no check open
        self.wanted = False  # a ping goes in the next datagram built
        self.verdict = False  # its timeout is "no answer" (else a trial: it only ends)
        self.proven = False  # a ping was answered under these keys, none timed out since
        self.timeout_at = 0.0
        self.redo_at = 0.0
        self.interval = 0.0
        self.redo_max = 0.0
        self.sent_at = 0.0  # when the first ping of the open check went
        self.last = -1  # the latest ping's packet number (a redo's, or the first's)
        self.last_at = 0.0  # when it went
        self.rtt = 0.0  # smoothed time from a check's first ping to its answer (0: none yet)
        self.lapsed = -1  # the first ping of the latest check that timed out (-1: none)
        self.lapsed_at = 0.0  # when it went
        self.lapsed_last = -1  # that check's latest ping (a redo's, or the first's)
        self.lapsed_last_at = 0.0  # when it went

    def open(self) -> bool:
        """Whether a check is under way (asked and not yet answered or timed out)."""
        return self.wanted or self.first >= 0

    def start(self, now: float, timeout: float, redo_min: float, redo_max: float, *,
              verdict: bool) -> None:
        """Ask now; no answer by ``now + timeout`` is "no answer"."""
        self.first = -1
        self.wanted = True
        self.verdict = verdict
        self.timeout_at = now + timeout
        self.interval = redo_min
        self.redo_at = now + redo_min
        self.redo_max = redo_max

    def sent(self, number: int, now: float) -> None:
        """A ping went as packet ``number``."""
        self.wanted = False
        if self.first < 0:
            self.first = number
            self.sent_at = now
        self.last = number
        self.last_at = now

    def answered(self, largest: int, now: float) -> bool:
        """An authenticated ack up to packet ``largest`` came: whether it answers the check
        (and the time it took joins ``rtt``, weighted 1/8 as RFC 6298's SRTT).

        The time runs from the latest ping the ack covers: the latest ping sent when
        ``largest`` is that one or later, else the first (every redo is a new packet
        number, so the ack says which the peer got, unlike a resent TCP segment's; RFC
        9002 section 5.1).  Timed from the first ping always, a redo's answer made a
        lossy link's answer time read a redo interval or more."""
        if 0 <= self.lapsed <= largest:
            # a check that timed out is answered late: the link carries checks after all
            # (proven again, so the next check is a ping, not a signed RAET alive); when
            # the ack goes no further than that check's pings it is their answer, and
            # answers take this long here at least (the next checks wait for it).  An ack
            # of anything sent later says nothing of how long they took: timed from the
            # lapsed check, the gap of an outage read as the link's answer time.
            self.proven = True
            if largest <= self.lapsed_last:
                sent = self.lapsed_last_at if largest == self.lapsed_last else self.lapsed_at
                self.rtt = max(self.rtt, now - sent)
            self.lapsed = -1
        if 0 <= self.first <= largest:
            self.first = -1
            self.wanted = False
            self.proven = True
            self.lapsed = -1  # (a newer check answered: a later ack answers no lapsed one)
            sample = now - (self.last_at if largest >= self.last else self.sent_at)
            self.rtt = sample if self.rtt == 0.0 else 0.875 * self.rtt + 0.125 * sample
            return True
        return False

    def lapse(self) -> None:
        """The open check timed out: none is open, none proven, until an answer comes (a
        late one to this check proves the link again: :meth:`answered`)."""
        if self.first >= 0:
            self.lapsed, self.lapsed_at = self.first, self.sent_at
            self.lapsed_last, self.lapsed_last_at = self.last, self.last_at
        self.clear()
        self.proven = False

    def deadline(self) -> float:
        """When an open check wants the timer (a redo or its timeout)."""
        return min(self.redo_at, self.timeout_at)

    def clear(self) -> None:
        """No check open (the keys changed, or the link paused)."""
        self.first = -1
        self.wanted = False

    def forget(self) -> None:
        """New keys: no check open, none proven, no late answer awaited (packet numbers
        start again)."""
        self.clear()
        self.proven = False
        self.lapsed = -1


class FastLink:
    """The fast-mode link with one remote: keys, packet numbers and the parts they serve."""

    def __init__(self, stack: RoadStack, remote: Remote) -> None:
        self.stack = stack
        self.remote = remote
        config = stack.config
        self.datagram_size = size = config.fast_datagram_size
        chunk_size = size - FAST_HEADER_SIZE - AEAD_TAG_SIZE - FRAME_MESSAGE_SIZE - _ACK_ROOM
        if chunk_size < 64:
            raise LocalProtocolError("fast_datagram_size is too small")
        self.short_datagram = size // 2  # acked at once (see AckState.later)
        self.keyed = False
        self.sending_ok = False  # the peer has the keys too (its allow finished, or it spoke)
        self.key_id = 0
        self.send_key: AeadKey | None = None
        self.receive_key: AeadKey | None = None
        self.next_packet = 0
        self.paused = False  # the remote is dead to presence: nothing goes until it answers
        # fallback: has the peer acknowledged any fast datagram under the current keys?
        self.answered = False
        self.unanswered_since: float | None = None
        self.raet_asked_at: float | None = None
        """When we asked the peer a RAET alive to know whether to fall back."""
        self.raet_heard_at: float | None = None
        """When that alive (or a later one) was answered."""
        self.sending = SendStream(remote, chunk_size, config, partial(stack._expire, remote))
        self.recovery = LossRecovery(size, config.fast_max_window, config.fast_ack_delay,
                                     config.fast_initial_window)
        self.receiving = ReceiveStream(remote, config, stack.stats, stack._partials)
        self.acks = AckState(config.fast_ack_delay)
        self.ping = Ping()
        self.heard_at = -math.inf
        """When the latest authenticated datagram from the peer came (under these keys)."""

    # -- keys and presence -----------------------------------------------------------
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
        self.receiving.pinned = False  # the first datagram under the new keys names the stream
        self.sending_ok = False
        self.answered = False
        self.unanswered_since = None
        self.raet_asked_at = None
        self.raet_heard_at = None
        self._again(self.recovery.new_keys())
        self.next_packet = 0
        self.acks.reset()
        self.ping.forget()  # (a check open under the old keys is asked again by the stack)
        self.heard_at = -math.inf

    def pause(self) -> None:
        """The remote is dead: stop sending; everything in flight goes again on resume."""
        self.paused = True
        self.ping.clear()
        self._again(self.recovery.forget())

    def resume(self) -> None:
        """The remote answers again."""
        if self.paused:
            self.paused = False
            self.recovery.resume()

    def ask_alive(self, now: float, timeout: float, redo_min: float, redo_max: float) -> bool:
        """A presence check over the link: True when its ping gives the verdict, False
        when the stack's RAET alive must (a trial ping goes beside it, see :class:`Ping`).

        Only a link keyed both ways and not paused pings; the verdict needs one proven
        and the remote alive at the last check (one lost is asked by a RAET alive, whose
        refusals -- unjoined, unallowed -- say what a silent link cannot).
        """
        if not (self.keyed and self.sending_ok) or self.paused or self.send_key is None:
            return False
        ping = self.ping
        verdict = ping.proven and self.remote.alive is True
        if ping.open() and (ping.verdict or not verdict):
            return ping.verdict  # (a trial open when the verdict is due: it becomes one)
        ping.start(now, timeout, redo_min, redo_max, verdict=verdict)
        return verdict

    def smoothed_rtt(self) -> float | None:
        """The round trip measured by acks (None before the first sample)."""
        control = self.recovery.control
        return control.smoothed_rtt if control.min_rtt > 0 else None

    def answer_time(self) -> float:
        """How long an answer takes here: the larger of the data's smoothed round trip and
        the presence checks' (pings are not tracked for loss: an idle link has only
        these); 0 before either was measured."""
        data = self.smoothed_rtt()
        return self.ping.rtt if data is None or data < self.ping.rtt else data

    # -- out -------------------------------------------------------------------------
    def can_send_data(self, now: float) -> bool:
        """Whether a data datagram may go now (keys, window, pacing, presence)."""
        if not (self.keyed and self.sending_ok) or self.paused or self.remote.alive is False:
            return False
        return self.recovery.may_send(now) and self.sending.has_data()

    def build(self, now: float) -> bytes | None:
        """One datagram (data, acks or both), or None when nothing may go now."""
        sending, acks = self.sending, self.acks
        ping = self.ping.wanted
        if not (acks.pending or sending.again or sending.queue or sending.abandons
                or self.remote.outbox or ping):
            return None  # the common second call of a round: nothing at all to say
        if not self.keyed or self.send_key is None:
            return None
        if self.next_packet >= _REKEY_AT:
            self.stack._start_allow(self.remote)
            return None
        data = self.can_send_data(now)
        ack_now = acks.pending and (data or (acks.due is not None and acks.due <= now))
        if not data and not ack_now and not ping:
            return None
        parts: list[bytes | memoryview] = []
        room = self.datagram_size - FAST_HEADER_SIZE - AEAD_TAG_SIZE
        if ping:
            parts.append(PING_FRAME)
            room -= len(PING_FRAME)
        if ack_now:
            frame = acks.frame(now, with_data=data)
            parts.append(frame)
            room -= len(frame)
        chunks: list[Carried] = []
        abandons: list[int] = []
        if data:
            sending.fill(parts, room, chunks, abandons, now)
            if not parts:
                return None  # the outbox held only messages that expired or could not be packed
        number = self.next_packet
        if ping:
            self.ping.sent(number, now)
        self.next_packet += 1
        header = pack_header(self.key_id, self.remote.far_uid, sending.stream_id, number)
        datagram = header + self.send_key.seal(b"".join(parts), counter_nonce(0, number), header)
        if chunks or abandons:
            self.recovery.on_sent(number, now, len(datagram), chunks, abandons)
            if not self.answered and self.unanswered_since is None:
                self.unanswered_since = now
        self.stack.stats.fast_datagrams_sent += 1
        return datagram

    # -- in --------------------------------------------------------------------------
    def receive(self, data: bytes, stream: int, number: int, now: float) -> int:
        """A datagram under our key id; garbage is dropped and counted.

        The door: nothing of the datagram reaches any part's state before its
        packet number is fresh and its AEAD tag (over the header, stream id and
        number included) has verified.  0 when it did not (replayed or forged:
        the caller changes nothing either), HEARD when it did, NEWEST when it
        did and its number is the highest yet: where such a datagram came from
        is where the peer is now.
        """
        stack, acks = self.stack, self.acks
        if not acks.replay.fresh(number):
            stack.stats.drop(Drop.REPLAYED)
            return 0
        newest = NEWEST if number > acks.replay.highest else HEARD
        assert self.receive_key is not None  # noqa: S101 - keyed links have keys
        try:
            plain = self.receive_key.open(data[FAST_HEADER_SIZE:], counter_nonce(0, number),
                                          data[:FAST_HEADER_SIZE])
        except CryptoError:
            stack.stats.drop(Drop.BAD_COAT)
            return 0
        stack._heard_from(self.remote, len(data))
        acks.replay.mark(number)
        try:
            messages, ranges, abandons = read_frames(plain)
        except PacketError:
            stack.stats.drop(Drop.MALFORMED)
            return newest
        receiving = self.receiving
        known = receiving.peer_stream
        if not receiving.accepts(stream):  # a second stream under the same keys
            stack.stats.drop(Drop.STALE_PACKET)
            return HEARD
        if stream != known and known is not None:
            log.debug("%s: %s restarted its fast stream", stack.name, self.remote.name)
        self.sending_ok = True
        refused = False
        if messages:
            made: list[events.Event] = []
            refused = receiving.take(messages, now, len(plain), made)
            if made:
                stack.stats.messages_received += len(made)
                stack._emit_all(made)
        if ranges:
            self._on_ack(ranges, now)
        for abandoned in abandons:
            receiving.abandoned(abandoned)
        if not refused:  # a datagram with a chunk refused for want of room goes unacked
            acks.received.add(number)
        if messages or abandons:
            acks.later(len(data) < self.short_datagram, now)
        self._heard(now)
        return newest

    def _on_ack(self, ranges: list[tuple[int, int]], now: float) -> None:
        # an ack of what we never sent (ranges[0] is the highest: read_frames checks the
        # ranges descend, so none of the others reaches next_packet either)
        if ranges[0][1] >= self.next_packet:
            self.stack.stats.drop(Drop.INVALID_BODY)
            return
        self.ping.answered(ranges[0][1], now)  # (the verdict "alive": _heard, after the frames)
        recovery = self.recovery
        acked = recovery.on_ack(ranges, now)
        if acked or recovery.acked_probed:  # (an ack of pings alone says nothing of data:
            self.answered = True  # the fallback still watches)
            self.unanswered_since = None
            done: list[Sending] = []
            settle = self.sending.settle
            for chunks in acked:
                settle(chunks, done)
            if done:
                stack = self.stack
                stack.stats.messages_sent += len(done)
                name, sent_event = self.remote.name, events.MessageSent
                stack._emit_all([sent_event(name, sending.outgoing.message_id)
                                 for sending in done])
        self._lost(recovery.detect_losses(now))

    def _lost(self, lost: list[Sent]) -> None:
        if lost:
            self._again(lost)
            self.stack.stats.fast_datagrams_lost += len(lost)
            self.remote.traffic.resends += len(lost)

    def _again(self, datagrams: list[Sent]) -> None:
        """What datagrams no longer in flight carried goes again (unless acked meanwhile)."""
        requeue = self.sending.requeue
        for _, _, chunks, abandons in datagrams:
            requeue(chunks, abandons)

    def _heard(self, now: float) -> None:
        """An authenticated datagram is proof of presence (no RAET alive needed meanwhile)."""
        stack, remote = self.stack, self.remote
        self.heard_at = now
        if remote.alive is not True or self.paused:
            stack._presence(remote, alive=True)
            return
        config = stack.config
        # (RoadStack._main_to inline: this runs for every datagram heard)
        remote.presence_due = now + config.presence_delay(stack.local.main and not remote.sought)
        remote.reap_due = now + config.reap_interval

    # -- time ------------------------------------------------------------------------
    def deadline(self, now: float) -> float | None:
        """The next moment this link wants ``handle_timer`` (or to send)."""
        acks, recovery, sending, receiving = self.acks, self.recovery, self.sending, self.receiving
        earliest = acks.due if acks.pending else None
        loss_time = recovery.loss_time
        if loss_time is not None and (earliest is None or loss_time < earliest):
            earliest = loss_time
        if recovery.sent:
            probe = None if self.paused else recovery.probe_deadline()
            if probe is not None and (earliest is None or probe < earliest):
                earliest = probe
            fallback = self.fallback_deadline()
            if fallback is not None and (earliest is None or fallback < earliest):
                earliest = fallback
        if sending.messages and (earliest is None or sending.expiry_check < earliest):
            earliest = sending.expiry_check
        if self.ping.open():
            ping = self.ping.deadline()
            if earliest is None or ping < earliest:
                earliest = ping
        if receiving.partials and (earliest is None or receiving.partials_check < earliest):
            earliest = receiving.partials_check
        if self.remote.outbox and (earliest is None or sending.outbox_expiry < earliest):
            earliest = sending.outbox_expiry
        # The same conditions as can_send_data, or the loop spins at one instant.
        if (self.keyed and self.sending_ok and not self.paused and self.remote.alive is not False
                and sending.has_data()):
            send = recovery.send_time(now)
            if send is not None and (earliest is None or send < earliest):
                earliest = send
        return earliest

    def fallback_deadline(self) -> float | None:
        """When to give fast mode up if the peer still has not acknowledged anything (and
        answers RAET: :meth:`_raet_answers`)."""
        after = self.stack.config.fast_fallback_after
        if self.answered or self.unanswered_since is None or after <= 0:
            return None
        heard = self.raet_heard_at
        if heard is None:  # (a probe timeout asks RAET: _fallback_due)
            return None
        return max(self.unanswered_since + after, heard + _RAET_GRACE)

    def alive_answered(self, asked_at: float, now: float) -> None:
        """A RAET alive asked at ``asked_at`` was answered."""
        if (not self.answered and self.raet_asked_at is not None
                and asked_at >= self.raet_asked_at and self.raet_heard_at is None):
            self.raet_heard_at = now

    def _raet_answers(self, now: float) -> bool:
        """Whether the peer answered the RAET alive we asked after our fast datagrams went
        unacknowledged, ``_RAET_GRACE`` ago or more: only then does its silence on the
        fast link say the path drops fast datagrams (a signed packet it sent before ours
        reached it, late in a busy queue, says nothing).  A peer silent both ways is slow
        or gone, and RAET mode, dearer per message, would only add to the load of a busy
        one (docs/road.md, "Falling back")."""
        heard = self.raet_heard_at
        return heard is not None and heard + _RAET_GRACE <= now

    def _fallback_due(self, count: int, now: float) -> bool:
        """Whether to fall back now, at a probe timeout (``count`` in a row): past
        ``fast_fallback_probes`` or ``fast_fallback_after`` with nothing acknowledged, and
        the peer answers RAET.  When it has not since, a RAET alive asks it (once per
        probe timeout at most), and the next probe timeout, or its answer, decides."""
        config = self.stack.config
        if self.answered or self.unanswered_since is None:
            return False
        by_count = 0 < config.fast_fallback_probes <= count
        after = config.fast_fallback_after
        by_time = after > 0 and self.unanswered_since + after <= now
        if not (by_count or by_time):
            return False
        if self._raet_answers(now):
            return by_count
        if (self.raet_heard_at is None and self.stack._ask_raet_alive(self.remote)
                and self.raet_asked_at is None):
            self.raet_asked_at = now
        return False

    def handle_timer(self, now: float) -> str | None:
        """Losses by time, probe timeouts and expiries; why to fall back to RAET mode, if so."""
        fallback = self.fallback_deadline()
        if fallback is not None and fallback <= now:
            return f"no fast datagram acknowledged in {self.stack.config.fast_fallback_after:g} s"
        recovery, sending = self.recovery, self.sending
        if self.ping.open():
            self._ping_timer(now)
        if recovery.loss_time is not None and recovery.loss_time <= now:
            self._lost(recovery.detect_losses(now))
        probe = None if self.paused else recovery.probe_deadline()
        if probe is not None and probe <= now:
            reason = self._probe_timeout(now)
            if reason is not None:
                return reason
        if sending.messages and sending.expiry_check <= now:
            sending.expire_in_flight(now)
        if sending.outbox_expiry <= now:
            sending.outbox_expiry = self.stack._expire_queued(self.remote, now)
        if self.receiving.partials and self.receiving.partials_check <= now:
            self.receiving.sweep_partials(now)
        return None

    def _ping_timer(self, now: float) -> None:
        """The presence check's timeout ("no answer to alive", as the Aliver's) or redo."""
        ping = self.ping
        if ping.timeout_at <= now:
            if ping.first >= 0 and self.heard_at >= ping.sent_at:
                # no ack of a ping, but authenticated datagrams from the peer since the
                # first went: it is there (each one was presence, _heard), only late to
                # answer (a busy loop); no verdict, and the link stays proven
                ping.clear()
                return
            ping.lapse()  # (the next checks: RAET alives and trials, till one answers)
            if ping.verdict:
                self.stack._presence(self.remote, alive=False, reason="no answer to alive")
        elif ping.redo_at <= now:
            ping.interval = min(ping.interval * 2.0, ping.redo_max)
            ping.redo_at = now + ping.interval
            ping.wanted = True

    def _probe_timeout(self, now: float) -> str | None:
        """The oldest datagram went unacknowledged too long; why to fall back, if so.

        Unanswered since the keys came, past ``fast_fallback_probes``: fall
        back.  Past ``max_redos``: the remote is dead (paused).  Else probe.
        """
        recovery, config = self.recovery, self.stack.config
        count = recovery.timed_out()
        if self._fallback_due(count, now):
            return f"{count} fast-mode probes unanswered"
        if count > config.max_redos:
            self.pause()
            self.stack._presence(self.remote, alive=False,
                                 reason="fast-mode datagrams not acknowledged")
            return None
        self._again([recovery.probe(now)])
        return None

    # -- the end -----------------------------------------------------------------------
    def take_back(self) -> list[Outgoing]:
        """Every message in the stream, in order, and the link emptied (fallback)."""
        self.recovery.forget()
        self.receiving.release_partials()
        return self.sending.take_back()

    def give_back(self, reason: str) -> None:
        """Return every message in the stream as MessageExpired (close, removal)."""
        self.recovery.forget()
        self.receiving.release_partials()
        self.sending.give_back(reason)
