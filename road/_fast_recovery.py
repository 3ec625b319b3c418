"""Fast mode, loss recovery: our datagrams in flight, until acknowledged, lost or forgotten.

:class:`LossRecovery` keeps a record of each ack-eliciting datagram, settles
them as the peer's ack ranges arrive, finds losses by NewReno's packet and
time thresholds, times probes, and owns the congestion controller
(road/_fast_control.py) that all of these feed.  It hands the chunks of
acked datagrams and of lost ones back to its caller (road/_fast_link.py),
which gives them to the send stream: recovery never sees a message.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from road._fast_control import CongestionControl
from road._fast_send import Carried

__all__ = ["LossRecovery", "Sent"]

_MAX_PROBE_INTERVAL = 0.5
_PROBED = 64  # datagrams forgotten by probes whose late ack still counts (LossRecovery.probed)

# a datagram awaiting its ack: (sent at, size, chunks it carried, abandons it carried)
Sent = tuple[float, int, list[Carried], list[int]]


class LossRecovery:
    """The ack-eliciting datagrams in flight with one remote, and the window they fill."""

    __slots__ = ("ack_delay", "acked_probed", "control", "datagram_size", "floor",
                 "largest_acked", "last_eliciting", "loss_time", "probe_count", "probed",
                 "probes", "sent", "upto")

    def __init__(self, datagram_size: int, max_window: int, ack_delay: float,
                 initial_window: int = 0) -> None:
        self.datagram_size = datagram_size
        self.ack_delay = ack_delay  # how long the peer may hold an ack (as we do)
        self.control = CongestionControl(datagram_size, max_window, initial_window)
        self.sent: dict[int, Sent] = {}
        self.floor = 0  # no packet below this one awaits its ack (see first_sent)
        self.upto = 0  # no packet at or above this one was sent under these keys
        self.largest_acked = -1
        self.last_eliciting = 0.0
        self.loss_time: float | None = None
        self.probes = 0  # datagrams that may go now whatever the window (after a probe timeout)
        self.probe_count = 0  # probe timeouts in a row
        # the latest datagrams a probe forgot (number -> sent at), at most _PROBED: an ack
        # of one still says the peer answers, and how slowly (its chunks went again)
        self.probed: dict[int, float] = {}
        self.acked_probed = False  # the latest ack covered one of them

    # -- sending -----------------------------------------------------------------------
    def may_send(self, now: float) -> bool:
        """Whether the window and the pacing let a data datagram go now."""
        if self.probes:
            return True
        control = self.control
        return control.can_send(self.datagram_size) and control.pace_next <= now

    def send_time(self, now: float) -> float | None:
        """When a data datagram may go (None: not until an ack opens the window)."""
        if self.probes:
            return now
        control = self.control
        if not control.can_send(self.datagram_size):
            return None
        return max(control.pace_next, now)

    def on_sent(self, number: int, now: float, size: int, chunks: list[Carried],
                abandons: list[int]) -> None:
        """Packet ``number`` (``size`` bytes) left carrying ``chunks`` and ``abandons``."""
        self.sent[number] = (now, size, chunks, abandons)
        self.upto = number + 1
        self.control.on_sent(size, now)
        self.last_eliciting = now
        if self.probes:
            self.probes -= 1

    # -- acks and losses ---------------------------------------------------------------
    def first_sent(self) -> int:
        """The lowest packet number awaiting its ack (upto when none does).

        A pointer moved forward lazily, as ``SendStream.oldest_in_flight`` is.
        """
        sent, first, upto = self.sent, self.floor, self.upto
        while first < upto and first not in sent:
            first += 1
        self.floor = first
        return first

    def on_ack(self, ranges: list[tuple[int, int]], now: float) -> list[list[Carried]]:
        """The peer acknowledged ``ranges`` (highest first, all below what we sent).

        Returns what the newly acked datagrams carried, in the order acked.
        """
        sent = self.sent
        largest = ranges[0][1]
        control = self.control
        newest: Sent | None = None
        acked: list[list[Carried]] = []
        for first, last in ranges:
            if not sent:
                break
            low = max(first, self.first_sent())
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
                acked.append(chunks)
        self.largest_acked = max(self.largest_acked, largest)
        probed = self.probed
        self.acked_probed = False
        if probed:
            # A peer slower to ack than the probe timeout acks datagrams a probe forgot:
            # uncounted, it was "not acknowledged" after max_redos probes (thousands of
            # links of a loaded worker) and a link never acked fell back to RAET mode.
            # (each number found by bisection: an ack's ranges cost log(ranges) a number,
            # not the ranges times the 64 numbers kept)
            spans = sorted(ranges)
            lows = [low for low, _ in spans]
            for number in [n for n in probed
                           if (at := bisect_right(lows, n) - 1) >= 0 and n <= spans[at][1]]:
                sent_at = probed.pop(number)
                self.acked_probed = True
                if number == largest and newest is None:
                    newest = (sent_at, 0, [], [])
        if newest is not None:  # (a round trip only from the largest, when it was tracked)
            control.sample(now - newest[0])
        if acked or self.acked_probed:  # anything newly acked ends the back-off, also
            self.probe_count = 0  # when the largest was a ping (untracked: FastLink's Ping)
            self.probes = 0  # sent after the data
        return acked

    def detect_losses(self, now: float) -> list[Sent]:
        """The datagrams now counted lost (removed; the window cut), and the next loss time."""
        self.loss_time = None
        sent = self.sent
        if not sent:
            return []
        control = self.control
        delay = control.loss_delay(control.smoothed_rtt)
        largest = self.largest_acked
        lost: list[int] = []
        number = self.first_sent()
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
        gone = []
        for number in lost:
            packet = sent.pop(number)
            control.on_lost(packet[1], packet[0], now)
            gone.append(packet)
        return gone

    # -- probes ------------------------------------------------------------------------
    def probe_deadline(self) -> float | None:
        """When the oldest unacknowledged datagram is probed (None: nothing in flight).

        The probe timeout doubles with each probe up to ``_MAX_PROBE_INTERVAL``, but never
        below the timeout itself: a peer whose acks take longer than that (a busy worker of
        thousands of estates on loopback) was probed every 0.5 s, each probe more work for
        it, and the probes of thousands of links filled their receive buffers.
        """
        if not self.sent:
            return None
        base = self.control.probe_timeout(self.ack_delay)
        backoff = float(1 << min(self.probe_count, 16))
        return self.last_eliciting + min(base * backoff, max(base, _MAX_PROBE_INTERVAL))

    def timed_out(self) -> int:
        """The probe deadline passed unanswered: how many times in a row now."""
        self.probe_count += 1
        return self.probe_count

    def probe(self, now: float) -> Sent:
        """A probe timeout: the oldest datagram is forgotten (to go again, as if lost but
        without a window cut) and two datagrams may go whatever the window."""
        if self.probe_count >= 3:
            self.control.collapse()
        number = self.first_sent()
        packet = self.sent.pop(number)
        self.control.on_forgotten(packet[1])
        probed = self.probed
        probed[number] = packet[0]
        if len(probed) > _PROBED:
            del probed[next(iter(probed))]
        self.probes = 2
        self.last_eliciting = now
        return packet

    # -- starting over -----------------------------------------------------------------
    def forget(self) -> list[Sent]:
        """Every datagram in flight is history (the remote went silent, or new keys)."""
        control = self.control
        forgotten = list(self.sent.values())
        for packet in forgotten:
            control.on_forgotten(packet[1])
        self.sent.clear()
        self.probed.clear()
        self.loss_time = None
        self.probe_count = 0
        self.probes = 0
        return forgotten

    def new_keys(self) -> list[Sent]:
        """New session keys: packet numbers start again at 0; what was in flight is returned."""
        forgotten = self.forget()
        self.floor = self.upto = 0
        self.largest_acked = -1
        return forgotten

    def resume(self) -> None:
        """The remote answers again after silence: start from a small window."""
        self.probe_count = 0
        self.control.collapse()
