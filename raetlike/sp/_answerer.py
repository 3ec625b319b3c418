"""The receiving side shared by REP and RESPONDENT: channel ids, fair queueing, backtraces.

Each channel gets a 31-bit id (random first id per start, then increment with
wrap).  An incoming message has that id pushed in front of its tag stack; an
answer pops the front id to find its channel.  Nothing per message is kept,
so a device built on a raw endpoint holds no routing table.
"""

from __future__ import annotations

import logging
import random
from collections import Counter, deque
from typing import Any

from raetlike.errors import LocalProtocolError
from raetlike.sp._channel import Channel, Outgoing, Payload
from raetlike.sp._endpoint import SpEndpoint
from raetlike.sp._framing import Framing, carries, encode
from raetlike.wire.tags import DEFAULT_MAX_HOPS, Backtrace

__all__ = ["Answerer"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUED = 128
"""Most unread incoming messages kept per channel."""


class Answerer(SpEndpoint):
    """Takes in tagged messages from many channels and sends answers back along them."""

    __slots__ = ("_by_id", "_ids_by_name", "_outstanding", "_queues", "_ready", "max_queued")

    def __init__(
        self,
        *,
        name: str,
        raw: bool = False,
        framing: Framing = Framing.BYTES,
        max_hops: int = DEFAULT_MAX_HOPS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        rng: random.Random | None = None,
    ) -> None:
        """An endpoint with no channels yet; ``raw`` for devices (no per-message state)."""
        super().__init__(
            name=name, raw=raw, framing=framing, max_hops=max_hops, rng=rng, request_ids=False
        )
        self.max_queued = max_queued
        self._by_id: dict[int, Channel] = {}
        self._ids_by_name: dict[str, int] = {}
        self._queues: dict[int, deque[tuple[Backtrace, Any]]] = {}
        self._ready: deque[int] = deque()
        self._outstanding: Counter[Backtrace] = Counter()

    # channels

    def add_channel(self, channel: Channel) -> int:
        """Take ``channel`` in; returns the channel id pushed on what comes in on it."""
        if channel.name in self._ids_by_name:
            raise LocalProtocolError(f"a channel named {channel.name!r} is already here")
        channel_id = self._ids.take(self._by_id)
        self._by_id[channel_id] = channel
        self._ids_by_name[channel.name] = channel_id
        self._queues[channel_id] = deque()
        return channel_id

    def remove_channel(self, channel: Channel) -> None:
        """Forget ``channel``; its unread messages go, and answers for it will be dropped."""
        channel_id = self._ids_by_name.pop(channel.name, None)
        if channel_id is None:
            return
        del self._by_id[channel_id]
        del self._queues[channel_id]
        if channel_id in self._ready:
            self._ready.remove(channel_id)

    def channel_id(self, channel: Channel) -> int | None:
        """The id given to ``channel``, or None if it is not here."""
        return self._ids_by_name.get(channel.name)

    # incoming

    def receive(self, channel: Channel, payload: Payload, now: float) -> None:  # noqa: ARG002
        """Take one payload in from ``channel``; garbage is dropped and counted."""
        channel_id = self._ids_by_name.get(channel.name)
        if channel_id is None:
            self.stats.unknown_channel += 1
            return
        decoded = self._decode(channel, payload)
        if decoded is None:
            return
        stack, body = decoded
        queue = self._queues[channel_id]
        if len(queue) >= self.max_queued:
            self.stats.overflow += 1
            return
        self.stats.received += 1
        if not queue:
            self._ready.append(channel_id)
        queue.append((Backtrace.from_tags(stack).push(channel_id), body))

    def take(self) -> tuple[Backtrace, Any, str] | None:
        """The next unread message, round-robin over channels that have one."""
        if not self._ready:
            return None
        channel_id = self._ready.popleft()
        queue = self._queues[channel_id]
        backtrace, body = queue.popleft()
        if queue:
            self._ready.append(channel_id)
        if not self.raw:
            self._outstanding[backtrace] += 1
        return backtrace, body, self._by_id[channel_id].name

    def pending(self) -> int:
        """How many messages wait to be taken."""
        return sum(len(queue) for queue in self._queues.values())

    # answers

    def answer(self, backtrace: Backtrace, body: Any) -> None:
        """Send ``body`` back along ``backtrace``: pop the front channel id, send on it.

        A cooked endpoint answers only what it handed out and not yet answered
        or cancelled, with a body its framing carries (LocalProtocolError
        otherwise, and the message stays outstanding).  A raw endpoint (a
        device's front) passes on bodies a peer chose: one its framing cannot
        carry is dropped and counted (``stats.malformed``), as is an answer
        whose channel is gone (``stats.vanished_channel``).
        """
        if not self.raw:
            if not self._outstanding[backtrace]:
                del self._outstanding[backtrace]
                raise LocalProtocolError("not an outstanding message of this endpoint")
            if not carries(self.framing, body):
                raise LocalProtocolError(
                    f"the {self.framing.value} framing cannot carry a {type(body).__name__} body")
            self._forget(backtrace)
        elif not carries(self.framing, body):
            self.stats.malformed += 1
            logger.debug("%s: dropped an answer whose body the %s framing cannot carry",
                         self.name, self.framing.value)
            return
        if not backtrace.channels:
            self.stats.malformed += 1
            return
        channel_id, rest = backtrace.pop()
        channel = self._by_id.get(channel_id)
        if channel is None:
            self.stats.vanished_channel += 1
            logger.debug("%s: channel %#x is gone; answer dropped", self.name, channel_id)
            return
        payload = encode(self.framing, rest.tags, body)
        self._outbox.append(Outgoing(channel, payload, rest))
        self.stats.sent += 1

    def cancel(self, backtrace: Backtrace) -> bool:
        """Give up on answering a message handed out; True if it was outstanding."""
        if self.raw or not self._outstanding[backtrace]:
            self._outstanding.pop(backtrace, None)
            return False
        self._forget(backtrace)
        self.stats.cancelled += 1
        return True

    def _forget(self, backtrace: Backtrace) -> None:
        """One fewer outstanding copy of ``backtrace``."""
        self._outstanding[backtrace] -= 1
        if not self._outstanding[backtrace]:
            del self._outstanding[backtrace]

    def outstanding(self) -> int:
        """How many handed-out messages wait for an answer (always 0 when raw)."""
        return self._outstanding.total()

    # sending

    def refused(self, outgoing: Outgoing, now: float) -> None:  # noqa: ARG002
        """A channel would not take an answer: it is lost (the requester will resend)."""
        self.stats.refused += 1
