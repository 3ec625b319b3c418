"""Who a road stack is (LocalEstate) and how it behaves (RoadConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field

from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import AutoMode, BodyKind, HeadKind

__all__ = ["LocalEstate", "RoadConfig"]


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
    """Whether joins may change a known remote's credentials."""
    auto: AutoMode = AutoMode.ONCE
    """Acceptance of new keys when no keep is given."""
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
    fast: bool = True
    """Advertise fast mode in joins; used with remotes that advertise it too (docs/road.md).

    False keeps every remote in RAET 0.6.8 mode (signed, per-packet boxed)."""
    fast_datagram_size: int = 1232
    """Fast mode's largest datagram (bytes): 1232 fits any IPv6 path; loopback takes 65000."""
    fast_max_window: int = 2 * 1024 * 1024
    """Fast mode's cap on bytes in flight per remote; keep it under the peer's receive buffer."""
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
    max_pending_joins: int = 1000
    """Main: estates added by vacuous joins not completed yet ("strangers") kept at once; past
    it the oldest is removed (``stats.joins_evicted``), so a join flood stays bounded."""
