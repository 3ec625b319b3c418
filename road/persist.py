"""A road stack's keep on disk: :class:`FileRoadKeep` and :func:`open_estate`.

:class:`FileRoadKeep` adapts :class:`raetlike.keep.Keep` (RAET 0.6.8's keep
layout) to the :class:`road.keeping.RoadKeep` protocol a :class:`RoadStack`
needs.  :func:`open_estate` loads an estate's identity and keys from a keep,
or creates them explicitly on first use; a corrupt keep file is never
regenerated, it raises :class:`~raetlike.errors.KeepError` naming the file.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
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


class KeepWriter:
    """One thread that writes a keep's remote records off the stack's loop.

    Each write (temporary file, fsync, rename, directory fsync: ~5 ms a file on a
    busy disk) blocked the loop of a main in a join storm; here the thread waits
    in fsync with the GIL released.  Work is keyed by the file it touches: a new
    write for a key still pending replaces the old one and goes to the back, so
    the latest wins (a save then a removal of the same name: the removal) and
    the latest writes of different keys run in the order they were asked for.  At most
    ``limit`` keys wait; past it the caller waits for the thread to free one (the
    time of one write, as writing inline would take, without letting a write
    overtake one queued before it).  A write's error is logged by the write
    itself; anything else it raises is logged here, never raised.  A thread that
    cannot be started (out of threads or memory) is logged and the writes run
    inline from then on, as with no writer.
    """

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: dict[str, Callable[[], object]] = {}  # key -> write, oldest first
        self._busy = False  # the thread is running a write taken from _pending
        self._closed = False
        self._thread: threading.Thread | None = None
        self.written = 0
        """Writes run (a replaced, still pending one is not counted)."""
        self.coalesced = 0
        """Writes replaced by a later one for the same key before they ran."""
        self.waited = 0
        """Submissions that waited for room (``limit`` keys pending)."""

    def submit(self, key: str, write: Callable[[], object]) -> None:
        """Run ``write`` on the thread (inline once closed), replacing a pending one for ``key``."""
        with self._changed:
            if not self._closed and self._thread is None:
                self._start()
            if not self._closed:
                if self._pending.pop(key, None) is not None:
                    self.coalesced += 1
                while len(self._pending) >= self.limit and not self._closed:
                    self.waited += 1
                    self._changed.wait()
                if not self._closed:
                    self._pending[key] = write
                    self._changed.notify_all()
                    return
        self._write(write)

    def flush(self) -> None:
        """Return once every write asked for so far has run."""
        with self._changed:
            while (self._pending or self._busy) and self._thread_alive():
                self._changed.wait()

    def close(self) -> None:
        """Run what is pending, stop the thread; later writes run inline."""
        self.flush()
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    @property
    def pending(self) -> int:
        """Keys waiting for the thread."""
        return len(self._pending)

    def _start(self) -> None:
        """Start the thread (the lock held, nothing pending); if it cannot start, close:
        every write then runs inline."""
        thread = threading.Thread(target=self._run, daemon=True, name=f"keep writer {self.name}")
        try:
            thread.start()
        except RuntimeError as exc:  # can't start new thread
            log.error("%s: keep writer thread not started (%s): writing on the loop",
                      self.name, exc)
            self._closed = True
        else:
            self._thread = thread

    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._closed:
                    self._changed.wait()
                if not self._pending:
                    return
                key = next(iter(self._pending))
                write = self._pending.pop(key)
                self._busy = True
            try:
                self._write(write)
            finally:
                with self._changed:
                    self._busy = False
                    self.written += 1
                    self._changed.notify_all()

    def _write(self, write: Callable[[], object]) -> None:
        try:
            write()
        except Exception:  # a bug of ours: logged, and the thread goes on
            log.exception("%s: keep write failed", self.name)


class FileRoadKeep:
    """The on-disk keep of one estate, as a :class:`road.keeping.RoadKeep`.

    Every acceptance decision reads the role file again, so an operator's
    ``raetlike keys accept`` in another process is seen by a running stack at
    its next re-check: role and acceptance files are written synchronously.
    Remote records are written in RAET's layout: at once with
    ``max_pending_saves`` 0 (``RoadConfig``'s field; the default), else by a
    :class:`KeepWriter` thread, at most that many waiting; :meth:`flush` waits
    for them, :meth:`close` (the stack's close) too.
    """

    def __init__(self, keep: Keep, *,
                 max_pending_saves: int = 0) -> None:
        if max_pending_saves < 0:
            raise ValueError(f"max_pending_saves must be at least 0, not {max_pending_saves}")
        self.keep = keep
        self._saved_names: dict[int, str] = {}  # uid -> name its record is kept under
        # uid -> the record and capabilities last asked to be written: a save that changes
        # nothing on disk writes nothing (each file costs two fsyncs, docs/relay.md)
        self._written: dict[int, tuple[RemoteEstate, list[str]]] = {}
        self.writer = (None if max_pending_saves == 0
                       else KeepWriter(keep.stack_name, max_pending_saves))
        self._highest_uid = 0  # the highest remote uid asked to be noted in local/estate
        # uid -> former names of a renamed remote whose files go once its record is written
        # under its name (a write that fails leaves them: the remote stays on disk)
        self._formers: dict[int, set[str]] = {}
        self._formers_lock = threading.Lock()  # the loop adds, the writer removes
        self._local_lock = threading.Lock()  # local/estate.json: read, change, write

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
        """Write ``remote/estate.<name>.json`` and its traits (and drop a former name's file),
        on the writer thread from a snapshot taken now."""
        record = RemoteEstate(
            name=remote.name, uid=remote.uid, host_address=remote.host_address,
            role=remote.role or remote.name, far_uid=remote.far_uid,
            session_id=remote.session_id, main=remote.main, kind=remote.kind,
            joined=remote.joined, fqdn=remote.fqdn,
        )
        capabilities = sorted(remote.capabilities)
        if self._written.get(remote.uid) == (record, capabilities):
            return  # nothing on disk would change
        self._written[remote.uid] = (record, capabilities)
        # the fast-mode capability must outlive a restart: a peer that kept
        # it would otherwise speak fast mode to us while we speak RAET's
        traits: dict[str, object] = {"capabilities": capabilities}
        former = self._saved_names.get(remote.uid)
        if former is not None and former != remote.name:
            with self._formers_lock:
                formers = self._formers.setdefault(remote.uid, set())
                formers.add(former)
                formers.discard(remote.name)  # a name taken back is written, not removed
        self._saved_names[remote.uid] = remote.name
        self._submit(_remote_key(remote.name), lambda: self._write_remote(record, traits))
        if remote.uid > self._highest_uid:
            self._highest_uid = remote.uid
            self._submit("local", self._write_highest_uid)

    def remove_remote(self, remote: Remote) -> None:
        """Delete the remote's record (its role file and acceptance stay), after any save
        of it still pending (which this replaces)."""
        name = self._saved_names.pop(remote.uid, remote.name)
        self._written.pop(remote.uid, None)
        with self._formers_lock:
            names = {name} | self._formers.pop(remote.uid, set())
        for each in sorted(names):
            self._submit(_remote_key(each), functools.partial(self._remove_name, each))

    def flush(self) -> None:
        """Return once every remote record asked for so far is on disk."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Write what is pending and stop the writer thread (later saves are written inline)."""
        if self.writer is not None:
            self.writer.close()

    def _submit(self, key: str, write: Callable[[], object]) -> None:
        """``write`` now (no writer thread) or on the writer thread."""
        if self.writer is None:
            write()  # (its errors are logged by the write itself)
        else:
            self.writer.submit(key, write)

    def _write_remote(self, record: RemoteEstate, traits: dict[str, object]) -> None:
        try:
            self.keep.dump_remote(record)
            self.keep.dump_remote_traits(record.name, traits)
        except KeepError as exc:
            # not on disk: the next save of the same state must write it (a write asked
            # since then, of another state, keeps its entry)
            if self._written.get(record.uid) == (record, traits["capabilities"]):
                self._written.pop(record.uid, None)
            log.error("%s: cannot keep remote %r: %s", self.keep.stack_name, record.name, exc)
            return
        # only now the files of its former names (a rename): never no record on disk; a
        # write of a name since changed leaves them to the write of the name it has now
        if self._saved_names.get(record.uid) != record.name:
            return
        with self._formers_lock:
            formers = sorted(self._formers.get(record.uid, set()) - {record.name})
        for former in formers:
            if self._remove_name(former):
                with self._formers_lock:
                    left = self._formers.get(record.uid)
                    if left is not None:
                        left.discard(former)
                        if not left:
                            del self._formers[record.uid]

    def _remove_name(self, name: str) -> bool:
        """Delete ``name``'s record; False (logged) when it could not be."""
        try:
            self.keep.remove_remote(name)
        except KeepError as exc:
            log.error("%s: cannot remove remote %r: %s", self.keep.stack_name, name, exc)
            return False
        return True

    def _write_highest_uid(self) -> None:
        try:
            self._note_uid(self._highest_uid)
        except KeepError as exc:
            log.error("%s: cannot keep the last uid: %s", self.keep.stack_name, exc)

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
        self.flush()
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
        with self._local_lock:  # the writer thread may be noting a uid in the same file
            local = self.keep.load_local()
            if local is not None and local.host_address != address:
                self.keep.dump_local(replace(local, host_address=address,
                                             listen_host_address=None))

    def _note_uid(self, uid: int) -> None:
        with self._local_lock:
            local = self.keep.load_local()
            if local is not None and uid > local.last_uid:
                self.keep.dump_local(replace(local, last_uid=uid))


def _remote_key(name: str) -> str:
    """The writer's key for the files of the remote estate ``name``."""
    return f"remote {name}"


def open_estate(
    keep_dir: str | os.PathLike[str],
    name: str,
    *,
    main: bool,
    host_address: Address,
    auto: AutoMode = AutoMode.ONCE,
    max_pending_saves: int = 0,
) -> tuple[LocalEstate, FileRoadKeep]:
    """The estate ``name`` kept under ``keep_dir``, created with new keys on first use.

    A keep with no local estate and no local keys is new: keys are generated
    and written.  A keep with one but not the other, a file that does not
    parse, or an estate kept under another name raises
    :class:`~raetlike.errors.KeepError` naming the file; nothing is
    regenerated behind the caller's back.  ``main`` and ``host_address`` are
    recorded as given; ``max_pending_saves`` is the config's (remote records waiting
    for the keep's writer thread).  Restore the kept remotes into the stack with
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
    return local, FileRoadKeep(keep, max_pending_saves=max_pending_saves)
