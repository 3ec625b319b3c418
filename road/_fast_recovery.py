"""Fast mode, loss recovery: our datagrams in flight, until acknowledged, lost or forgotten.

:class:`LossRecovery` keeps a record of each ack-eliciting datagram, settles
them as the peer's ack ranges arrive, finds losses by NewReno's packet and
time thresholds, times probes, and owns the congestion controller
(road/_fast_control.py) that all of these feed.  It hands the chunks of
acked datagrams and of lost ones back to its caller (road/_fast_link.py),
which gives them to the send stream: recovery never sees a message.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from road._fast_control import CongestionControl
from road._fast_send import Carried

__all__ = ["LossRecovery", "Sent"]

_MAX_PROBE_INTERVAL = 0.5
_PROBED = 64  # datagrams forgotten by probes whose late ack still counts (LossRecovery.probed)

# a datagram awaiting its ack: (sent at, size, chunks it carried, abandons it carried)
Sent = tuple[float, int, list[Carried], list[int]]


class LossRecovery:
    """The ack-eliciting datagrams in flight with one remote, and the window they fill."""

    __slots__ = ("ack_delay", "acked_probed", "control", "datagram_size",
                 "largest_acked", "last_eliciting", "loss_time", "probe_count", "probed",
                 "probes", "sent", "sent_numbers", "upto")

    def __init__(self, datagram_size: int, max_window: int, ack_delay: float,
                 initial_window: int = 0) -> None:
        self.datagram_size = datagram_size
        self.ack_delay = ack_delay  # how long the peer may hold an ack (as we do)
        self.control = CongestionControl(datagram_size, max_window, initial_window)
        self.sent: dict[int, Sent] = {}
        # the keys of sent, ascending (packet numbers only grow, and what leaves sent
        # leaves as a run of this list: a prefix when lost or probed, a bisected slice
        # when acked), so an ack range finds what it covers in O(log n)
        self.sent_numbers: list[int] = []
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
        self.sent_numbers.append(number)
        self.upto = number + 1
        self.control.on_sent(size, now)
        self.last_eliciting = now
        if self.probes:
            self.probes -= 1

    # -- acks and losses ---------------------------------------------------------------
    def first_sent(self) -> int:
        """The lowest packet number awaiting its ack (upto when none does)."""
        sent_numbers = self.sent_numbers
        return sent_numbers[0] if sent_numbers else self.upto

    def on_ack(self, ranges: list[tuple[int, int]], now: float) -> list[list[Carried]]:
        """The peer acknowledged ``ranges`` (highest first, all below what we sent).

        Returns what the newly acked datagrams carried, in the order acked.  Each
        range costs two bisections of what is in flight, whatever it spans, and then
        only the datagrams it newly acknowledges (a range covering none, below,
        between or above them, costs no walk).
        """
        sent, sent_numbers = self.sent, self.sent_numbers
        largest = ranges[0][1]
        control = self.control
        newest = sent.get(largest)  # (in flight: the first range acknowledges it below)
        acked: list[list[Carried]] = []
        for first, last in ranges:
            if not sent_numbers:
                break
            start = bisect_left(sent_numbers, first)
            stop = bisect_right(sent_numbers, last, start)
            if start == stop:
                continue
            for number in sent_numbers[start:stop]:
                sent_at, size, chunks, _ = sent.pop(number)
                control.on_acked(size, sent_at)
                acked.append(chunks)
            del sent_numbers[start:stop]
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
        sent, sent_numbers = self.sent, self.sent_numbers
        if not sent:
            return []
        control = self.control
        delay = control.loss_delay(control.smoothed_rtt)
        largest = self.largest_acked
        count = 0  # the lost ones are the oldest in flight: a prefix of sent_numbers
        for number in sent_numbers:
            if number > largest:
                break
            packet = sent[number]
            # packet[0] + delay is the loss time this method sets: compare that same sum
            if number < largest - 2 or packet[0] + delay <= now:
                count += 1
            else:
                self.loss_time = packet[0] + delay
                break
        gone = []
        for number in sent_numbers[:count]:
            packet = sent.pop(number)
            control.on_lost(packet[1], packet[0], now)
            gone.append(packet)
        del sent_numbers[:count]
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
        number = self.sent_numbers.pop(0)
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
        self.sent_numbers.clear()
        self.probed.clear()
        self.loss_time = None
        self.probe_count = 0
        self.probes = 0
        return forgotten

    def new_keys(self) -> list[Sent]:
        """New session keys: packet numbers start again at 0; what was in flight is returned."""
        forgotten = self.forget()
        self.upto = 0
        self.largest_acked = -1
        return forgotten

    def resume(self) -> None:
        """The remote answers again after silence: start from a small window."""
        self.probe_count = 0
        self.control.collapse()
