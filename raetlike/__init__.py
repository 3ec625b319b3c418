"""raetlike: a secure, reliable, asynchronous event transport in the spirit of RAET."""

from __future__ import annotations

from raetlike.errors import (
    BackpressureError,
    CryptoError,
    KeepError,
    LocalProtocolError,
    PacketError,
    ProtocolError,
    RaetError,
    RemoteProtocolError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "RaetError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "PacketError",
    "CryptoError",
    "KeepError",
    "BackpressureError",
]
