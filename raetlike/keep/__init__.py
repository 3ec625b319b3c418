"""The on-disk keep: estates, long-term keys and acceptance, in RAET 0.6.8's layout.

An existing RAET 0.6.8 keep directory loads, and RAET 0.6.8 loads what this
package writes.  See ``docs/keep.md``.
"""

from __future__ import annotations

from raetlike.keep._keep import Keep, default_auto
from raetlike.keep._records import (
    HostAddress,
    LocalEstate,
    LocalRole,
    RemoteEstate,
    RemoteRole,
    StackTraits,
)
from raetlike.wire.kinds import Acceptance, AutoMode

__all__ = [
    "Keep",
    "default_auto",
    "LocalEstate",
    "LocalRole",
    "RemoteEstate",
    "RemoteRole",
    "StackTraits",
    "HostAddress",
    "Acceptance",
    "AutoMode",
]
