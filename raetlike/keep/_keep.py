"""The keep of one stack: RAET 0.6.8's directory layout, typed records, acceptance.

Layout under ``<base_dir>/<stack_name>/`` (all directories 0700, files 0600,
every one owned by the running user, see :mod:`raetlike.keep._files`)::

    local/estate.json               the local estate (LocalEstate)
    local/stack.json                raetlike only: main, kind, mutable (StackTraits)
    role/local/role.json            the local long-term keys (LocalRole)
    remote/estate.<name>.json       one per remote estate (RemoteEstate)
    role/remote/role.<role>.json    one per remote role: keys + acceptance (RemoteRole)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.errors import KeepError
from raetlike.keep._files import (
    ensure_private_directory,
    read_json,
    remove_file,
    write_json,
)
from raetlike.keep._records import (
    LocalEstate,
    LocalRole,
    RemoteEstate,
    RemoteRole,
    StackTraits,
    check_name,
)
from raetlike.wire.kinds import Acceptance, AutoMode

__all__ = ["Keep", "default_auto"]

logger = logging.getLogger(__name__)

_EXTENSION = ".json"
_ESTATE_PREFIX = "estate"
_ROLE_PREFIX = "role"


def default_auto(main: bool) -> AutoMode:
    """Acceptance of keys never seen before when none is asked for: never for a main estate.

    A main estate admits joiners, so a stranger's keys wait for an operator
    (RAET 0.6.8's and Salt's default); an estate that joins a main accepts the
    main's keys the first time, as a Salt minion does.
    """
    return AutoMode.NEVER if main else AutoMode.ONCE


class Keep:
    """Persistent estates, keys and acceptance of one stack, in RAET 0.6.8's layout.

    Reads go to disk every time (files are small), so a running stack sees an
    operator's ``accept``/``reject`` made from another process at its next
    :meth:`acceptance_for` or :meth:`load_role`.  Keys are generated only by
    :meth:`create_local`; a corrupt or unreadable file raises
    :class:`~raetlike.errors.KeepError` naming it and is never overwritten
    behind the caller's back.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        stack_name: str,
        auto: AutoMode = AutoMode.ONCE,
    ) -> None:
        """Open (creating if needed) the keep of ``stack_name`` under ``base_dir``.

        ``base_dir`` and every directory of the keep must be owned by the
        running user and not writable by group or others
        (:class:`~raetlike.errors.UnsafeKeepError` names the fix); the keep's
        own directories are created 0700, and tightened to 0700 if group or
        others may read them.
        """
        self._stack_name = check_name(stack_name, "stack name")
        self._auto = AutoMode(auto)
        base = Path(base_dir).expanduser().absolute()
        ensure_private_directory(base, tighten=False)
        self._directory = base / stack_name
        self._local_dir = self._directory / "local"
        self._remote_dir = self._directory / "remote"
        self._role_dir = self._directory / "role"
        self._local_role_dir = self._role_dir / "local"
        self._remote_role_dir = self._role_dir / "remote"
        for directory in (
            self._directory,
            self._local_dir,
            self._remote_dir,
            self._role_dir,
            self._local_role_dir,
            self._remote_role_dir,
        ):
            ensure_private_directory(directory)

    # -- where things are -------------------------------------------------

    @property
    def stack_name(self) -> str:
        """The stack whose keep this is."""
        return self._stack_name

    @property
    def auto(self) -> AutoMode:
        """How :meth:`acceptance_for` treats keys it has not seen before."""
        return self._auto

    @property
    def directory(self) -> Path:
        """``<base_dir>/<stack_name>``."""
        return self._directory

    @property
    def local_estate_path(self) -> Path:
        """``local/estate.json``."""
        return self._local_dir / f"{_ESTATE_PREFIX}{_EXTENSION}"

    @property
    def stack_traits_path(self) -> Path:
        """``local/stack.json`` (raetlike only; RAET ignores it)."""
        return self._local_dir / f"stack{_EXTENSION}"

    @property
    def local_role_path(self) -> Path:
        """``role/local/role.json``: the private keys."""
        return self._local_role_dir / f"{_ROLE_PREFIX}{_EXTENSION}"

    def remote_estate_path(self, name: str) -> Path:
        """``remote/estate.<name>.json``."""
        check_name(name, "estate name")
        return self._remote_dir / f"{_ESTATE_PREFIX}.{name}{_EXTENSION}"

    def remote_role_path(self, role: str) -> Path:
        """``role/remote/role.<role>.json``."""
        check_name(role, "role")
        return self._remote_role_dir / f"{_ROLE_PREFIX}.{role}{_EXTENSION}"

    # -- the local estate and its keys ------------------------------------

    def load_local(self) -> LocalEstate | None:
        """The local estate, or ``None`` when the keep has none yet."""
        path = self.local_estate_path
        data = read_json(path)
        return None if data is None else LocalEstate.from_json(data, path)

    def dump_local(self, estate: LocalEstate) -> None:
        """Write the local estate (not its keys)."""
        write_json(self.local_estate_path, estate.to_json())

    def load_local_role(self) -> LocalRole | None:
        """The local long-term keys, or ``None`` when the keep has none yet."""
        path = self.local_role_path
        data = read_json(path, secret=True)
        return None if data is None else LocalRole.from_json(data, path)

    def dump_local_role(self, role: LocalRole) -> None:
        """Write the local long-term keys (owner-only)."""
        write_json(self.local_role_path, role.to_json())

    def load_stack_traits(self) -> StackTraits:
        """main/kind/mutable of the local stack; all ``None`` if never written."""
        path = self.stack_traits_path
        data = read_json(path)
        return StackTraits() if data is None else StackTraits.from_json(data, path)

    def dump_stack_traits(self, traits: StackTraits) -> None:
        """Write main/kind/mutable of the local stack."""
        write_json(self.stack_traits_path, traits.to_json())

    def create_local(self, estate: LocalEstate, *, replace: bool = False) -> LocalRole:
        """Generate fresh keys for ``estate.role``, write them and the estate.

        Refuses (:class:`KeepError`) when local keys already exist, unless
        ``replace`` is true: keys are never replaced by accident.
        """
        path = self.local_role_path
        if path.exists() and not replace:
            raise KeepError(f"{path}: local keys already exist; refusing to replace them")
        role = LocalRole.generate(estate.role)
        self.dump_local_role(role)
        self.dump_local(estate)
        logger.info("%s: created local estate %r with new keys", self._stack_name, estate.name)
        return role

    # -- remote estates ---------------------------------------------------

    def load_remote(self, name: str) -> RemoteEstate | None:
        """The remote estate ``name``, or ``None`` when not kept."""
        path = self.remote_estate_path(name)
        data = read_json(path)
        return None if data is None else RemoteEstate.from_json(data, path)

    def load_remotes(self) -> dict[str, RemoteEstate]:
        """All kept remote estates by name."""
        remotes: dict[str, RemoteEstate] = {}
        for name, path in self._kept(self._remote_dir, _ESTATE_PREFIX):
            data = read_json(path)
            if data is None:  # removed while we listed
                continue
            remote = RemoteEstate.from_json(data, path)
            if remote.name != name:
                logger.warning(
                    "%s: %s holds estate %r; using that name", self._stack_name, path, remote.name
                )
            remotes[remote.name] = remote
        return remotes

    def dump_remote(self, estate: RemoteEstate) -> None:
        """Write one remote estate (its keys live in its role file)."""
        write_json(self.remote_estate_path(estate.name), estate.to_json())

    def remove_remote(self, name: str) -> bool:
        """Forget the remote estate ``name`` (not its role); False if not kept."""
        remove_file(self.remote_traits_path(name))
        return remove_file(self.remote_estate_path(name))

    def remote_traits_path(self, name: str) -> Path:
        """``raetlike/remote.<name>.json``: what only raetlike knows of a remote."""
        check_name(name, "estate name")
        return self._directory / "raetlike" / f"remote.{name}{_EXTENSION}"

    def load_remote_traits(self, name: str) -> dict[str, object]:
        """raetlike-only facts about remote ``name`` (e.g. its capabilities); {} if none.

        Kept beside RAET's layout in a directory RAET 0.6.8 never reads.
        """
        return read_json(self.remote_traits_path(name)) or {}

    def dump_remote_traits(self, name: str, traits: dict[str, object]) -> None:
        """Write raetlike-only facts about remote ``name``."""
        path = self.remote_traits_path(name)
        ensure_private_directory(path.parent)
        write_json(path, traits)

    # -- remote roles: keys and acceptance --------------------------------

    def load_role(self, role: str) -> RemoteRole | None:
        """The role's keys and acceptance as on disk now, or ``None``."""
        path = self.remote_role_path(role)
        data = read_json(path)
        return None if data is None else RemoteRole.from_json(data, path)

    reload_role = load_role

    def dump_role(self, record: RemoteRole) -> None:
        """Write one role file."""
        write_json(self.remote_role_path(record.role), record.to_json())

    def list_roles(self) -> list[RemoteRole]:
        """Every kept remote role, sorted by role."""
        roles = []
        for _, path in self._kept(self._remote_role_dir, _ROLE_PREFIX):
            data = read_json(path)
            if data is not None:
                roles.append(RemoteRole.from_json(data, path))
        return sorted(roles, key=lambda record: record.role)

    def acceptance_for(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> Acceptance:
        """Decide on keys presented for ``role``, applying :attr:`auto`; persist the outcome.

        First sighting: pending under ``NEVER``, accepted under ``ONCE`` and
        ``ALWAYS``; the keys are stored either way.  Later sightings with the
        stored keys keep the stored decision, except that ``ONCE`` promotes a
        pending role to accepted.  Keys that differ from the stored ones are
        rejected under ``NEVER`` and ``ONCE`` *without* touching the file (the
        holder of the stored keys stays accepted).  A role an operator rejected
        stays rejected under ``NEVER`` and ``ONCE``.  ``ALWAYS`` accepts
        anything and stores the presented keys (as RAET 0.6.8 does).
        """
        stored = self.load_role(role)
        decision = self._decide(stored, verify_key, public_key)
        if decision is not Acceptance.REJECTED:
            record = RemoteRole(role, decision, verify_key, public_key)
            if record != stored:
                self.dump_role(record)
        logger.debug(  # each attempt of a join asks again: the estate logs what matters once
            "%s: role %r keys %s (auto %s)",
            self._stack_name,
            role,
            decision.name.lower(),
            self._auto.name.lower(),
        )
        return decision

    def _decide(
        self, stored: RemoteRole | None, verify_key: VerifyKey, public_key: PublicKey
    ) -> Acceptance:
        if self._auto is AutoMode.ALWAYS:
            return Acceptance.ACCEPTED
        if stored is None or stored.acceptance is None:
            return Acceptance.PENDING if self._auto is AutoMode.NEVER else Acceptance.ACCEPTED
        if stored.acceptance is Acceptance.REJECTED:
            return Acceptance.REJECTED
        if not stored.has_keys(verify_key, public_key):
            logger.warning(
                "%s: role %r presented keys that differ from the %s ones",
                self._stack_name,
                stored.role,
                stored.acceptance.name.lower(),
            )
            return Acceptance.REJECTED
        if stored.acceptance is Acceptance.PENDING and self._auto is AutoMode.ONCE:
            return Acceptance.ACCEPTED
        return stored.acceptance

    def accept(self, role: str) -> RemoteRole:
        """Operator: accept the stored keys of ``role``."""
        stored = self.load_role(role)
        if stored is None or stored.verify_key is None or stored.public_key is None:
            raise KeepError(f"{self.remote_role_path(role)}: no keys kept for role {role!r}")
        return self._set_acceptance(stored, Acceptance.ACCEPTED)

    def reject(self, role: str) -> RemoteRole:
        """Operator: reject ``role`` (also one never seen: it is then refused on sight)."""
        stored = self.load_role(role) or RemoteRole(role)
        return self._set_acceptance(stored, Acceptance.REJECTED)

    def delete(self, role: str) -> bool:
        """Operator: forget ``role``'s keys; its next sighting is a first one."""
        removed = remove_file(self.remote_role_path(role))
        if removed:
            logger.info("%s: role %r deleted", self._stack_name, role)
        return removed

    def _set_acceptance(self, stored: RemoteRole, acceptance: Acceptance) -> RemoteRole:
        record = RemoteRole(stored.role, acceptance, stored.verify_key, stored.public_key)
        self.dump_role(record)
        logger.info("%s: role %r %s", self._stack_name, record.role, acceptance.name.lower())
        return record

    # -- helpers ----------------------------------------------------------

    @staticmethod
    def _kept(directory: Path, prefix: str) -> Iterator[tuple[str, Path]]:
        """``(name, path)`` of every ``<prefix>.<name>.json`` in ``directory``, sorted."""
        try:
            entries = sorted(os.listdir(directory))
        except OSError as exc:
            raise KeepError(f"{directory}: cannot list keep directory: {exc}") from exc
        for entry in entries:
            root, extension = os.path.splitext(entry)
            head, _, name = root.partition(".")
            if extension == _EXTENSION and head == prefix and name:
                yield name, directory / entry
