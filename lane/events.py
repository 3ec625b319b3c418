"""What a LaneStack tells its driver, through ``next_event()``.

Events are small frozen records; the stack never calls back into user code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Event",
    "MessageReceived",
    "YardAdded",
    "YardRestarted",
    "YardUnreachable",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every lane event."""

    yard: str
    """Name of the remote yard the event is about."""


@dataclass(frozen=True, slots=True)
class MessageReceived(Event):
    """A whole message (book) arrived from ``yard``."""

    body: dict[str, Any]
    """The message, decoded from JSON or msgpack."""
    yard_session: str
    """The sender's yard session id the book travelled under."""
    pages: int
    """How many pages carried it."""


@dataclass(frozen=True, slots=True)
class YardAdded(Event):
    """An unknown yard sent to us and the lane accepted it."""

    path: str
    """Where we now send to reach it (its socket, or the main yard's)."""


@dataclass(frozen=True, slots=True)
class YardRestarted(Event):
    """A yard's session id changed: it restarted; its half-received books were dropped."""

    old_session: str
    """The session id heard before."""
    new_session: str
    """The session id heard now."""


@dataclass(frozen=True, slots=True)
class YardUnreachable(Event):
    """Sending to ``yard`` kept failing; what could not be delivered comes back here."""

    message_ids: tuple[int, ...]
    """The ids ``transmit`` returned for the undelivered messages, oldest first."""
    messages: tuple[Mapping[str, Any], ...]
    """The undelivered messages, unchanged, in the same order."""
    forwarded_pages: int
    """Main yard only: pages it was routing for other yards that were dropped too."""
    reason: str
    """Why, in a few words (the last error seen)."""
