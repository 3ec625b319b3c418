"""Scalability protocols over abstract channels: REQ/REP, SURVEYOR/RESPONDENT, devices.

Sans-IO endpoints in the manner of nng's patterns: each takes payloads in with
``receive(channel, payload, now)``, queues what it wants sent for the caller
(``messages_to_send()``, or :func:`flush`), runs its timers through
``get_timer()``/``handle_timer(now)`` and hands results out of
``next_event()``.  Messages carry an SP tag stack (``raetlike.wire.tags``);
see docs/sp.md.
"""

from __future__ import annotations

from raetlike.sp._answerer import DEFAULT_MAX_QUEUED
from raetlike.sp._channel import Channel, Outgoing, Payload, Sender, flush
from raetlike.sp._device import Device
from raetlike.sp._events import (
    RawReply,
    RawResponse,
    Reply,
    Request,
    RequestBlocked,
    Survey,
    SurveyDone,
    SurveyResponse,
)
from raetlike.sp._framing import BODY_KEY, Framing, decode, encode
from raetlike.sp._memory import Endpoint, MemoryChannel, MemoryNetwork
from raetlike.sp._rep import Rep
from raetlike.sp._req import DEFAULT_RESEND_INTERVAL, Req
from raetlike.sp._respondent import Respondent
from raetlike.sp._stats import SpStats
from raetlike.sp._surveyor import DEFAULT_RESPONSES_PER_CHANNEL, DEFAULT_SURVEY_TIME, Surveyor

__all__ = [
    # channels
    "Channel",
    "Payload",
    "Outgoing",
    "Sender",
    "flush",
    "Framing",
    "BODY_KEY",
    "encode",
    "decode",
    # endpoints
    "Req",
    "Rep",
    "Surveyor",
    "Respondent",
    "Device",
    "SpStats",
    "DEFAULT_RESEND_INTERVAL",
    "DEFAULT_RESPONSES_PER_CHANNEL",
    "DEFAULT_SURVEY_TIME",
    "DEFAULT_MAX_QUEUED",
    # events
    "Request",
    "Reply",
    "RawReply",
    "RequestBlocked",
    "Survey",
    "SurveyResponse",
    "RawResponse",
    "SurveyDone",
    # in memory
    "MemoryChannel",
    "MemoryNetwork",
    "Endpoint",
]
