"""The register of remote estates: uids, names, addresses, adding, renaming, removing,
saving them to the keep, and bounding the estates that never finish joining.

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import Acceptance
from road import events
from road.remote import Address, Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


def stranger(stack: RoadStack, remote: Remote) -> None:
    """A vacuous join added ``remote``: count it among the strangers, evicting the oldest."""
    stack._strangers[remote.uid] = None
    while len(stack._strangers) > stack.config.max_pending_joins:
        uid = next(iter(stack._strangers))
        del stack._strangers[uid]
        oldest = stack.remotes.get(uid)
        if oldest is not None and not oldest.joined:
            stack.stats.joins_evicted += 1
            remove_remote(stack, oldest, "too many estates that never finished joining")


def next_uid(stack: RoadStack) -> int:
    uid = stack._last_uid
    while True:
        uid = uid + 1 if uid < 0xFFFFFFFF else 1
        if uid != stack.local.uid and uid not in stack.remotes:
            stack._last_uid = uid
            return uid


def by_name(stack: RoadStack, name: str) -> Remote:
    remote = stack.names.get(name)
    if remote is None:
        raise LocalProtocolError(f"no remote estate named {name!r}")
    return remote


def remote_at(stack: RoadStack, address: Address) -> Remote | None:
    for remote in stack.remotes.values():
        if remote.host_address == address:
            return remote
    return None


def add_remote(stack: RoadStack, remote: Remote) -> None:
    if remote.name in stack.names and stack.names[remote.name] is not remote:
        raise LocalProtocolError(f"a remote named {remote.name!r} exists already")
    stack.remotes[remote.uid] = remote
    stack.names[remote.name] = remote
    delay = stack.config.period + (0.0 if stack.local.main else stack.config.offset)
    remote.presence_due = stack.now + delay
    remote.reap_due = stack.now + stack.config.reap_interval
    stack._schedule(remote)


def rename(stack: RoadStack, remote: Remote, name: str) -> None:
    if stack.names.get(remote.name) is remote:
        del stack.names[remote.name]
    remote.name = name
    if remote.uid in stack.remotes:
        stack.names[name] = remote


def remove_remote(stack: RoadStack, remote: Remote, reason: str) -> None:
    for transaction in list(remote.transactions.values()):
        transaction.end()
    stack.remotes.pop(remote.uid, None)
    if stack.names.get(remote.name) is remote:
        del stack.names[remote.name]
    for address, joinee in list(stack.joinees.items()):
        if joinee is remote:
            del stack.joinees[address]
    stack._want_joined.pop(remote.uid, None)
    stack._strangers.pop(remote.uid, None)
    stack._fast.remove(remote, reason)
    while remote.outbox:
        stack._expire(remote, remote.outbox.popleft(), f"remote removed: {reason}")
    stack.keep.remove_remote(remote)
    stack._emit(events.RemoteRemoved(remote.name, reason))


def save_remote(stack: RoadStack, remote: Remote) -> None:
    if remote.uid in stack.remotes:
        stack.keep.save_remote(remote)


def acceptance(
    stack: RoadStack, role: str, verify_key: VerifyKey, public_key: PublicKey,
) -> Acceptance:
    return stack.keep.acceptance_for(role, verify_key, public_key)


def join_extras(stack: RoadStack) -> dict[str, Any]:
    return stack._fast.join_extras()


def capabilities(_stack: RoadStack, remote: Remote, extra: dict[str, Any]) -> None:
    remote.capabilities = frozenset(str(k) for k in extra)
