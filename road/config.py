"""Who a road stack is (LocalEstate) and how it behaves (RoadConfig)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from raetlike._fields import checked, field_types
from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import AutoMode, BodyKind, HeadKind

__all__ = ["LocalEstate", "RoadConfig"]


MAX_PENDING_SAVES = 4096
"""The bound of the keep's writer thread where it is on (``raetlike estate``)."""

@dataclass(slots=True)
class LocalEstate:
    """Who we are on the road."""

    name: str
    signing_key: SigningKey = field(default_factory=SigningKey.generate)
    private_key: PrivateKey = field(default_factory=PrivateKey.generate)
    main: bool = False
    kind: int = 0
    role: str = ""
    uid: int = 1
    fqdn: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise LocalProtocolError("an estate needs a name")
        if not self.role:
            self.role = self.name
        if not 0 <= self.kind <= 255:
            raise LocalProtocolError(f"estate kind must be 0..255, got {self.kind}")


@dataclass(slots=True)
class RoadConfig:
    """Settings of a RoadStack; the defaults are RAET 0.6.8's where it has one."""

    head_kind: HeadKind = HeadKind.RAET
    body_kind: BodyKind = BodyKind.JSON
    mutable: bool = False
    """Whether joins may change a known remote's credentials (name, address, keys), as on
    RAET's mutable road.  Join packets are unsigned: anyone may then rename, move or rekey
    any remote (new keys end its session); only where every sender is trusted."""
    auto: AutoMode = AutoMode.ONCE
    """Acceptance of new keys when no keep is given (a bare sans-IO stack, as in tests).
    The programs default a main estate to ``never`` (``raetlike estate``, ``aio.Estate``,
    flo houses: ``raetlike.keep.default_auto``); give a main its keep or ``never`` here."""
    keepalive: bool = True
    """Check presence of every remote periodically (and join/allow as needed)."""
    period: float = 1.0
    """Seconds between presence checks (main); others add ``offset``."""
    offset: float = 0.5
    reap_interval: float = 3600.0
    """Main only: a remote unseen this long is reaped (0 disables)."""
    window: int = 128
    """Segments in flight per remote, across its messages."""
    burst: int = 64
    """Segments per burst of one message (the last has the wait flag)."""
    max_messages_in_flight: int = 128
    """Message transactions open at once per remote."""
    max_redos: int = 40
    """Unanswered resends (0.2-0.5 s apart) before the remote is declared dead."""
    message_ttl: float = 600.0
    """Seconds a message may wait or travel before it comes back as MessageExpired."""
    outbox_limit: int = 100_000
    """Messages queued per remote before transmit raises BackpressureError."""
    done_memory: float = 600.0
    """How long delivered transaction ids are remembered (stale detection)."""
    rejoin_interval: float = 2.0
    """Seconds between join attempts to a remote we were asked to join."""
    allow_tries_before_rejoin: int = 2
    """Not main: allows in a row that got no answer before the next attempt is a join
    instead (a main restarted before it kept our join drops our allows unanswered; a
    join asks it, and an id it does not know gets renew, then a join afresh); 0 never."""
    fast: bool = True
    """Advertise fast mode in joins; used with remotes that advertise it too (docs/road.md).

    False keeps every remote in RAET 0.6.8 mode (signed, per-packet boxed)."""
    fast_datagram_size: int = 1232
    """Fast mode's largest datagram (bytes): 1232 fits any IPv6 path; loopback takes 65000."""
    fast_max_window: int = 2 * 1024 * 1024
    """Fast mode's cap on bytes in flight per remote; keep it under the peer's receive buffer."""
    fast_initial_window: int = 64 * 1024
    """Fast mode: bytes the first flight to a remote may carry before its first ack, sent at
    once (pacing starts with the first RTT sample); at least 10 datagrams, at most
    ``fast_max_window``.  64 KiB covers a LAN's bandwidth-delay product (1 Gbit/s at
    0.5 ms); RFC 9002's internet default is about 14 KB."""
    fast_ack_delay: float = 0.005
    """Fast mode: how long a lone ack-eliciting datagram may wait for company before its ack."""
    fast_messages_in_flight: int = 8192
    """Fast mode: messages sent but not yet acknowledged per remote (the ordering bound)."""
    fast_fallback_probes: int = 4
    """Fast mode: probe timeouts with not one fast datagram acknowledged yet (per allow)
    before falling back to RAET mode (docs/road.md, "Falling back"); 0 disables."""
    fast_fallback_after: float = 3.0
    """Fast mode: seconds a fast datagram may stay unacknowledged, with none acknowledged
    yet since the allow, before falling back to RAET mode; 0 disables."""
    max_message_size: int = 16 * 1024 * 1024
    """Largest message (its coat, in bytes) we reassemble from a remote, in either mode; a
    first segment or chunk announcing more is refused (``Drop.MESSAGE_TOO_LARGE``)."""
    max_open_messages: int = 1024
    """Partly received messages kept at once per remote; past it a new one is refused
    (``Drop.TOO_MANY_OPEN_MESSAGES``) until others complete or time out."""
    max_open_messages_total: int = 8192
    """Partly received messages kept at once across all remotes; when full, a newcomer's
    evicts the oldest RAET-mode one of the remote holding the most (``max_reassembly_share``)."""
    max_reassembly_bytes: int = 256 * 1024 * 1024
    """Bytes of partly received messages held at once across all remotes; a segment or
    chunk past it is refused (``Drop.REASSEMBLY_FULL``): memory follows bytes received.
    One remote holds at most ``max_reassembly_share`` of it.
    A fast-mode chunk is charged what it keeps in memory: its bytes and
    ``road._fast_receive.PIECE_COST`` (128), or, held as a view, its whole datagram and
    ``VIEW_PIECE_COST`` (448) (docs/security.md)."""
    max_reassembly_share: float = 0.25
    """The part of ``max_reassembly_bytes`` one remote's partly received messages may hold
    (above 0, at most 1; 64 MiB of the default 256 MiB), both modes: past it its segment or
    chunk is refused (``Drop.REASSEMBLY_FULL``), so one remote never takes the room of all
    others.  When the total is full (of ``max_reassembly_bytes`` or
    ``max_open_messages_total``), a newcomer's piece ends the oldest RAET-mode partial
    message of the remote holding the most, if it holds more than the newcomer would
    (``Drop.REASSEMBLY_EVICTED``); fast-mode partials are only held to the share.  Keep the
    share above a largest message's charge (``max_message_size``; in fast mode up to ~1.4x
    it with 1232-byte datagrams), or such a message never completes."""
    reassembly_timeout: float = 30.0
    """Seconds a partly received message may go without a new piece before it is freed
    (``Drop.REASSEMBLY_TIMEOUT``), whatever its flags."""
    resend_requests_per_second: float = 200.0
    """RAET mode: resend requests (asks for missing segments) sent to one remote per second,
    in a bucket of as many; each asks for at most 2 x 64 segments actually missing."""
    dedup_window: int = 65536
    """Transaction ids below the highest delivered one that a remote's message dedup
    remembers, per session (RAET mode); an older id is answered stale, never delivered."""
    max_pending_joins: int = 1000
    """Main: estates added by vacuous joins not completed yet ("strangers") kept at once; past
    it the oldest is removed (``stats.joins_evicted``), so a join flood stays bounded.  The
    role its join recorded (auto once) stays held until it would have been reaped
    (``max_unproven_roles``).  At most as many joins evicted unproven while their ack was
    on its way are remembered (each until it would have timed out) for that ack."""
    max_unproven_roles: int = 65536
    """Main, auto once: roles that joins recorded and no allow proved, held at once (in the
    keep), each until ``unallowed_reap_after`` after the last join that claimed it with its
    keys; past it, the one due first is forgotten early.  A role forgotten takes the next
    keys that claim it, so a flood of fresh roles must pass this many within
    ``unallowed_reap_after`` (65536 in 60 s: over 1000 joins a second) to free the role of
    an estate that joined lately and has not allowed yet."""
    max_open_handshakes: int = 256
    """Joins this stack answers at once (as joinent), and as many allows (as allowent; an
    operator's pending decision holds no place).  Past it a packet that would open one more
    of that kind is dropped before any signature is checked
    (``Drop.HANDSHAKES_BUSY``) and its initiator's redo comes back later: a main flooded by
    joins (10,000 estates starting at once) finishes the handshakes it took instead of
    starting more than it can answer in time (docs/road.md, "A main under a join storm").
    A place held ``handshake_grace`` unproven is taken over instead (see there)."""
    handshake_grace: float = 0.5
    """Seconds an open join or allow keeps its place among ``max_open_handshakes`` while
    unproven (its peer has not shown it receives what we sent).  Past it, once its kind's
    places are all open, a newcomer that takes a place evicts the oldest such one
    (``stats.handshakes_evicted``), so spoofed sources must send ``max_open_handshakes`` /
    ``handshake_grace`` new handshakes a second to keep the places full.  0: evict at once;
    at or past a handshake's timeout (4 s allow, 5 s join): never evict."""
    presence_timeout_max: float = 30.0
    """Fast mode: seconds a presence check (a ping) waits for its answer at most.  It waits
    4 of its link's answer times (the data's smoothed round trip or the pings' own), at
    least 2 s, a busy peer's slow answers included; this caps it, so a few slow answers
    never make a lost peer go unnoticed for long."""
    join_pending_timeout: float = 60.0
    """Seconds a join waiting on an operator's decision, ours or the far side's (after its
    PEND), stays open at most (RAET: 5 s); a PEND never extends it, nor holds a place among
    ``max_open_handshakes``."""
    max_pending_keys: int = 1000
    """Main: keys waiting for an operator (roles pending in the keep) held at once; past it a
    new key's join is dropped unanswered (``Drop.PENDING_KEYS_FULL``) and its joiner retries."""
    pending_key_ttl: float = 3600.0
    """Seconds a pending role (never accepted) stays in the keep; an operator's rejection
    expires too, but only under auto mode never (where expiry leaves it pending again)."""
    max_join_extras: int = 16
    """Keys beyond RAET's in a join body that are kept (capabilities such as ``rlk``); each
    key at most 32 characters with a number, boolean or short string value."""
    unallowed_reap_after: float = 60.0
    """Main: an estate added by a vacuous join that completes no allow within this many
    seconds is removed (``stats.strangers_reaped``); 0 never removes it."""
    retry_backoff_max: float = 64.0
    """Seconds between our own join/allow/alive attempts to a remote that does not answer:
    they start at ``period`` and double up to this."""
    join_rate_per_source: float = 2.0
    """Join requests a second that one source IP address may start (token bucket, bursts of
    ``join_burst_per_source``); past it they are dropped (``Drop.JOIN_RATE_LIMITED``)."""
    join_burst_per_source: int = 20
    """The bucket size of ``join_rate_per_source``."""
    max_unvalidated_addresses: int = 4096
    """Addresses not yet validated whose byte budgets (3x bytes received, RFC 9000 8.1) and
    join-rate buckets are kept; past it the oldest is forgotten."""
    max_pending_saves: int = 0
    """0: a kept estate writes remote records on the loop, at once (as RAET does).  N > 0:
    a writer thread writes them (``road.persist.FileRoadKeep``; the caller passes the field
    to ``open_estate``, as ``raetlike estate`` and the flo deeds do: the stack itself does
    not read it), at most N remotes' writes
    waiting; a later save of the same remote replaces a pending one, and past the bound the
    stack waits for the writer to write one.  ``raetlike estate`` uses MAX_PENDING_SAVES
    (4096): a main in a join storm otherwise blocks ~5 ms a file in fsync."""

    def __setattr__(self, name: str, value: object) -> None:
        """Each setting is checked against its type when set (raetlike._fields)."""
        value = checked("RoadConfig", field_types(RoadConfig), name, value)
        if name == "period" and not (isinstance(value, float) and math.isfinite(value)
                                     and value > 0):
            raise LocalProtocolError(f"RoadConfig.period must be a finite number of seconds "
                                     f"above 0, not {value!r}")
        if name == "max_reassembly_share" and not (isinstance(value, float)
                                                   and 0.0 < value <= 1.0):
            raise LocalProtocolError(f"RoadConfig.max_reassembly_share must be above 0 and "
                                     f"at most 1, not {value!r}")
        object.__setattr__(self, name, value)

    def presence_delay(self, main: bool, unanswered: int = 0) -> float:
        """Seconds to a remote's next presence check: ``period`` (plus ``offset`` off
        main); on main doubled for each of ``unanswered`` attempts in a row, up to
        ``retry_backoff_max``."""
        if not main:
            return self.period + self.offset
        backoff: float = self.period * 2.0 ** min(unanswered, 30)
        return min(backoff, max(self.period, self.retry_backoff_max))
