"""What a RoadStack needs from a keep, and an in-memory keep for tests and tools.

The on-disk keep (``raetlike.keep``) is adapted to this interface by
:class:`FileRoadKeep` in :mod:`road.persist`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.wire.kinds import Acceptance, AutoMode

if TYPE_CHECKING:
    from road.remote import Remote

__all__ = ["RoadKeep", "MemoryKeep", "RoleRecord", "decide"]


class RoadKeep(Protocol):
    """Acceptance by role, and persistence of remote records."""

    def acceptance_for(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> Acceptance:
        """The acceptance of ``role`` with these keys (may record a first sighting)."""
        ...

    def save_remote(self, remote: Remote) -> None:
        """Persist what we know of ``remote``."""
        ...

    def remove_remote(self, remote: Remote) -> None:
        """Forget ``remote``."""
        ...


@dataclass(slots=True)
class RoleRecord:
    """The keys a role was seen with and what the keep decided about them."""

    acceptance: Acceptance
    verify_key: VerifyKey
    public_key: PublicKey


def decide(
    auto: AutoMode, known: RoleRecord | None, verify_key: VerifyKey, public_key: PublicKey
) -> RoleRecord:
    """RAET's acceptance rules: the verdict on these keys for a role, with the keys it is for.

    A verdict of REJECTED for keys that differ from the known ones is only an
    answer: it carries the known keys, and the keep must not store it (RAET
    never persists a rejection it did not get from an operator).
    """
    if known is None:
        status = Acceptance.PENDING if auto is AutoMode.NEVER else Acceptance.ACCEPTED
        return RoleRecord(status, verify_key, public_key)
    same = known.verify_key == verify_key and known.public_key == public_key
    if auto is AutoMode.ALWAYS:
        return RoleRecord(Acceptance.ACCEPTED, verify_key, public_key)
    if known.acceptance is Acceptance.REJECTED:
        return known
    if not same:
        return RoleRecord(Acceptance.REJECTED, known.verify_key, known.public_key)
    if auto is AutoMode.ONCE:
        return RoleRecord(Acceptance.ACCEPTED, verify_key, public_key)
    return known


class MemoryKeep:
    """A keep that lives in memory: auto modes, pending and operator decisions."""

    def __init__(self, auto: AutoMode = AutoMode.ONCE) -> None:
        self.auto = auto
        self.roles: dict[str, RoleRecord] = {}
        self.remotes: dict[str, Remote] = {}

    def acceptance_for(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> Acceptance:
        record = decide(self.auto, self.roles.get(role), verify_key, public_key)
        if record.verify_key != verify_key or record.public_key != public_key:
            return Acceptance.REJECTED  # changed keys: refused, the known ones stay as they are
        self.roles[role] = record
        return record.acceptance

    def save_remote(self, remote: Remote) -> None:
        self.remotes[remote.name] = remote

    def remove_remote(self, remote: Remote) -> None:
        self.remotes.pop(remote.name, None)

    def accept(self, role: str) -> None:
        """Operator: accept the keys last seen for ``role``."""
        self.roles[role].acceptance = Acceptance.ACCEPTED

    def reject(self, role: str) -> None:
        """Operator: reject the keys last seen for ``role``."""
        self.roles[role].acceptance = Acceptance.REJECTED
