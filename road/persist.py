"""A road stack's keep on disk: :class:`FileRoadKeep` and :func:`open_estate`.

:class:`FileRoadKeep` adapts :class:`raetlike.keep.Keep` (RAET 0.6.8's keep
layout) to the :class:`road.keeping.RoadKeep` protocol a :class:`RoadStack`
needs.  :func:`open_estate` loads an estate's identity and keys from a keep,
or creates them explicitly on first use; a corrupt keep file is never
regenerated, it raises :class:`~raetlike.errors.KeepError` naming the file.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.errors import KeepError
from raetlike.keep import Keep, RemoteEstate, StackTraits
from raetlike.keep import LocalEstate as KeptLocal
from raetlike.wire.kinds import Acceptance, AutoMode
from road.keeping import expires
from road.remote import Address, Remote, bounded_capabilities
from road.stack import LocalEstate

if TYPE_CHECKING:
    from road.stack import RoadStack

__all__ = ["FileRoadKeep", "open_estate"]

log = logging.getLogger(__name__)

FIRST_UID = 1
"""The uid a new local estate takes (RAET's default for a fresh keep)."""
MAX_KEPT_CAPABILITIES = 16
"""Capabilities read back per remote from a keep (``RoadConfig.max_join_extras``' default)."""


class FileRoadKeep:
    """The on-disk keep of one estate, as a :class:`road.keeping.RoadKeep`.

    Every acceptance decision reads the role file again, so an operator's
    ``raetlike keys accept`` in another process is seen by a running stack at
    its next re-check.  Remote records are written in RAET's layout.
    """

    def __init__(self, keep: Keep) -> None:
        self.keep = keep
        self._saved_names: dict[int, str] = {}  # uid -> name its record is kept under
        # uid -> the record and capabilities last written: a save that changes nothing on
        # disk writes nothing (each file costs two fsyncs; a 2,000-estate loopback run's
        # main spent 35 % of its time in them, docs/relay.md)
        self._written: dict[int, tuple[RemoteEstate, list[str]]] = {}

    @property
    def auto(self) -> AutoMode:
        """How keys never seen before are treated."""
        return self.keep.auto

    # -- RoadKeep ---------------------------------------------------------

    def acceptance_for(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> Acceptance:
        """The keep's verdict on ``role`` with these keys (rejected if it cannot be kept)."""
        try:
            return self.keep.acceptance_for(role, verify_key, public_key)
        except KeepError as exc:
            log.error("%s: cannot decide on role %r: %s", self.keep.stack_name, role, exc)
            return Acceptance.REJECTED

    def save_remote(self, remote: Remote) -> None:
        """Write ``remote/estate.<name>.json`` (and drop the file of a former name)."""
        try:
            record = RemoteEstate(
                name=remote.name, uid=remote.uid, host_address=remote.host_address,
                role=remote.role or remote.name, far_uid=remote.far_uid,
                session_id=remote.session_id, main=remote.main, kind=remote.kind,
                joined=remote.joined, fqdn=remote.fqdn,
            )
            capabilities = sorted(remote.capabilities)
            written = self._written.get(remote.uid)
            if written is not None and written[0] == record and written[1] == capabilities:
                return
            if written is None or written[0] != record:
                self.keep.dump_remote(record)
            # the fast-mode capability must outlive a restart: a peer that kept
            # it would otherwise speak fast mode to us while we speak RAET's
            if written is None or written[1] != capabilities or written[0].name != record.name:
                self.keep.dump_remote_traits(remote.name, {"capabilities": capabilities})
            self._written[remote.uid] = (record, capabilities)
            former = self._saved_names.get(remote.uid)
            if former is not None and former != remote.name:
                self.keep.remove_remote(former)
            self._saved_names[remote.uid] = remote.name
            self._note_uid(remote.uid)
        except KeepError as exc:
            log.error("%s: cannot keep remote %r: %s", self.keep.stack_name, remote.name, exc)

    def remove_remote(self, remote: Remote) -> None:
        """Delete the remote's record (its role file and acceptance stay)."""
        name = self._saved_names.pop(remote.uid, remote.name)
        self._written.pop(remote.uid, None)
        try:
            self.keep.remove_remote(name)
        except KeepError as exc:
            log.error("%s: cannot remove remote %r: %s", self.keep.stack_name, name, exc)

    def role_status(self, role: str) -> Acceptance | None:
        """The role's acceptance on disk now (None: no role file), recording nothing."""
        try:
            record = self.keep.load_role(role)
        except KeepError as exc:
            log.error("%s: cannot read role %r: %s", self.keep.stack_name, role, exc)
            return Acceptance.REJECTED
        return None if record is None else record.acceptance

    def waiting_roles(self) -> list[str]:
        """Roles on disk that wait for an operator (pending; rejected under auto never)."""
        try:
            records = self.keep.list_roles()
        except KeepError as exc:
            log.error("%s: cannot list roles: %s", self.keep.stack_name, exc)
            return []
        return [record.role for record in records if expires(self.auto, record.acceptance)]

    def expire_role(self, role: str) -> bool:
        """Delete ``role``'s file if it still waits for an operator (``pending_key_ttl``)."""
        if not expires(self.auto, self.role_status(role)):
            return False
        try:
            return self.keep.delete(role)
        except KeepError as exc:
            log.error("%s: cannot remove role %r: %s", self.keep.stack_name, role, exc)
            return False

    def forget_role(self, role: str, verify_key: VerifyKey, public_key: PublicKey) -> bool:
        """Delete ``role``'s file if it holds these keys and no operator rejected it."""
        try:
            record = self.keep.load_role(role)
            if (record is None or record.acceptance is Acceptance.REJECTED
                    or not record.has_keys(verify_key, public_key)):
                return False
            return self.keep.delete(role)
        except KeepError as exc:
            log.error("%s: cannot remove role %r: %s", self.keep.stack_name, role, exc)
            return False

    # -- restoring --------------------------------------------------------

    def kept_remotes(self) -> list[Remote]:
        """The kept remote estates with their kept keys, session ids advanced by one.

        As RAET does at start-up, each restored remote gets the next session
        id, so the far side can tell traffic of this run from the last one.
        """
        restored: list[Remote] = []
        for record in self.keep.load_remotes().values():
            role = self.keep.load_role(record.role)
            remote = Remote(
                uid=record.uid, name=record.name, host_address=record.host_address,
                far_uid=record.far_uid, main=bool(record.main), kind=record.kind or 0,
                role=record.role, fqdn=record.fqdn or record.host_address[0],
                joined=record.joined, session_id=record.session_id,
                verify_key=None if role is None else role.verify_key,
                public_key=None if role is None else role.public_key,
                acceptance=None if role is None else role.acceptance,
            )
            traits = self.keep.load_remote_traits(record.name)
            capabilities = traits.get("capabilities")
            if isinstance(capabilities, list):  # bounded: a keep written before the bound
                remote.capabilities = bounded_capabilities(capabilities, MAX_KEPT_CAPABILITIES)
            remote.next_session_id()
            restored.append(remote)
        return restored

    def restore_remotes(self, stack: RoadStack) -> list[Remote]:
        """Add every kept remote to ``stack`` (same uids), saving the advanced session ids."""
        restored = []
        for role in self.waiting_roles():  # pending_key_ttl counts from this start
            stack.admission.since.setdefault(role, stack.now)
        for remote in self.kept_remotes():
            if remote.uid == stack.local.uid or remote.uid in stack.remotes:
                log.warning("%s: kept remote %r reuses uid %d; skipped",
                            self.keep.stack_name, remote.name, remote.uid)
                continue
            stack._add_remote(remote)  # the kept uid, not a new one
            self.save_remote(remote)
            if remote.main or not stack.local.main:
                # the main we joined before: our own choice of address, as join() is
                stack._budget.validate(remote.host_address)
            restored.append(remote)
            log.info("%s: restored remote %r (uid %d, far uid %d, session %d)",
                     self.keep.stack_name, remote.name, remote.uid, remote.far_uid,
                     remote.session_id)
        return restored

    # -- the local estate -------------------------------------------------

    def record_address(self, address: Address) -> None:
        """Keep the address the estate is bound to now (e.g. after binding port 0)."""
        local = self.keep.load_local()
        if local is not None and local.host_address != address:
            self.keep.dump_local(replace(local, host_address=address, listen_host_address=None))

    def _note_uid(self, uid: int) -> None:
        local = self.keep.load_local()
        if local is not None and uid > local.last_uid:
            self.keep.dump_local(replace(local, last_uid=uid))


def open_estate(
    keep_dir: str | os.PathLike[str],
    name: str,
    *,
    main: bool,
    host_address: Address,
    auto: AutoMode = AutoMode.ONCE,
) -> tuple[LocalEstate, FileRoadKeep]:
    """The estate ``name`` kept under ``keep_dir``, created with new keys on first use.

    A keep with no local estate and no local keys is new: keys are generated
    and written.  A keep with one but not the other, a file that does not
    parse, or an estate kept under another name raises
    :class:`~raetlike.errors.KeepError` naming the file; nothing is
    regenerated behind the caller's back.  ``main`` and ``host_address`` are
    recorded as given.  Restore the kept remotes into the stack with
    :meth:`FileRoadKeep.restore_remotes` once the stack exists.
    """
    keep = Keep(keep_dir, name, auto=auto)
    kept = keep.load_local()
    keys = keep.load_local_role()
    if kept is None and keys is None:
        kept = KeptLocal(name=name, uid=FIRST_UID, host_address=host_address, role=name,
                         last_uid=FIRST_UID)
        keys = keep.create_local(kept)
    elif kept is None:
        raise KeepError(f"{keep.local_estate_path}: missing, but local keys exist in "
                        f"{keep.local_role_path}; refusing to make a new estate for them")
    elif keys is None:
        raise KeepError(f"{keep.local_role_path}: missing, but {keep.local_estate_path} "
                        "exists; refusing to generate new keys for a known estate")
    if kept.name != name:
        raise KeepError(f"{keep.local_estate_path}: holds estate {kept.name!r}, not {name!r}")
    if kept.host_address != host_address:
        kept = replace(kept, host_address=host_address, listen_host_address=None)
        keep.dump_local(kept)
    traits = keep.load_stack_traits()
    if traits.main != main:
        keep.dump_stack_traits(StackTraits(main=main, kind=traits.kind, mutable=traits.mutable))
    local = LocalEstate(
        name=kept.name, signing_key=keys.signing_key, private_key=keys.private_key,
        main=main, kind=traits.kind or 0, role=keys.role, uid=kept.uid, fqdn=kept.fqdn,
    )
    return local, FileRoadKeep(keep)
