"""The channel: what the SP endpoints talk to instead of a socket.

A channel is one peer as the messaging layer sees it: a remote estate on the
road, a remote yard on a lane, or an in-memory pipe in tests.  Endpoints never
call :meth:`Channel.send` themselves; they queue :class:`Outgoing` pairs that
the caller takes and sends (see :func:`flush`), and the caller reports a send
the channel would not take back with ``refused``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from raetlike.errors import RaetError
from raetlike.wire.tags import Backtrace

__all__ = ["Payload", "Channel", "Outgoing", "Sender", "flush"]

logger = logging.getLogger(__name__)

Payload: TypeAlias = bytes | Mapping[str, Any]
"""What a channel carries: tag bytes then body bytes, or a RAET-mode mapping."""


class Channel(Protocol):
    """One peer of an endpoint; the road/lane adapters implement this."""

    @property
    def name(self) -> str:
        """A name unique among the channels of one endpoint (e.g. the remote's name)."""
        ...

    @property
    def priority(self) -> int:
        """Lower numbers are tried first (nng style); equal priorities share round-robin."""
        ...

    @property
    def alive(self) -> bool:
        """False while the peer is known to be unreachable; such channels are skipped."""
        ...

    def send(self, payload: Payload) -> bool:
        """Queue ``payload`` to the peer; False (or BackpressureError) if it cannot take it."""
        ...


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One payload an endpoint wants sent on one channel."""

    channel: Channel
    """Where to send it."""
    payload: Payload
    """What to send, already framed."""
    backtrace: Backtrace
    """The tag stack inside ``payload`` (the request or survey id is its last tag)."""
    tried: tuple[str, ...] = ()
    """Names of channels that already refused this payload (so a retry goes elsewhere)."""


class Sender(Protocol):
    """An endpoint whose outgoing payloads :func:`flush` can send."""

    def messages_to_send(self) -> list[Outgoing]:
        """Take the queued outgoing payloads."""
        ...

    def refused(self, outgoing: Outgoing, now: float) -> None:
        """Tell the endpoint that ``outgoing.channel`` would not take ``outgoing``."""
        ...


def flush(endpoint: Sender, now: float) -> int:
    """Send everything ``endpoint`` has queued; report refusals back. Returns sends done."""
    sent = 0
    while batch := endpoint.messages_to_send():
        for outgoing in batch:
            try:
                accepted = outgoing.channel.send(outgoing.payload)
            except RaetError as error:  # full, or cannot carry it: refused, never raised
                logger.debug("channel %s: %s", outgoing.channel.name, error)
                accepted = False
            if accepted:
                sent += 1
            else:
                logger.debug("channel %s refused a payload", outgoing.channel.name)
                endpoint.refused(outgoing, now)
    return sent
