"""Lane: yards on UNIX-domain datagram sockets (see docs/design.md)."""

from __future__ import annotations

__all__: list[str] = []
