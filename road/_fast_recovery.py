"""Fast mode, recovery: the peer's acks settle messages; lost datagrams' chunks go again.

Loss detection follows NewReno's packet and time thresholds (see
road/_fast_control.py); a lost or forgotten datagram's unacked chunks and
abandons return to the queues of road/_fast_send.py.
"""

from __future__ import annotations

from typing import Any

from road import events
from road._fast_send import Carried, Sending, Sent
from road._fast_state import LinkState
from road.stats import Drop

__all__ = ["RecoverySide"]


class RecoverySide(LinkState):
    """The link's datagrams in flight: acked, lost or forgotten."""

    def _forget_sent(self) -> None:
        """Every datagram in flight is history: its unacked chunks and abandons go again."""
        for _, size, chunks, abandons in self.sent.values():
            self.control.on_forgotten(size)
            self._requeue(chunks, abandons)
        self.sent.clear()
        self.loss_time = None
        self.probe_count = 0
        self.probes = 0

    def _requeue(self, chunks: list[Carried], abandons: list[int]) -> None:
        for item in chunks:
            sending, index = item if isinstance(item, tuple) else (item, 0)
            if not sending.acked[index] and sending.number in self.messages:
                self.again.append((sending, index))
        self.abandons.extend(abandons)

    def _first_sent(self) -> int:
        """The lowest packet number awaiting its ack (next_packet when none does).

        A pointer moved forward lazily, as ``SendingSide._oldest`` is.
        """
        sent, first, upto = self.sent, self.sent_floor, self.next_packet
        while first < upto and first not in sent:
            first += 1
        self.sent_floor = first
        return first

    def _on_ack(self, ranges: list[tuple[int, int]], now: float) -> None:
        sent = self.sent
        largest = ranges[0][1]
        if largest >= self.next_packet:
            self.stack.stats.drop(Drop.INVALID_BODY)
            return
        self.answered = True
        self.unanswered_since = None
        control = self.control
        newest: Sent | None = None
        done: list[Sending] = []
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
            name, sent_event = self.remote.name, events.MessageSent
            stack._emit_all([sent_event(name, sending.outgoing.message_id) for sending in done])
        self.largest_acked = max(self.largest_acked, largest)
        if newest is not None:
            control.sample(now - newest[0])
            self.probe_count = 0
            self.probes = 0
        self._detect_losses(now)

    def _settle(self, chunks: list[Carried], done: list[Sending]) -> None:
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
            self.remote.traffic.resends += 1
