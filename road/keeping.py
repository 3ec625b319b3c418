"""What a RoadStack needs from a keep, and an in-memory keep for tests and tools.

The on-disk keep (``raetlike.keep``) is adapted to this interface by
:class:`FileRoadKeep` in :mod:`road.persist`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.wire.kinds import Acceptance, AutoMode
from road.config import RoadConfig

if TYPE_CHECKING:
    from road.remote import Remote

__all__ = ["Admission", "MemoryKeep", "RoadKeep", "RoleRecord", "decide"]


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

    def flush(self) -> None:
        """Return once every save and removal asked for so far is done."""
        ...

    def close(self) -> None:
        """Finish pending saves (the stack is closing); later ones are done at once."""
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


KEY_SWEEP_INTERVAL = 60.0
"""At most this long between sweeps of expired pending roles (when joins arrive)."""


class Admission:
    """Which keys a stack admits: the keep's verdict by role, within bounds on the keys
    that wait for an operator (the config's ``max_pending_keys`` at once, each at most
    ``pending_key_ttl`` seconds), and the roles a join of this process recorded first that
    no allow has proven yet (forgotten again ``unallowed_reap_after`` after the last join
    that claimed them with their keys, at most ``max_unproven_roles`` held).  An owned part
    of :class:`road.stack.RoadStack` that knows nothing of it: times are the stack's
    clock, passed in.
    """

    def __init__(self, keep: RoadKeep, config: RoadConfig) -> None:
        self.keep = keep
        self.config = config
        """Read at each use (``max_pending_keys``, ``pending_key_ttl``), as the stack's."""
        self.since: dict[str, float] = {}
        """Role -> when this stack first saw it waiting for an operator."""
        self.unproven: dict[str, tuple[float, VerifyKey, PublicKey]] = {}
        """Roles first recorded (accepted by auto mode) by a join of this process, never
        allowed: when each is forgotten, with its keys; in that order."""
        self.expired = 0
        """Pending roles removed from the keep for waiting past ``pending_key_ttl``."""
        self._sweep_at = 0.0

    def verdict(self, role: str, verify_key: VerifyKey, public_key: PublicKey,
                now: float) -> Acceptance | None:
        """The keep's verdict on a role's keys; None when it would be one pending key too
        many.  A key seen for the first time under auto mode never waits for an operator;
        at most ``max_pending_keys`` wait at once (the oldest expire after
        ``pending_key_ttl``)."""
        keep, since, limit = self.keep, self.since, self.config.max_pending_keys
        self.expire(now)
        self.forget_unproven(now)
        known = keep.role_status(role)
        if known is None and keep.auto is AutoMode.NEVER and len(since) >= limit:
            for waiting in list(since):  # an operator may have decided some meanwhile
                if keep.role_status(waiting) is not Acceptance.PENDING:
                    since.pop(waiting)
            if len(since) >= limit:
                return None
        verdict = keep.acceptance_for(role, verify_key, public_key)
        if verdict is Acceptance.PENDING:
            since.setdefault(role, now)
        elif verdict is Acceptance.ACCEPTED:
            since.pop(role, None)
            if known is None or role in self.unproven:
                self._hold_unproven(role, verify_key, public_key, now)
        return verdict

    def _hold_unproven(self, role: str, verify_key: VerifyKey, public_key: PublicKey,
                       now: float) -> None:
        """A join claimed an unproven role with its keys: hold it ``unallowed_reap_after``
        from now (as long as the stranger that join made may stay), within
        ``max_unproven_roles`` (the one due first forgotten early past it)."""
        unproven, config = self.unproven, self.config
        reap_after = config.unallowed_reap_after
        unproven.pop(role, None)  # (to the end: the order is the order of the times)
        unproven[role] = (now + reap_after if reap_after > 0 else math.inf,
                          verify_key, public_key)
        while len(unproven) > config.max_unproven_roles:
            self._forget(next(iter(unproven)))

    def _forget(self, role: str) -> None:
        _, verify_key, public_key = self.unproven.pop(role)
        self.keep.forget_role(role, verify_key, public_key)

    def expire(self, now: float, *, force: bool = False) -> None:
        """Remove roles that waited for an operator longer than ``pending_key_ttl``
        (lazily: at most every ``KEY_SWEEP_INTERVAL`` seconds, when a join asks the keep)."""
        if not force and now < self._sweep_at:
            return
        ttl = self.config.pending_key_ttl
        self._sweep_at = now + min(KEY_SWEEP_INTERVAL, max(ttl / 4, 0.001))
        for role, first in list(self.since.items()):
            if first + ttl <= now:
                del self.since[role]
                if self.keep.expire_role(role):
                    self.expired += 1

    def proven(self, role: str) -> None:
        """An allow proved the role's keys: it stays, whatever becomes of the estate."""
        self.unproven.pop(role, None)

    def forget_unproven(self, now: float) -> None:
        """Forget the unproven roles whose time has come (auto once: a stranger that never
        proved its keys does not hold its role for good).  A stranger removed before its
        time (``max_pending_joins``) leaves its role held: a flood of strangers cannot make
        the role of one that joined lately free for someone else's keys."""
        unproven = self.unproven
        while unproven and next(iter(unproven.values()))[0] <= now:
            self._forget(next(iter(unproven)))


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

    def flush(self) -> None:
        """Nothing waits: saves are done at once."""

    def close(self) -> None:
        """Nothing to finish."""

    def accept(self, role: str) -> None:
        """Operator: accept the keys last seen for ``role``."""
        self.roles[role].acceptance = Acceptance.ACCEPTED

    def reject(self, role: str) -> None:
        """Operator: reject the keys last seen for ``role``."""
        self.roles[role].acceptance = Acceptance.REJECTED
