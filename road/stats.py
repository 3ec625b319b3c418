"""Typed counters of what a RoadStack did and what it dropped (and why)."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Drop", "RoadStats"]


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
    REASSEMBLY_FULL = "reassembly-full"  # max_reassembly_bytes held already
    REASSEMBLY_TIMEOUT = "reassembly-timeout"  # a partial message went quiet and was freed
    RESEND_LIMITED = "resend-limited"  # a resend request withheld by the per-remote rate
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
    segments_sent: int = 0
    segments_received: int = 0
    segments_resent: int = 0
    resend_requests_sent: int = 0
    resend_requests_received: int = 0
    nacks_sent: int = 0
    joins_completed: int = 0
    allows_completed: int = 0
    transactions_failed: int = 0
    handshakes_failed: int = 0
    """Joins and allows that failed, whichever side started them (logged at WARNING)."""
    joins_evicted: int = 0
    """Open vacuous joins ended early because ``max_pending_joins`` were open."""
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
    dropped: Counter[Drop] = field(default_factory=Counter)

    def drop(self, reason: Drop) -> None:
        """Count one dropped datagram."""
        self.dropped[reason] += 1

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
