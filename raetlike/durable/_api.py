"""The durable road's value types, left to Python by the compiled build: its settings (each
checked against its annotation when made, raetlike._fields, before any compiled code sees
it) and its event (a compiled class may not derive from the road's slotted event classes,
which users test ``isinstance`` against)."""

from __future__ import annotations

from dataclasses import dataclass

from raetlike._fields import checked, field_types
from raetlike.errors import LocalProtocolError
from raetlike.journal import FsyncPolicy
from road import events

__all__ = ["MAX_RANGES", "DurableConfig", "DurableMessageReceived"]

MAX_RANGES = 1 << 20
"""The most ranges a dedup window may keep (a window's snapshot record stays far below
the store's largest record)."""


@dataclass(frozen=True, slots=True)
class DurableConfig:
    """Settings of a durable store (docs/reliability.md, "Durable delivery")."""

    fsync: FsyncPolicy = FsyncPolicy.INTERVAL
    """``always``: fdatasync each message before ``transmit`` returns (survives power
    loss); ``interval``: at most ``fsync_interval`` later; ``never``: the OS decides.
    A killed process loses nothing under any of them."""
    fsync_interval: float = 0.01
    """Seconds between fdatasyncs under ``interval``."""
    max_messages: int = 100_000
    """Messages the outbox holds at most; past it ``transmit`` raises BackpressureError."""
    max_bytes: int = 256 * 1024 * 1024
    """Bytes of stored messages the outbox holds at most (the same error past it)."""
    segment_bytes: int = 16 * 1024 * 1024
    """Size at which the outbox's log starts a new segment (and compacts)."""
    dedup_window: int = 1 << 20
    """How far below a sender's highest number a late message is still told apart (more
    than any sender keeps in flight: ``fast_messages_in_flight`` is 8192)."""
    dedup_ranges: int = 4096
    """Holes a sender's dedup window tracks at most (16 bytes each; past it the lowest
    holes count as delivered)."""
    max_senders: int = 1024
    """Senders whose windows are kept (the least recently heard one goes first): at most
    ``max_senders * dedup_ranges * 16`` bytes of dedup state."""
    checkpoint_every: int = 10_000
    """With a journal: deliveries between dedup snapshots (bounds what a restart reads)."""

    def __post_init__(self) -> None:
        types = field_types(DurableConfig)
        for name in types:  # each setting of its type (raetlike._fields), then in range
            object.__setattr__(self, name,
                               checked("DurableConfig", types, name, getattr(self, name)))
        for name in ("fsync_interval", "max_messages", "max_bytes", "segment_bytes",
                     "dedup_window", "dedup_ranges", "max_senders", "checkpoint_every"):
            if not getattr(self, name) > 0:
                raise LocalProtocolError(f"durable {name} must be positive")
        if self.dedup_ranges > MAX_RANGES:
            raise LocalProtocolError(f"durable dedup_ranges is at most {MAX_RANGES}")



@dataclass(slots=True)
class DurableMessageReceived(events.MessageReceived):
    """A durable message delivered for the first time (``body`` is the original)."""

    store: int
    """The sender's store id."""
    durable_seq: int
    """The message's number among those the sender's store sent to this estate (1, 2, ...:
    what the dedup keeps)."""
