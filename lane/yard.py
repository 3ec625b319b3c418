"""Yards: who we are on a lane, and the remote yards we talk to.

A yard's socket lives at ``<dir>/<lane>.<yard>.uxd`` (RAET 0.6.8's layout);
the default ``<dir>`` is the running user's own
(:func:`raetlike.localfiles.default_lane_dir`).  Each process gets a fresh
18-hex-character yard session id, so receivers can tell a restarted yard from
the one they knew.
"""

from __future__ import annotations

import os
import secrets
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lane.coalesce import COALESCING_MARK, Batch
from raetlike.localfiles import default_lane_dir
from raetlike.names import InvalidNameError, name_problem, quoted_name
from raetlike.wire.page import MAX_BOOK_ID, YARD_SESSION_LENGTH

__all__ = [
    "SOCKET_SUFFIX",
    "LocalYard",
    "RemoteYard",
    "Outgoing",
    "new_yard_session",
    "yard_path",
    "check_name",
]

SOCKET_SUFFIX = ".uxd"


def new_yard_session() -> str:
    """A fresh yard session id: 18 lower-case hex characters, the first two
    :data:`~lane.coalesce.COALESCING_MARK` (a RAET yard's never begin so), then random."""
    return (COALESCING_MARK + secrets.token_hex(YARD_SESSION_LENGTH // 2))[:YARD_SESSION_LENGTH]


def check_name(what: str, name: str, *, dots: bool = True) -> str:
    """``name`` if it can name a lane or yard; InvalidNameError (a LocalProtocolError) if not.

    A valid name (:mod:`raetlike.names`: printable, no whitespace, no ``/`` or
    ``\\``, no leading dot) in Latin-1 (RAET 0.6.8's page heads), and for a
    lane (``dots=False``) without dots (the lane is the first part of socket
    names).
    """
    problem = name_problem(name)
    if problem is None and any(ord(char) > 0xFF for char in name):
        problem = "must be Latin-1"
    if problem is None and not dots and "." in name:
        problem = "must not hold dots"
    if problem is not None:
        raise InvalidNameError(f"invalid {what} name {quoted_name(name)}: {problem}")
    return name


def yard_path(directory: str, lane: str, yard: str) -> str:
    """The socket path of ``yard`` on ``lane`` in ``directory``."""
    return os.path.join(directory, f"{lane}.{yard}{SOCKET_SUFFIX}")


@dataclass(frozen=True, slots=True)
class LocalYard:
    """Who we are on the lane."""

    name: str
    """Our yard name (``sn`` on the pages we send)."""
    lane: str = "lane"
    """The lane's name; no dots (it is the first part of socket names)."""
    directory: str = field(default_factory=default_lane_dir)
    """Where the lane's sockets live (default: the running user's, created 0700 by the driver)."""
    main: bool = False
    """True for the lane's main yard, which routes pages between the other yards."""
    yard_session: str = field(default_factory=new_yard_session)
    """Fresh for each process."""

    def __post_init__(self) -> None:
        """Check the names fit the wire and the socket layout."""
        check_name("yard", self.name)
        check_name("lane", self.lane, dots=False)

    @property
    def path(self) -> str:
        """Our socket path."""
        return yard_path(self.directory, self.lane, self.name)


@dataclass(slots=True)
class Outgoing:
    """One message (or one routed page) waiting to go to a yard."""

    message_id: int
    """What ``transmit`` returned; 0 for a page the main yard routes."""
    message: Mapping[str, Any] | None
    """The message as given; None for a routed page."""
    pages: list[bytes]
    """Its datagrams (a batch: one, made when it is first handed out)."""
    next_page: int = 0
    """The first page not yet handed to the driver."""
    batch: Batch | None = None
    """Several messages in one datagram (``message`` and ``message_id`` are its first)."""

    @property
    def count(self) -> int:
        """The messages it carries (a routed page counts as one)."""
        return 1 if self.batch is None else len(self.batch.message_ids)


@dataclass(slots=True)
class RemoteYard:
    """A yard we send to or heard from."""

    name: str
    path: str
    """Where its pages go: its own socket, or the main yard's when routed."""
    via: str | None = None
    """The main yard's name when we reach this yard through it."""
    main: bool = False
    """True when this yard is the lane's main yard (routes for us)."""
    yard_session: str | None = None
    """The last session id heard from it."""
    past_sessions: deque[str] = field(default_factory=lambda: deque(maxlen=8))
    """Session ids heard before the current one (a straggler is not a restart)."""
    last_book_id: int = 0
    outbox: deque[Outgoing] = field(default_factory=deque)
    """Not yet (fully) handed to the driver, oldest first."""
    blocked_until: float | None = None
    """No sending before this moment (backing off after a failure)."""
    failing_since: float | None = None
    """When the current run of failures began."""
    retry_delay: float = 0.0
    rewound: bool = False
    """A "gone" failure already sent this round's books back to their first page."""
    window: int = 0
    """Pages handed out per round; shrinks to what a busy yard took, grows back by doubling."""
    window_filled: bool = False
    """The last round handed out a whole window (more was waiting)."""
    queued: int = 0
    """Messages and routed pages in the outbox (a batch counts its messages)."""
    batch_limit: int = 0
    """The largest batch it granted us (docs/lane.md, "Coalescing"); 0: pages only."""
    granted: str | None = None
    """Its session we granted batches to (a new session is granted anew)."""
    last_error: str = ""

    def next_book_id(self) -> int:
        """The next book id for messages to this yard; rolls from 2**32-1 to 1."""
        self.last_book_id = self.last_book_id + 1 if self.last_book_id < MAX_BOOK_ID else 1
        return self.last_book_id

    @property
    def waiting(self) -> int:
        """Messages and routed pages not yet delivered to the kernel."""
        return self.queued
