"""What a stack knows about one remote estate."""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raetlike.crypto import PrivateKey, PublicKey, SessionBox, VerifyKey
from raetlike.dedup import BitWindow
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import SID_ROLLOVER, TID_ROLLOVER, Acceptance
from road.stats import RemoteTraffic

if TYPE_CHECKING:
    from road._transaction import Index, Transaction

__all__ = ["MAX_EXTRA_KEY", "MAX_EXTRA_TEXT", "Address", "Outgoing", "Remote",
           "bounded_capabilities", "message_body", "session_is_valid"]

Address = tuple[str, int]

_HALF = 0x80000000
_MODULO = 0x100000000


def session_is_valid(new: int, old: int) -> bool:
    """RAET's rule: zero is always valid, else ``new`` is not behind ``old`` (mod 2^32)."""
    if not old or not new:
        return True
    return (new - old) % _MODULO < _HALF


MAX_EXTRA_KEY = 32
"""Longest join-body key beyond RAET's that is kept (a capability name)."""
MAX_EXTRA_TEXT = 64
"""Longest string value such a key may carry and still count."""


def bounded_capabilities(extra: Any, limit: int) -> frozenset[str]:
    """At most ``limit`` keys of ``extra`` (a join body's keys beyond RAET's, or a kept
    list of names), each at most ``MAX_EXTRA_KEY`` printable characters, with a number,
    boolean or string of at most ``MAX_EXTRA_TEXT`` characters as value."""
    kept: list[str] = []
    items = extra.items() if isinstance(extra, dict) else ((name, 1) for name in extra)
    for key, value in items:
        if len(kept) >= limit:
            break
        if not isinstance(key, str) or not 0 < len(key) <= MAX_EXTRA_KEY or not key.isprintable():
            continue
        if isinstance(value, str) and len(value) > MAX_EXTRA_TEXT:
            continue
        if not isinstance(value, bool | int | float | str):
            continue
        kept.append(key)
    return frozenset(kept)


def message_body(message: object) -> dict[str, Any] | bytes:
    """``message`` as a stack carries it: a mapping as a dict, bytes-like as bytes (each a
    copy of its own); LocalProtocolError for anything else."""
    if isinstance(message, Mapping):
        return dict(message)
    if isinstance(message, bytes | bytearray):
        return bytes(message)
    raise LocalProtocolError(
        f"a message must be a mapping or bytes, not {type(message).__name__}")


@dataclass(slots=True)
class Outgoing:
    """A message waiting to go out (or to go out again)."""

    message_id: int
    """The id ``transmit`` returned."""
    body: Any
    """The message itself."""
    expires: float
    """When it is given back as a MessageExpired event (monotonic seconds)."""
    begun: tuple[int, int, bytes] | None = None
    """RAET mode: ``(session id, transaction id, coat)`` of a send begun and put back
    (the remote went silent): sent again in the same session it is that transaction
    again, byte for byte, so a receiver that delivered it answers *done* instead of
    delivering it twice."""


@dataclass(slots=True)
class RoundTrip:
    """Smoothed time from a burst sent to its answer (RFC 6298's estimator).

    RAET mode times its redos from it, so a receiver busy verifying a full
    window of signed packets is not asked again before it could have answered.
    A redo that fired (Karn's rule: its answer times nothing) holds the backed-off
    interval until an unambiguous answer is timed again.
    """

    smoothed: float | None = None
    variation: float = 0.0
    backed_off: float = 0.0

    def sample(self, seconds: float) -> None:
        """One answer ``seconds`` after its (first, never resent) burst."""
        self.backed_off = 0.0
        if self.smoothed is None:
            self.smoothed, self.variation = seconds, seconds / 2
            return
        self.variation = 0.75 * self.variation + 0.25 * abs(self.smoothed - seconds)
        self.smoothed = 0.875 * self.smoothed + 0.125 * seconds

    def back_off(self, interval: float) -> None:
        """A redo fired and the next wait is ``interval``: keep it until a fresh sample."""
        self.backed_off = max(self.backed_off, interval)

    def timeout(self, floor: float, ceiling: float) -> float:
        """``smoothed + 4 * variation`` (or the backed-off wait) kept within [floor, ceiling]."""
        estimate = 0.0 if self.smoothed is None else self.smoothed + 4 * self.variation
        return min(ceiling, max(floor, estimate, self.backed_off))


@dataclass(slots=True)
class Remote:
    """One remote estate: identity, keys, session state and its transactions.

    ``uid`` is our id for it; ``far_uid`` its id for us (RAET's ``fuid``).
    ``session_id`` is the session we use when we initiate; ``remote_session_id``
    the latest session it used when it initiated (RAET's ``sid`` and ``rsid``).
    """

    uid: int
    name: str
    host_address: Address
    far_uid: int = 0
    main: bool = False
    kind: int = 0
    role: str = ""
    verify_key: VerifyKey | None = None
    public_key: PublicKey | None = None
    acceptance: Acceptance | None = None
    fqdn: str = ""
    joined: bool | None = None
    allowed: bool | None = None
    alive: bool | None = None
    reaped: bool = False
    session_id: int = 0
    remote_session_id: int = 0
    transaction_id: int = 0
    short_private: PrivateKey = field(default_factory=PrivateKey.generate)
    short_peer: PublicKey | None = None
    session_box: SessionBox | None = None
    transactions: dict[Index, Transaction] = field(default_factory=dict)
    done_transactions: OrderedDict[tuple[int, int], float] = field(default_factory=OrderedDict)
    """RAET mode: (sender's session id, transaction id) of messages delivered -> when the
    entry is forgotten.  Keyed by session too: a restarted sender numbers its transactions
    afresh, and its new messages must never be answered "done" unread."""
    outbox: deque[Outgoing] = field(default_factory=deque)
    presence_due: float = 0.0
    reap_due: float = 0.0
    segments_in_flight: int = 0
    outbox_soonest: float = math.inf
    """No queued message expires before this (the stack's timer heap holds an entry by then)."""
    round_trip: RoundTrip = field(default_factory=RoundTrip)
    delivered: BitWindow | None = None
    """RAET mode: transaction ids of messages delivered in the sender's session
    ``delivered_session`` (made at the first delivery, reset when an allow completes with
    new keys or a message of another session is delivered)."""
    delivered_session: int = 0
    """The sender's session id whose transaction ids ``delivered`` holds."""
    allowed_hellos: deque[bytes] = field(default_factory=lambda: deque(maxlen=4))
    """Short-term keys of the remote's last completed allows: a hello carrying one again is
    a replay (a fresh Allower always makes a new key)."""
    resend_tokens: float = math.inf
    """RAET mode: resend requests we may still send it now (refilled at
    ``resend_requests_per_second``)."""
    resend_tokens_at: float = 0.0
    capabilities: frozenset[str] = frozenset()
    traffic: RemoteTraffic = field(default_factory=RemoteTraffic)
    alive_timeout: float | None = None
    """Seconds an unanswered presence check of this remote waits before it is reported
    lost; None: ``Aliver.timeout`` (2 s, as RAET).  In fast mode the least wait: 4 answer
    times of the link if longer (``FastRoad.ask_alive``).  Set by the owner of a policy that
    must notice a dead remote sooner (a failover estate's mains, raetlike.multimain)."""
    unanswered_checks: int = 0
    """Presence checks in a row that found it gone (reset when it is heard): not main, we
    allow again after ``allow_tries_before_rejoin`` of them (``RoadStack._start_alive``)."""
    sought: bool = False
    """We asked to join it (:meth:`RoadStack.join`): it is main to us, even when we are a main
    ourselves (a relay's upstream, docs/relay.md).  Toward it we act as a minion: presence
    checks at a minion's pace, a join again when it lost us, never reaped.  Only our own
    command sets it, never the network."""
    failure_warned: bool = False
    """A failed join or allow of ours was logged at WARNING since the last one completed
    (retries that fail too are DEBUG until one succeeds)."""

    def next_transaction_id(self) -> int:
        """The next transaction id, rolling from 0xffffffff to 1."""
        self.transaction_id = self.transaction_id + 1 if self.transaction_id < TID_ROLLOVER else 1
        return self.transaction_id

    def next_session_id(self) -> int:
        """Advance our session id, rolling from 0xffffffff to 1."""
        self.session_id = self.session_id + 1 if self.session_id < SID_ROLLOVER else 1
        return self.session_id

    def remote_session_is_valid(self, session_id: int) -> bool:
        """Whether a session id the remote initiated with is current or newer."""
        return session_is_valid(session_id, self.remote_session_id)

    def own_session_is_valid(self, session_id: int) -> bool:
        """Whether a session id of a transaction we initiated is still current."""
        return session_is_valid(session_id, self.session_id)

    def session_keys_changed(self) -> None:
        """An allow completed with fresh keys: dedup starts over, and the hello is remembered."""
        self.delivered = None
        if self.short_peer is not None:
            self.allowed_hellos.append(self.short_peer.raw)

    def rekey(self) -> None:
        """Fresh short-term keys for a new allow; the old session box is gone."""
        self.allowed = None
        self.short_private = PrivateKey.generate()
        self.short_peer = None
        self.session_box = None

    def set_short_peer(self, key: PublicKey) -> None:
        """Record the remote's short-term key and precompute the session box."""
        self.short_peer = key
        self.session_box = SessionBox(self.short_private, key)

    def in_process(self, kind: int) -> list[Transaction]:
        """Transactions of ``kind`` (a TransactionKind) now open with this remote."""
        return [t for t in self.transactions.values() if t.kind == kind]
