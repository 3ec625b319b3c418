"""Counters kept by every SP endpoint: what was sent, and what was dropped and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["SpStats"]


@dataclass(slots=True)
class SpStats:
    """Per-endpoint counters; each drop reason has its own field."""

    sent: int = 0
    """Payloads queued for sending (first sends and resends)."""
    received: int = 0
    """Payloads that were well formed and taken in."""
    resent: int = 0
    """Requests sent again after their resend timeout or a lost channel."""
    refused: int = 0
    """Sends a channel would not take."""
    blocked: int = 0
    """Requests no channel would take (backpressure reported)."""
    malformed: int = 0
    """Payloads whose tag stack or body did not parse."""
    ttl_exceeded: int = 0
    """Messages dropped for holding more tags than the loop-avoidance depth."""
    unknown_channel: int = 0
    """Payloads from a channel the endpoint was never given (or lost)."""
    stray: int = 0
    """Replies or responses to no request or survey in flight (or a cancelled one)."""
    duplicate: int = 0
    """Replies to a request already answered; survey responses past a channel's share."""
    late: int = 0
    """Survey responses after the survey's deadline."""
    vanished_channel: int = 0
    """Replies whose channel is gone."""
    overflow: int = 0
    """Incoming requests dropped because their channel's queue was full."""
    cancelled: int = 0
    """Requests or surveys cancelled by the user."""

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return asdict(self)
