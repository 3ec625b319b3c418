"""What every SP endpoint holds: its name, framing, hop limit, counters, id sequence and outbox."""

from __future__ import annotations

import logging
import random
from typing import Any

from raetlike.errors import PacketError
from raetlike.sp._channel import Channel, Outgoing, Payload
from raetlike.sp._framing import Framing, decode
from raetlike.sp._ids import IdSequence, default_rng
from raetlike.sp._stats import SpStats

__all__ = ["SpEndpoint", "count_packet_error"]

logger = logging.getLogger(__name__)


def count_packet_error(stats: SpStats, error: PacketError) -> None:
    """Count a payload that did not decode under the right reason."""
    if error.reason == "ttl-exceeded":
        stats.ttl_exceeded += 1
    else:
        stats.malformed += 1


class SpEndpoint:
    """The plumbing REQ, SURVEYOR, REP and RESPONDENT share; subclasses add the pattern."""

    __slots__ = ("_ids", "_outbox", "framing", "max_hops", "name", "raw", "stats")

    def __init__(
        self,
        *,
        name: str,
        raw: bool,
        framing: Framing,
        max_hops: int,
        rng: random.Random | None,
        request_ids: bool,
    ) -> None:
        """An endpoint with nothing queued; ``request_ids`` picks the id space it hands out."""
        self.name = name
        self.raw = raw
        self.framing = framing
        self.max_hops = max_hops
        self.stats = SpStats()
        self._ids = IdSequence(rng or default_rng(), request_ids=request_ids)
        self._outbox: list[Outgoing] = []

    def messages_to_send(self) -> list[Outgoing]:
        """Take the queued payloads."""
        batch, self._outbox = self._outbox, []
        return batch

    def _decode(self, channel: Channel, payload: Payload) -> tuple[list[int], Any] | None:
        """The tag stack and body of ``payload``, or None (counted) when it does not decode."""
        try:
            return decode(self.framing, payload, self.max_hops)
        except PacketError as error:
            count_packet_error(self.stats, error)
            logger.debug("%s: dropped a payload from %s: %s", self.name, channel.name, error)
            return None
