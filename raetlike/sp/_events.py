"""What SP endpoints hand to their user: frozen event values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raetlike.wire.tags import Backtrace

__all__ = [
    "Request",
    "Survey",
    "Reply",
    "RawReply",
    "RequestBlocked",
    "SurveyResponse",
    "RawResponse",
    "SurveyDone",
]


@dataclass(frozen=True, slots=True)
class Request:
    """A request taken in by a REP endpoint; pass it back to ``reply``."""

    backtrace: Backtrace
    """The tag stack, with the id of the channel it came in on in front."""
    body: Any
    """The application body."""
    channel_name: str
    """The name of the channel it came in on."""


@dataclass(frozen=True, slots=True)
class Survey:
    """A survey taken in by a RESPONDENT endpoint; pass it back to ``respond``."""

    backtrace: Backtrace
    """The tag stack, with the id of the channel it came in on in front."""
    body: Any
    """The application body."""
    channel_name: str
    """The name of the channel it came in on."""


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a request made by a cooked REQ endpoint."""

    request_id: int
    """The id ``request`` returned."""
    body: Any
    """The application body of the reply."""


@dataclass(frozen=True, slots=True)
class RawReply:
    """A reply seen by a raw REQ endpoint (a device), stack and all."""

    backtrace: Backtrace
    """The remaining tag stack; its front channel id says where the reply goes next."""
    body: Any
    """The application body of the reply."""


@dataclass(frozen=True, slots=True)
class RequestBlocked:
    """Backpressure: no channel would take this request; it is tried again at its resend time."""

    request_id: int
    """The request that could not be sent."""


@dataclass(frozen=True, slots=True)
class SurveyResponse:
    """One response to a survey made by a cooked SURVEYOR, before its deadline."""

    survey_id: int
    """The id ``survey`` returned."""
    body: Any
    """The application body of the response."""
    channel_name: str
    """The channel the response came in on."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response seen by a raw SURVEYOR (a device), stack and all."""

    backtrace: Backtrace
    """The remaining tag stack; its front channel id says where the response goes next."""
    body: Any
    """The application body of the response."""


@dataclass(frozen=True, slots=True)
class SurveyDone:
    """A survey reached its deadline; later responses are dropped."""

    survey_id: int
    """The survey that ended."""
    responses: int
    """How many responses it took: with the default of one per channel, how many
    distinct channels answered (repeats are dropped, ``stats.duplicate``)."""
