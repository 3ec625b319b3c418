"""Fast-mode bookkeeping: replay window, ack ranges, RTT, NewReno and pacing.

All pure state machines driven by the caller's ``now``; see docs/road.md,
"Fast mode", for the algorithm and its constants.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CongestionControl", "ReceivedRanges", "ReplayWindow"]

REPLAY_WINDOW = 4096  # packet numbers behind the highest still accepted (once)
INITIAL_RTT = 0.1
GRANULARITY = 0.001
PACKET_THRESHOLD = 3
TIME_THRESHOLD = 9 / 8
INITIAL_WINDOW_DATAGRAMS = 10  # the least initial window, whatever the setting (RFC 9002)
MINIMUM_WINDOW_DATAGRAMS = 2


class ReplayWindow:
    """A sliding seen-window over 64-bit packet numbers (a bit per number, an int as bitmap).

    ``fresh`` asks before opening (cheap); ``mark`` records after the AEAD
    opened, so forged numbers can never move the window.
    """

    __slots__ = ("bits", "highest", "size")

    def __init__(self, size: int = REPLAY_WINDOW) -> None:
        self.size = size
        self.highest = -1
        self.bits = 0  # bit i: highest - i seen

    def fresh(self, number: int) -> bool:
        """False for a number seen already or too far behind the highest."""
        if number > self.highest:
            return True
        behind = self.highest - number
        return behind < self.size and not (self.bits >> behind) & 1

    def mark(self, number: int) -> None:
        """Record ``number`` as seen (it must be fresh)."""
        if number > self.highest:
            shift = number - self.highest
            self.bits = ((self.bits << shift) | 1) & ((1 << self.size) - 1) if shift < self.size \
                else 1
            self.highest = number
        else:
            self.bits |= 1 << (self.highest - number)


class ReceivedRanges:
    """Packet numbers to acknowledge, as inclusive ranges, trimmed to the replay window."""

    __slots__ = ("ranges", "size")

    def __init__(self, size: int = REPLAY_WINDOW) -> None:
        self.size = size
        self.ranges: list[list[int]] = []  # ascending [first, last]

    def add(self, number: int) -> None:
        """Record one received packet number."""
        ranges = self.ranges
        if not ranges or number > ranges[-1][1] + 1:
            ranges.append([number, number])
        elif number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            self._insert(number)
        floor = ranges[-1][1] - self.size
        if ranges[0][1] < floor or len(ranges) > 64:
            self.ranges = [r for r in ranges[-64:] if r[1] >= floor]
        self.ranges[0][0] = max(self.ranges[0][0], floor)

    def _insert(self, number: int) -> None:
        ranges = self.ranges
        for position in range(len(ranges) - 1, -1, -1):
            first, last = ranges[position]
            if first <= number <= last:
                return
            if number == last + 1:
                ranges[position][1] = number
                if position + 1 < len(ranges) and ranges[position + 1][0] == number + 1:
                    ranges[position][1] = ranges[position + 1][1]
                    del ranges[position + 1]
                return
            if number == first - 1:
                if position and ranges[position - 1][1] >= number - 1:
                    # it joins the range below too (one range: an ACK frame's ranges
                    # never overlap, or the peer refuses them; road/_fast_wire.py)
                    ranges[position - 1][1] = last
                    del ranges[position]
                else:
                    ranges[position][0] = number
                return
            if number > last:
                ranges.insert(position + 1, [number, number])
                return
        ranges.insert(0, [number, number])

    def highest_first(self) -> list[tuple[int, int]]:
        """The ranges for an ACK frame, most recent first."""
        return [(first, last) for first, last in reversed(self.ranges)]


@dataclass(slots=True)
class CongestionControl:
    """NewReno over bytes in flight (RFC 9002's adaptation), with RTT estimates and pacing."""

    datagram_size: int
    max_window: int
    initial_window: int = 0
    """Bytes the first flight may carry before any ack (at least 10 datagrams)."""
    window: int = 0
    threshold: float = float("inf")
    in_flight: int = 0
    recovery_start: float = -1.0
    smoothed_rtt: float = INITIAL_RTT
    rtt_variance: float = INITIAL_RTT / 2
    min_rtt: float = 0.0
    has_sample: bool = False
    pace_next: float = float("-inf")

    def __post_init__(self) -> None:
        self.window = min(self.max_window,
                          max(self.initial_window, INITIAL_WINDOW_DATAGRAMS * self.datagram_size))

    # -- RTT ---------------------------------------------------------------------
    def sample(self, rtt: float) -> None:
        """One RTT sample from the newest packet an ack covered."""
        rtt = max(rtt, 1e-6)
        if not self.has_sample:
            self.has_sample = True
            self.min_rtt = self.smoothed_rtt = rtt
            self.rtt_variance = rtt / 2
            return
        self.min_rtt = min(self.min_rtt, rtt)
        self.rtt_variance = 0.75 * self.rtt_variance + 0.25 * abs(self.smoothed_rtt - rtt)
        self.smoothed_rtt = 0.875 * self.smoothed_rtt + 0.125 * rtt

    def probe_timeout(self, ack_delay: float) -> float:
        """RFC 9002's PTO: srtt + max(4 rttvar, granularity) + the peer's ack delay."""
        return self.smoothed_rtt + max(4 * self.rtt_variance, GRANULARITY) + ack_delay

    def loss_delay(self, latest_rtt: float) -> float:
        """How long after a later packet was acked an earlier one counts as lost."""
        return max(TIME_THRESHOLD * max(self.smoothed_rtt, latest_rtt), GRANULARITY)

    # -- window ------------------------------------------------------------------
    def can_send(self, size: int) -> bool:
        """Whether ``size`` more bytes fit the window."""
        return self.in_flight + size <= self.window

    def on_sent(self, size: int, now: float) -> None:
        """A datagram that counts in flight went out: charge the window and the pacer.

        Before the first RTT sample the window alone bounds what goes: the
        initial window leaves as one flight, unpaced (a pace from the guessed
        100 ms would spread it over tens of milliseconds on a LAN).
        """
        self.in_flight += size
        if not self.has_sample:
            return
        rate_window = max(self.window, self.datagram_size)
        gain = 2.0 if self.window < self.threshold else 1.25
        interval = self.smoothed_rtt * size / (rate_window * gain)
        burst = 10 * self.smoothed_rtt * self.datagram_size / (rate_window * gain)
        self.pace_next = max(self.pace_next, now - burst) + interval

    def on_acked(self, size: int, sent_at: float) -> None:
        """A datagram was acknowledged: slow start or congestion avoidance."""
        self.in_flight = max(0, self.in_flight - size)
        if sent_at <= self.recovery_start:
            return
        if self.window < self.threshold:
            self.window += size
        else:
            self.window += max(1, self.datagram_size * size // self.window)
        self.window = min(self.window, self.max_window)

    def on_lost(self, size: int, sent_at: float, now: float) -> None:
        """A datagram was declared lost: halve once per round trip (NewReno recovery)."""
        self.in_flight = max(0, self.in_flight - size)
        if sent_at <= self.recovery_start:
            return
        self.recovery_start = now
        window = max(self.window // 2, MINIMUM_WINDOW_DATAGRAMS * self.datagram_size)
        self.threshold = float(window)
        self.window = window

    def on_forgotten(self, size: int) -> None:
        """A datagram no longer counts (rekey, pause) without saying anything about the path."""
        self.in_flight = max(0, self.in_flight - size)

    def collapse(self) -> None:
        """Persistent congestion (probe timeouts in a row): back to the minimum window."""
        self.window = MINIMUM_WINDOW_DATAGRAMS * self.datagram_size
