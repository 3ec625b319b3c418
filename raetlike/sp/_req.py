"""REQ: sends requests round-robin over channels, resends until a reply, drops strays.

Cooked (end to end): ``request(body, now)`` gives a request id; the answer
comes out of ``next_event()`` as :class:`Reply`.  Raw (a device's back):
``forward(backtrace, body, now)`` sends a stack as it is, and replies come out
as :class:`RawReply` with the rest of their stack; nothing is kept per message.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from raetlike.errors import BackpressureError, LocalProtocolError
from raetlike.sp._asker import Asker
from raetlike.sp._channel import Channel, Outgoing, Payload
from raetlike.sp._events import RawReply, Reply, RequestBlocked
from raetlike.sp._framing import Framing, carries, encode
from raetlike.wire.tags import DEFAULT_MAX_HOPS, Backtrace

__all__ = ["Req", "DEFAULT_RESEND_INTERVAL"]

logger = logging.getLogger(__name__)

DEFAULT_RESEND_INTERVAL = 60.0
"""Seconds before a request without a reply is sent again (nng's default)."""


@dataclass(slots=True)
class _Pending:
    """A request waiting for its reply."""

    payload: Payload
    """The framed request, sent again as it is."""
    backtrace: Backtrace
    """Its tag stack (just the request id)."""
    deadline: float
    """When to send it again."""
    channel_name: str | None
    """The channel it went out on last, None while no channel would take it."""


ReqEvent = Reply | RawReply | RequestBlocked


class Req(Asker[ReqEvent, _Pending]):
    """A requester endpoint; see the module docstring."""

    __slots__ = ("resend_interval",)

    def __init__(
        self,
        *,
        name: str,
        raw: bool = False,
        framing: Framing = Framing.BYTES,
        resend_interval: float = DEFAULT_RESEND_INTERVAL,
        max_hops: int = DEFAULT_MAX_HOPS,
        rng: random.Random | None = None,
    ) -> None:
        """A requester with no channels; ``rng`` seeds the first request id."""
        if resend_interval <= 0:
            raise LocalProtocolError("the resend interval must be positive")
        super().__init__(name=name, raw=raw, framing=framing, max_hops=max_hops, rng=rng)
        self.resend_interval = resend_interval

    # channels

    def remove_channel(self, channel: Channel, now: float) -> None:
        """Forget ``channel``; requests last sent on it go out again on another now."""
        if self._roster.remove(channel.name) is None:
            return
        for request_id, pending in self._open.items():
            if pending.channel_name == channel.name:
                self.stats.resent += 1
                self._dispatch(request_id, pending, now)

    # commands

    def request(self, body: Any, now: float) -> int:
        """Send a request; returns its id.  BackpressureError if no channel is alive."""
        if self.raw:
            raise LocalProtocolError("a raw REQ forwards stacks; use forward()")
        if next(self._roster.alive(), None) is None:
            self.stats.blocked += 1
            raise BackpressureError(f"{self.name}: no live channel for a request")
        request_id = self._ids.take(self._open)
        backtrace = Backtrace((), request_id)
        payload = encode(self.framing, backtrace.tags, body)
        pending = _Pending(payload, backtrace, now + self.resend_interval, None)
        self._open[request_id] = pending
        self._dispatch(request_id, pending, now)
        return request_id

    def forward(self, backtrace: Backtrace, body: Any, now: float) -> bool:  # noqa: ARG002
        """Raw: send ``body`` behind ``backtrace`` as is; False if dropped (counted).

        Dropped: a stack deeper than ``max_hops``, a body this framing cannot
        carry (``stats.malformed``), no live channel.
        """
        if not self.raw:
            raise LocalProtocolError("a cooked REQ makes its own stacks; use request()")
        if len(backtrace.tags) > self.max_hops:
            self.stats.ttl_exceeded += 1
            logger.debug("%s: dropped a request %d hops deep", self.name, backtrace.hops)
            return False
        if not carries(self.framing, body):
            # a device's front took in a body this framing cannot carry (a peer's choice)
            self.stats.malformed += 1
            logger.debug("%s: dropped a request whose body the %s framing cannot carry",
                         self.name, self.framing.value)
            return False
        channel = self._roster.pick()
        if channel is None:
            self.stats.blocked += 1
            return False
        self._send(Outgoing(channel, encode(self.framing, backtrace.tags, body), backtrace))
        return True

    # sending

    def _send(self, outgoing: Outgoing) -> None:
        """Queue ``outgoing`` for the caller."""
        self._outbox.append(outgoing)
        self.stats.sent += 1

    def _dispatch(
        self, request_id: int, pending: _Pending, now: float, tried: tuple[str, ...] = ()
    ) -> None:
        """Send a pending request on the next channel, or report backpressure."""
        pending.deadline = now + self.resend_interval
        channel = self._roster.pick(tried)
        pending.channel_name = None if channel is None else channel.name
        if channel is None:
            self.stats.blocked += 1
            self._events.append(RequestBlocked(request_id))
            return
        self._send(Outgoing(channel, pending.payload, pending.backtrace, tried))

    def refused(self, outgoing: Outgoing, now: float) -> None:
        """A channel would not take ``outgoing``: try the next one, else report backpressure."""
        self.stats.refused += 1
        tried = (*outgoing.tried, outgoing.channel.name)
        if self.raw:
            channel = self._roster.pick(tried)
            if channel is None:
                self.stats.blocked += 1
                return
            self._send(Outgoing(channel, outgoing.payload, outgoing.backtrace, tried))
            return
        request_id = outgoing.backtrace.request_id
        pending = self._open.get(request_id)
        if pending is not None:
            self._dispatch(request_id, pending, now, tried)

    # incoming

    def receive(self, channel: Channel, payload: Payload, now: float) -> None:  # noqa: ARG002
        """Take one reply in; strays, duplicates and garbage are dropped and counted."""
        answer = self._take_answer(channel, payload, RawReply)
        if answer is None:
            return
        request_id, body = answer
        if self._open.pop(request_id, None) is not None:
            self.stats.received += 1
            self._finish(request_id, normally=True)
            self._events.append(Reply(request_id, body))
        elif self._ended_normally(request_id):
            self.stats.duplicate += 1
        else:
            self.stats.stray += 1

    # timers

    def handle_timer(self, now: float) -> None:
        """Resend every request whose resend time has come."""
        for request_id, pending in list(self._open.items()):
            if pending.deadline <= now:
                self.stats.resent += 1
                self._dispatch(request_id, pending, now)
