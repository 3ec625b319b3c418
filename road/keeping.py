"""What a RoadStack needs from a keep, and an in-memory keep for tests and tools.

The on-disk keep (``raetlike.keep``) is adapted to this interface by
:class:`FileRoadKeep` in :mod:`road.persist`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.wire.kinds import Acceptance, AutoMode

if TYPE_CHECKING:
    from road.remote import Remote

__all__ = ["MemoryKeep", "PendingKeys", "RoadKeep", "RoleRecord", "decide"]


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

    @property
    def auto(self) -> AutoMode:
        """How keys never seen before are treated."""
        ...

    def role_status(self, role: str) -> Acceptance | None:
        """What the keep holds for ``role`` now (None: never seen), recording nothing."""
        ...

    def waiting_roles(self) -> list[str]:
        """Roles that wait for an operator: pending (and, under auto never, rejected)."""
        ...

    def expire_role(self, role: str) -> bool:
        """Remove ``role`` if it is still pending (or, under auto never, rejected)."""
        ...

    def forget_role(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> bool:
        """Remove ``role`` if it still holds these keys and no operator rejected it."""
        ...


def expires(auto: AutoMode, status: Acceptance | None) -> bool:
    """Whether a role with ``status`` is one that ``pending_key_ttl`` may remove.

    Pending always; rejected only under auto mode never, where a role forgotten is
    pending again at its next sighting (under once or always it would be accepted).
    """
    return status is Acceptance.PENDING or (
        status is Acceptance.REJECTED and auto is AutoMode.NEVER)


@dataclass(slots=True)
class PendingKeys:
    """A stack's view of the keys its keep holds for strangers: since when they wait for an
    operator (``pending_key_ttl``, ``max_pending_keys``), and which roles a join of this
    process recorded first and no allow has proven yet (forgotten again when their estate is
    reaped).  Times are the stack's clock."""

    since: dict[str, float] = field(default_factory=dict)
    """Role -> when this stack first saw it waiting for an operator."""
    unproven: dict[str, None] = field(default_factory=dict)
    """Roles first recorded (accepted by auto mode) by a join of this process, never allowed."""


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

    def role_status(self, role: str) -> Acceptance | None:
        record = self.roles.get(role)
        return None if record is None else record.acceptance

    def waiting_roles(self) -> list[str]:
        return [role for role, record in self.roles.items()
                if expires(self.auto, record.acceptance)]

    def expire_role(self, role: str) -> bool:
        if expires(self.auto, self.role_status(role)):
            del self.roles[role]
            return True
        return False

    def forget_role(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> bool:
        record = self.roles.get(role)
        if (record is None or record.acceptance is Acceptance.REJECTED
                or record.verify_key != verify_key or record.public_key != public_key):
            return False
        del self.roles[role]
        return True

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
