"""SURVEYOR: sends a survey to every channel and collects responses until its deadline.

Cooked: ``survey(body, now)`` gives a survey id; responses come out of
``next_event()`` as :class:`SurveyResponse` until the deadline, then one
:class:`SurveyDone`; later responses are dropped (counted as late), and so are
more than ``responses_per_channel`` from one channel (counted as duplicates).  Raw (a
device's back): ``forward(backtrace, body, now)`` sends a stack as it is to
every channel and responses come out as :class:`RawResponse`.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from raetlike.errors import LocalProtocolError
from raetlike.sp._asker import Asker
from raetlike.sp._channel import Channel, Outgoing, Payload
from raetlike.sp._events import RawResponse, SurveyDone, SurveyResponse
from raetlike.sp._framing import Framing, carries, encode
from raetlike.wire.tags import DEFAULT_MAX_HOPS, Backtrace

__all__ = ["Surveyor", "DEFAULT_SURVEY_TIME", "DEFAULT_RESPONSES_PER_CHANNEL"]

logger = logging.getLogger(__name__)

DEFAULT_SURVEY_TIME = 60.0
"""Seconds a survey collects responses unless told otherwise."""

DEFAULT_RESPONSES_PER_CHANNEL = 1
"""Most responses one survey takes from one channel; repeats count as duplicates."""


@dataclass(slots=True)
class _Open:
    """A survey collecting responses."""

    deadline: float
    """When it ends."""
    responses: int = 0
    """Responses taken so far."""
    by_channel: Counter[str] = field(default_factory=Counter)
    """Responses taken per channel name (at most one entry per channel of the roster)."""


SurveyorEvent = SurveyResponse | SurveyDone | RawResponse


class Surveyor(Asker[SurveyorEvent, _Open]):
    """A surveyor endpoint; see the module docstring."""

    __slots__ = ("responses_per_channel", "survey_time")

    def __init__(
        self,
        *,
        name: str,
        raw: bool = False,
        framing: Framing = Framing.BYTES,
        survey_time: float = DEFAULT_SURVEY_TIME,
        responses_per_channel: int = DEFAULT_RESPONSES_PER_CHANNEL,
        max_hops: int = DEFAULT_MAX_HOPS,
        rng: random.Random | None = None,
    ) -> None:
        """A surveyor with no channels; ``rng`` seeds the first survey id.

        ``responses_per_channel`` bounds what one survey takes from one
        channel: 1 for channels that are respondents; a channel that leads to
        a device stands for every respondent behind it, so give the most
        respondents one channel may stand for.  Raw surveyors keep nothing
        per message and do not count.
        """
        if survey_time <= 0:
            raise LocalProtocolError("the survey time must be positive")
        if responses_per_channel < 1:
            raise LocalProtocolError("a survey takes at least one response per channel")
        super().__init__(name=name, raw=raw, framing=framing, max_hops=max_hops, rng=rng)
        self.survey_time = survey_time
        self.responses_per_channel = responses_per_channel

    # channels

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
        """Raw: send ``body`` behind ``backtrace`` to every live channel; how many got it.

        0 and counted for a stack deeper than ``max_hops`` or a body this
        framing cannot carry (``stats.malformed``).
        """
        if not self.raw:
            raise LocalProtocolError("a cooked SURVEYOR makes its own stacks; use survey()")
        if len(backtrace.tags) > self.max_hops:
            self.stats.ttl_exceeded += 1
            return 0
        if not carries(self.framing, body):
            # a device's front took in a body this framing cannot carry (a peer's choice)
            self.stats.malformed += 1
            logger.debug("%s: dropped a survey whose body the %s framing cannot carry",
                         self.name, self.framing.value)
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

    # sending

    def refused(self, outgoing: Outgoing, now: float) -> None:  # noqa: ARG002
        """A channel would not take a survey: that channel misses it (counted)."""
        self.stats.refused += 1

    # incoming

    def receive(self, channel: Channel, payload: Payload, now: float) -> None:
        """Take one response in; repeats, late ones, strays and garbage are dropped and counted."""
        answer = self._take_answer(channel, payload, RawResponse)
        if answer is None:
            return
        survey_id, body = answer
        survey = self._open.get(survey_id)
        if survey is not None and now < survey.deadline:
            if survey.by_channel[channel.name] >= self.responses_per_channel:
                self.stats.duplicate += 1
                logger.debug("%s: dropped a repeated response from %s", self.name, channel.name)
                return
            survey.by_channel[channel.name] += 1
            survey.responses += 1
            self.stats.received += 1
            self._events.append(SurveyResponse(survey_id, body, channel.name))
        elif survey is not None or self._ended_normally(survey_id):
            self.stats.late += 1
        else:
            self.stats.stray += 1

    # timers

    def handle_timer(self, now: float) -> None:
        """End every survey whose deadline has come."""
        for survey_id, survey in list(self._open.items()):
            if survey.deadline <= now:
                del self._open[survey_id]
                self._finish(survey_id, normally=True)
                self._events.append(SurveyDone(survey_id, survey.responses))
