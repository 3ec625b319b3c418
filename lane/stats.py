"""Typed counters of what a LaneStack did and what it dropped (and why)."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from raetlike.wire.page import BinderStats

__all__ = ["Drop", "LaneStats"]


class Drop(enum.Enum):
    """Why an incoming page was dropped."""

    MALFORMED = "malformed"  # the page head did not parse
    BAD_BODY = "bad-body"  # a completed book did not decode into a mapping
    REFUSED = "refused"  # unknown source yard and the lane refuses unknown yards
    WRONG_DESTINATION = "wrong-destination"  # addressed to another yard and we do not route
    UNKNOWN_DESTINATION = "unknown-destination"  # main: no yard to route it to
    ADDRESS_MISMATCH = "address-mismatch"  # sent from a socket that is not the yard's nor main's
    OWN_NAME = "own-name"  # a page claiming to come from this very yard
    BATCH_TOO_LARGE = "batch-too-large"  # a batch past LaneConfig.coalesce_limit (we granted less)
    INTERNAL_ERROR = "internal-error"  # our bug, tripped by this datagram (logged)
    YARDS_FULL = "yards-full"  # a new yard, and LaneConfig.max_yards known, none of them idle
    FORWARD_FULL = "forward-full"  # main: LaneConfig.max_forward_bytes of routed pages wait


@dataclass(slots=True)
class LaneStats:
    """Counters; read them, never write them from outside the stack."""

    datagrams_received: int = 0
    datagrams_sent: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    messages_sent: int = 0
    """Messages whose every page the kernel took."""
    pages_forwarded: int = 0
    """Main yard: pages routed on to another yard."""
    send_failures: int = 0
    """Datagrams the driver reported as refused by the kernel."""
    retries: int = 0
    """Times a yard's outbox was tried again after a failure."""
    yards_added: int = 0
    yards_evicted: int = 0
    """Idle yards forgotten to make room for new ones (``LaneConfig.max_yards``)."""
    yards_unreachable: int = 0
    messages_undelivered: int = 0
    """Messages handed back in YardUnreachable events (or at close)."""
    forwarded_pages_undelivered: int = 0
    """Routed pages dropped because their destination stayed unreachable."""
    batches_sent: int = 0
    """Datagrams carrying several of our messages to a yard that granted it (coalescing)."""
    batches_received: int = 0
    """Such datagrams received from yards we granted."""
    grants_sent: int = 0
    """Grants we sent to raetlike yards (one per yard session heard directly)."""
    grants_received: int = 0
    """Grants we took (a yard let us send it batches)."""
    dropped: Counter[Drop] = field(default_factory=Counter)
    binder: BinderStats = field(default_factory=BinderStats)
    """Book reassembly: missed first pages, stale books after restarts, evictions."""

    def drop(self, reason: Drop) -> None:
        """Count one dropped page."""
        self.dropped[reason] += 1

    @property
    def dropped_total(self) -> int:
        """All drops, whatever the reason (binder drops not included)."""
        return sum(self.dropped.values())

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready snapshot."""
        out: dict[str, object] = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in {"dropped", "binder"}
        }
        out["dropped"] = {reason.value: count for reason, count in self.dropped.items()}
        binder = self.binder
        out["binder"] = {name: getattr(binder, name) for name in binder.__dataclass_fields__}
        return out
