"""The one error tree of raetlike.

Every exception raetlike raises on purpose derives from :class:`RaetError`.
Garbage from the network is *not* raised out of a stack: the stack drops it and
counts it (see the stacks' stats); these classes are what codecs raise to the
stack, and what commands raise to the caller.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RaetError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "PacketError",
    "CryptoError",
    "KeepError",
    "UnsafePathError",
    "UnsafeKeepError",
    "BackpressureError",
    "AddressError",
    "LibsodiumMissingError",
    "StoreError",
    "StoreFullError",
    "StoreWriteError",
    "MessageExpiredError",
    "YardUnreachableError",
    "JoinError",
    "JoinTimeoutError",
]


class RaetError(Exception):
    """Base of every error raetlike raises on purpose."""


class ProtocolError(RaetError):
    """Something broke the rules of the protocol."""


class LocalProtocolError(ProtocolError):
    """We were asked to do something the protocol does not allow (caller's bug)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the rules of the protocol."""


class PacketError(RemoteProtocolError):
    """Bytes that do not decode into a valid packet, page or tag stack.

    ``reason`` is a short, stable, machine-friendly word (used as a stats key),
    the message says what exactly was wrong.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class CryptoError(RaetError):
    """A signature did not verify, a box did not open, or a key is malformed."""


class KeepError(RaetError):
    """A keep file is missing, corrupt or unreadable; the message names the file."""


class UnsafePathError(RaetError):
    """A lane or keep directory, or a keep file, that another local user could change.

    Not owned by the running user, writable by group or others, or (a file
    of private keys) readable by them.  The message is one line naming the
    path and the fix (``chmod 700 PATH``, ``chown ...``); ``path`` holds it.
    """

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class UnsafeKeepError(UnsafePathError, KeepError):
    """An :class:`UnsafePathError` in a keep: also a :class:`KeepError`."""


class StoreError(RaetError):
    """A durable store (outbox or dedup) is damaged beyond a torn last record, or locked
    by another process; the message names the file."""


class BackpressureError(RaetError):
    """An outbox is full: the caller must slow down or drop the message itself."""


class StoreWriteError(StoreError, BackpressureError):
    """A durable store (or the journal that holds its marks) could not be written: an
    I/O error (EIO, EROFS, a removed directory, ...).  What failed was not stored (or its
    mark not written); the store goes on when the write can be made (also a
    BackpressureError: slow down, try again)."""


class StoreFullError(StoreWriteError):
    """The disk has no room for a durable store's next segment: nothing was stored, and the
    store goes on when there is room (a :class:`StoreWriteError`, so also a
    BackpressureError: slow down)."""


class AddressError(RaetError, ValueError):
    """A ``HOST:PORT`` that cannot be used: the name does not resolve, or not for this socket."""


class LibsodiumMissingError(RaetError, ImportError):
    """The system's libsodium could not be loaded (raised when :mod:`raetlike.crypto` is
    imported); the message names the package to install."""


# -- what the asyncio drivers (raetlike.aio) raise to an awaiting caller ------------------

class MessageExpiredError(RaetError):
    """A road message was not acknowledged within its time to live (or the stack closed)."""

    def __init__(self, event: Any) -> None:
        super().__init__(f"message {event.message_id} to {event.remote} undelivered: "
                         f"{event.reason}")
        self.event = event
        """The stack's event (a ``road.events.MessageExpired``), with the undelivered
        message in ``body``."""


class YardUnreachableError(RaetError):
    """A lane message could not be handed to its yard (or the stack closed)."""

    def __init__(self, event: Any) -> None:
        super().__init__(f"yard {event.yard} unreachable: {event.reason}")
        self.event = event
        """The stack's event (a ``lane.events.YardUnreachable``), with the undelivered
        messages."""


class JoinError(RaetError):
    """A join (and allow) did not complete: rejected, or the estate closed."""


class JoinTimeoutError(JoinError, TimeoutError):
    """A join (and allow) did not complete in time."""
