"""Typed counters of what a RoadStack did and what it dropped (and why)."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Drop", "RoadStats", "RemoteTraffic", "RemoteStats"]


class Drop(enum.Enum):
    """Why an incoming datagram (or part of one) was dropped."""

    MALFORMED = "malformed"  # the head or framing did not parse
    BROADCAST = "broadcast"  # bf set: not supported, as in RAET
    BAD_SIGNATURE = "bad-signature"
    UNSIGNED = "unsigned"  # a packet that must be signed was not
    BAD_COAT = "bad-coat"  # did not decrypt
    BAD_BODY = "bad-body"  # did not deserialize
    JOIN_NONZERO_SESSION = "join-nonzero-session"
    JOIN_INVALID_ID = "join-invalid-id"
    JOIN_MISMATCH = "join-mismatch"
    JOIN_STALE = "join-stale"
    ZERO_SESSION = "zero-session"
    ZERO_ID = "zero-id"
    STALE_SESSION = "stale-session"
    UNKNOWN_REMOTE = "unknown-remote"
    STALE_PACKET = "stale-packet"  # no transaction for it and it starts none
    UNEXPECTED = "unexpected"  # a (state, packet kind) a transaction has no rule for
    INVALID_BODY = "invalid-body"  # well-formed but missing or wrong fields
    DUPLICATE = "duplicate"
    REPLAYED = "replayed"  # fast mode: a packet number seen already or behind the replay window
    STALE_KEY = "stale-key"  # fast mode: sealed with keys of another (older) allow
    INTERNAL_ERROR = "internal-error"  # our bug, tripped by this datagram (logged)
    UNVERIFIABLE = "unverifiable"  # signed, but we hold no verify key for the remote yet
    MESSAGE_TOO_LARGE = "message-too-large"  # announced more than max_message_size
    TOO_MANY_OPEN_MESSAGES = "too-many-open-messages"  # max_open_messages(_total) reached
    REASSEMBLY_FULL = "reassembly-full"  # max_reassembly_bytes, or the remote's share, held
    REASSEMBLY_EVICTED = "reassembly-evicted"  # a RAET-mode partial ended to make room for another
    REASSEMBLY_TIMEOUT = "reassembly-timeout"  # a partial message went quiet and was freed
    RESEND_LIMITED = "resend-limited"  # a resend request withheld by the per-remote rate
    HANDSHAKES_BUSY = "handshakes-busy"  # max_open_handshakes open, none evictable: shed unverified
    JOIN_RATE_LIMITED = "join-rate-limited"  # over join_rate_per_source for its IP address
    PENDING_KEYS_FULL = "pending-keys-full"  # max_pending_keys keys wait for an operator already


@dataclass(slots=True)
class RoadStats:
    """Counters; read them, never write them from outside the stack."""

    datagrams_received: int = 0
    datagrams_sent: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    messages_sent: int = 0
    messages_expired: int = 0
    messages_unpackable: int = 0
    """Messages given up in RAET mode because their body could not be packed (a body the
    road's body kind cannot carry: MessageExpired, reason "cannot be packed"); the first
    and every 1000th is logged at WARNING, the rest at DEBUG (a relayed peer's body can
    cause it at will).  Fast mode gives such messages up the same way, unlogged."""
    segments_sent: int = 0
    segments_received: int = 0
    segments_resent: int = 0
    resend_requests_sent: int = 0
    resend_requests_received: int = 0
    nacks_sent: int = 0
    joins_completed: int = 0
    allows_completed: int = 0
    transactions_failed: int = 0
    immutable_refused: int = 0
    """Joins refused because they would change a remote's name, address or keys on an
    immutable road (a peer can send them at will: the first and every 100th logged at
    WARNING)."""
    handshakes_failed: int = 0
    """Joins and allows that failed, whichever side started them (logged at WARNING)."""
    joins_evicted: int = 0
    """Open vacuous joins ended early because ``max_pending_joins`` were open."""
    handshakes_evicted: int = 0
    """Open joins and allows (as joinent, allowent) ended unproven after ``handshake_grace``
    so that a newcomer could take their place among ``max_open_handshakes``."""
    late_join_acks: int = 0
    """Join acks that completed a join evicted unproven (``handshakes_evicted``) before it
    would have timed out (its joiner's round trip was longer than ``handshake_grace``)."""
    strangers_reaped: int = 0
    """Estates added by vacuous joins removed after ``unallowed_reap_after`` with no allow."""
    pending_keys_expired: int = 0
    """Pending (or, under auto never, rejected) roles removed after ``pending_key_ttl``."""
    amplification_limited: int = 0
    """Datagrams withheld from unvalidated addresses (over 3x the bytes received from them)."""
    fast_datagrams_sent: int = 0
    fast_datagrams_lost: int = 0
    fast_fallbacks: int = 0
    """Fast links given up because the remote never acknowledged a fast datagram."""
    remotes_moved: int = 0
    """Remotes that moved to another address (proven there: docs/road.md, "A remote that
    moves")."""
    dropped: Counter[Drop] = field(default_factory=Counter)
    drops: int = 0
    """All drops so far (``dropped_total``, kept as it happens)."""
    last_drop: Drop | None = None

    def drop(self, reason: Drop) -> None:
        """Count one dropped datagram."""
        self.dropped[reason] += 1
        self.drops += 1
        self.last_drop = reason

    @property
    def dropped_total(self) -> int:
        """All drops, whatever the reason."""
        return sum(self.dropped.values())

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready snapshot."""
        out: dict[str, object] = {
            name: getattr(self, name) for name in self.__dataclass_fields__ if name != "dropped"
        }
        out["dropped"] = {reason.value: count for reason, count in self.dropped.items()}
        return out


@dataclass(slots=True)
class RemoteTraffic:
    """What one remote sent us and we sent it: plain counters the stack bumps as it goes.

    Only datagrams proven to come from the remote count here: RAET packets whose
    signature verified with its key, fast datagrams whose AEAD tag verified.
    Anything before that (unsigned, forged, from an unknown address) is counted
    stack-wide only, in :class:`RoadStats`, since it could come from anyone.
    """

    datagrams_in: int = 0
    bytes_in: int = 0
    datagrams_out: int = 0
    bytes_out: int = 0
    resends: int = 0
    """Packets and segments sent again (RAET mode), datagrams declared lost (fast mode)."""
    last_heard: float | None = None
    """The stack's clock when the last authenticated datagram from it came."""
    dropped: Counter[Drop] = field(default_factory=Counter)
    """Authenticated datagrams of its that were dropped anyway (stale, duplicate, ...)."""


@dataclass(frozen=True, slots=True)
class RemoteStats:
    """A snapshot of one remote, read off the stack (:meth:`RoadStack.remote_stats`)."""

    name: str
    address: tuple[str, int]
    mode: str
    """``"fast"`` once a fast link is keyed with it, else ``"raet"``."""
    joined: bool
    allowed: bool
    alive: bool | None
    rtt: float | None
    """The smoothed round trip in seconds, or None before the first sample."""
    resends: int
    datagrams_in: int
    bytes_in: int
    datagrams_out: int
    bytes_out: int
    queued: int
    """Messages waiting in its outbox or in flight to it."""
    last_heard: float | None
    """Seconds since the last authenticated datagram from it, or None if never."""
    dropped: dict[str, int]

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
