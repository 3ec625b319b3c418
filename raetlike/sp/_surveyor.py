"""SURVEYOR: sends a survey to every channel and collects responses until its deadline.

Cooked: ``survey(body, now)`` gives a survey id; responses come out of
``next_event()`` as :class:`SurveyResponse` until the deadline, then one
:class:`SurveyDone`; later responses are dropped (counted as late).  Raw (a
device's back): ``forward(backtrace, body, now)`` sends a stack as it is to
every channel and responses come out as :class:`RawResponse`.
"""

from __future__ import annotations

import logging
import random
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.sp._answerer import count_packet_error
from raetlike.sp._channel import Channel, Outgoing, Payload
from raetlike.sp._events import RawResponse, SurveyDone, SurveyResponse
from raetlike.sp._framing import Framing, decode, encode
from raetlike.sp._ids import IdSequence, default_rng
from raetlike.sp._roster import Roster
from raetlike.sp._stats import SpStats
from raetlike.wire.tags import DEFAULT_MAX_HOPS, Backtrace

__all__ = ["Surveyor", "DEFAULT_SURVEY_TIME"]

logger = logging.getLogger(__name__)

DEFAULT_SURVEY_TIME = 60.0
"""Seconds a survey collects responses unless told otherwise."""

_REMEMBERED = 1024
"""How many finished survey ids are kept to tell late responses from strays."""


@dataclass(slots=True)
class _Open:
    """A survey collecting responses."""

    deadline: float
    """When it ends."""
    responses: int = 0
    """Responses so far."""


SurveyorEvent = SurveyResponse | SurveyDone | RawResponse


class Surveyor:
    """A surveyor endpoint; see the module docstring."""

    __slots__ = (
        "_events",
        "_finished",
        "_ids",
        "_open",
        "_outbox",
        "_roster",
        "framing",
        "max_hops",
        "name",
        "raw",
        "stats",
        "survey_time",
    )

    def __init__(
        self,
        *,
        name: str,
        raw: bool = False,
        framing: Framing = Framing.BYTES,
        survey_time: float = DEFAULT_SURVEY_TIME,
        max_hops: int = DEFAULT_MAX_HOPS,
        rng: random.Random | None = None,
    ) -> None:
        """A surveyor with no channels; ``rng`` seeds the first survey id."""
        if survey_time <= 0:
            raise LocalProtocolError("the survey time must be positive")
        self.name = name
        self.raw = raw
        self.framing = framing
        self.survey_time = survey_time
        self.max_hops = max_hops
        self.stats = SpStats()
        self._ids = IdSequence(rng or default_rng(), request_ids=True)
        self._roster = Roster()
        self._open: dict[int, _Open] = {}
        self._finished: OrderedDict[int, bool] = OrderedDict()
        self._outbox: list[Outgoing] = []
        self._events: deque[SurveyorEvent] = deque()

    # channels

    def add_channel(self, channel: Channel) -> None:
        """Take ``channel`` in; it gets the surveys sent from now on."""
        self._roster.add(channel)

    def remove_channel(self, channel: Channel) -> None:
        """Forget ``channel``; responses still coming on it are dropped."""
        self._roster.remove(channel.name)

    # commands

    def survey(self, body: Any, now: float, survey_time: float | None = None) -> int:
        """Send ``body`` to every live channel; returns the survey id."""
        if self.raw:
            raise LocalProtocolError("a raw SURVEYOR forwards stacks; use forward()")
        survey_time = self.survey_time if survey_time is None else survey_time
        if survey_time <= 0:
            raise LocalProtocolError("the survey time must be positive")
        survey_id = self._ids.take(self._open)
        backtrace = Backtrace((), survey_id)
        payload = encode(self.framing, backtrace.tags, body)
        self._open[survey_id] = _Open(now + survey_time)
        self._broadcast(payload, backtrace)
        return survey_id

    def forward(self, backtrace: Backtrace, body: Any, now: float) -> int:  # noqa: ARG002
        """Raw: send ``body`` behind ``backtrace`` to every live channel; how many got it."""
        if not self.raw:
            raise LocalProtocolError("a cooked SURVEYOR makes its own stacks; use survey()")
        if len(backtrace.tags) > self.max_hops:
            self.stats.ttl_exceeded += 1
            return 0
        return self._broadcast(encode(self.framing, backtrace.tags, body), backtrace)

    def _broadcast(self, payload: Payload, backtrace: Backtrace) -> int:
        """Queue ``payload`` for every live channel."""
        sent = 0
        for channel in self._roster.alive():
            self._outbox.append(Outgoing(channel, payload, backtrace))
            sent += 1
        self.stats.sent += sent
        return sent

    def cancel(self, survey_id: int) -> bool:
        """End ``survey_id`` now, without a SurveyDone; later responses count as stray."""
        if self._open.pop(survey_id, None) is None:
            return False
        self._remember(survey_id, expired=False)
        self.stats.cancelled += 1
        return True

    def in_flight(self) -> list[int]:
        """Ids of the surveys still collecting."""
        return list(self._open)

    # sending

    def messages_to_send(self) -> list[Outgoing]:
        """Take the queued surveys."""
        batch, self._outbox = self._outbox, []
        return batch

    def refused(self, outgoing: Outgoing, now: float) -> None:  # noqa: ARG002
        """A channel would not take a survey: that channel misses it (counted)."""
        self.stats.refused += 1

    # incoming

    def receive(self, channel: Channel, payload: Payload, now: float) -> None:
        """Take one response in; late ones, strays and garbage are dropped and counted."""
        if self._roster.get(channel.name) is not channel:
            self.stats.unknown_channel += 1
            return
        try:
            stack, body = decode(self.framing, payload, self.max_hops)
        except PacketError as error:
            count_packet_error(self.stats, error)
            return
        if self.raw:
            if len(stack) < 2:
                self.stats.malformed += 1
                return
            self.stats.received += 1
            self._events.append(RawResponse(Backtrace.from_tags(stack), body))
            return
        if len(stack) != 1:
            self.stats.malformed += 1
            return
        survey_id = stack[0]
        survey = self._open.get(survey_id)
        if survey is not None and now < survey.deadline:
            survey.responses += 1
            self.stats.received += 1
            self._events.append(SurveyResponse(survey_id, body, channel.name))
        elif survey is not None or self._finished.get(survey_id):
            self.stats.late += 1
        else:
            self.stats.stray += 1

    def _remember(self, survey_id: int, *, expired: bool) -> None:
        """Keep ``survey_id`` among the recently finished ones."""
        self._finished[survey_id] = expired
        self._finished.move_to_end(survey_id)
        while len(self._finished) > _REMEMBERED:
            self._finished.popitem(last=False)

    def next_event(self) -> SurveyorEvent | None:
        """The next response or end of survey, or None."""
        return self._events.popleft() if self._events else None

    # timers

    def get_timer(self) -> float | None:
        """When the next survey ends, or None when none is open."""
        return min((survey.deadline for survey in self._open.values()), default=None)

    def handle_timer(self, now: float) -> None:
        """End every survey whose deadline has come."""
        for survey_id, survey in list(self._open.items()):
            if survey.deadline <= now:
                del self._open[survey_id]
                self._remember(survey_id, expired=True)
                self._events.append(SurveyDone(survey_id, survey.responses))
