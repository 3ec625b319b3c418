"""The demo's one error."""

from __future__ import annotations

from raetlike.errors import RaetError

__all__ = ["DemoError"]


class DemoError(RaetError):
    """The demo could not do what it shows; the message says what went wrong."""
