"""What a RoadStack tells its driver, through ``next_event()``.

Events are small slotted records, handed over once: the stack keeps no reference
to an event it gave out, so they are not frozen (a frozen dataclass sets each field
through ``object.__setattr__``: about four times the cost of a plain one, paid for
every message received and sent).  As aioquic's and h2's events, they compare by
value and are not hashable.  The stack never calls back into user code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Event",
    "Joined",
    "JoinPending",
    "JoinRejected",
    "JoinFailed",
    "Allowed",
    "AllowFailed",
    "Alive",
    "RemoteLost",
    "RemoteReaped",
    "RemoteRemoved",
    "MessageReceived",
    "MessageSent",
    "MessageExpired",
    "FastModeFallback",
    "RemoteMoved",
]


@dataclass(slots=True)
class Event:
    """Base of every road event."""

    remote: str
    """Name of the remote estate the event is about."""


@dataclass(slots=True)
class Joined(Event):
    """A join completed: both sides hold each other's keys and ids."""

    uid: int
    """Our id for the remote."""
    main: bool
    """True when the remote is a main estate."""
    initiator: bool
    """True when we asked to join (we are the joiner)."""


@dataclass(slots=True)
class JoinPending(Event):
    """A join waits for an operator to accept the remote's keys (by role)."""

    role: str
    """The role whose keys are pending."""
    local: bool
    """True when *our* keep holds the decision, False when the far side pended us."""


@dataclass(slots=True)
class JoinRejected(Event):
    """A join was rejected: by our keep (which may remove the remote), or by the far side, in
    an unsigned reject (anyone may forge it: the remote stays, and a join we were asked
    for is tried again every ``rejoin_interval``)."""

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class JoinFailed(Event):
    """A join ended without result (timeout, refusal)."""

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class Allowed(Event):
    """The allow handshake completed: a new session with fresh short-term keys."""

    session_id: int
    """Our session id with the remote after the allow."""


@dataclass(slots=True)
class AllowFailed(Event):
    """An allow handshake ended without result."""

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class Alive(Event):
    """The remote answered (or spoke): it is present, after having been dead or unknown."""


@dataclass(slots=True)
class RemoteLost(Event):
    """The remote stopped answering and is now considered dead."""

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class RemoteReaped(Event):
    """Main estate only: the remote was unseen for the reap interval."""


@dataclass(slots=True)
class RemoteRemoved(Event):
    """The remote record was removed (rejected keys, operator, reap)."""

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class MessageReceived(Event):
    """A whole message arrived from the remote."""

    body: Any
    """The message: a mapping (JSON or msgpack body) or bytes (raw body)."""
    session_id: int
    """The sender's session id the message travelled in."""
    transaction_id: int
    """The sender's transaction id for the message."""
    segments: int
    """How many segments carried it."""


@dataclass(slots=True)
class MessageSent(Event):
    """The remote acknowledged a whole message (done)."""

    message_id: int
    """The id ``transmit`` returned for it."""


@dataclass(slots=True)
class MessageExpired(Event):
    """A message could not be delivered within its time to live; here it is back."""

    message_id: int
    """The id ``transmit`` returned for it."""
    body: Any
    """The undelivered message, unchanged."""
    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class FastModeFallback(Event):
    """Fast mode was negotiated but the remote never acknowledged a fast datagram.

    Messages to it go in RAET mode from now on (the unacknowledged ones again);
    the next allow tries fast mode afresh.
    """

    reason: str
    """Why, in a few words."""


@dataclass(slots=True)
class RemoteMoved(Event):
    """The remote now speaks from another address (it answered there what only the holder
    of the session's keys could, docs/road.md "A remote that moves"); our traffic to it
    goes there from now on, with its uid, keys and session unchanged."""

    old: tuple[str, int]
    """The host address it had."""
    new: tuple[str, int]
    """The host address it has now."""
