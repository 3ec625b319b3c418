"""raetlike: a secure, reliable, asynchronous event transport in the spirit of RAET."""

from __future__ import annotations

from raetlike import _native

_native.choose()  # before any compiled module can be imported (docs/performance.md)

from raetlike.errors import (  # noqa: E402
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
