"""Fast mode, time: a link's deadlines and what fires at them.

Losses by time, probe timeouts (and, past ``max_redos``, the remote declared
dead), the fallback to RAET mode when the peer never acknowledges, and the
time to live of messages in flight and still queued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from road._fast_state import LinkState

if TYPE_CHECKING:
    pass

__all__ = ["TimersSide"]

_MAX_PROBE_INTERVAL = 0.5


class TimersSide(LinkState):
    """The link's clock: when it wants ``handle_timer`` (or to send), and what that does."""

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
        if self.partials and (earliest is None or self.partials_check < earliest):
            earliest = self.partials_check
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
        if self.partials and self.partials_check <= now:
            self.sweep_partials(now)

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
        self.outbox_expiry = self.stack._expire_queued(self.remote, now)
