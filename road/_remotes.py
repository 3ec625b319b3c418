"""What adding and removing a remote means to the stack (timers, the keep, events), saving
remotes, and bounding the estates that never finish joining (acceptance by the keep is
:class:`road.keeping.Admission`'s).  The
indexes themselves are the register's (:class:`road._register.Register`).

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from road import events
from road.remote import Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


MAX_EXTRA_KEY = 32
"""Longest join-body key beyond RAET's that is kept (a capability name)."""
MAX_EXTRA_TEXT = 64
"""Longest string value such a key may carry and still count."""


def stranger(stack: RoadStack, remote: Remote) -> None:
    """A vacuous join added ``remote``: count it among the strangers, evicting the oldest.

    A stranger that completes no allow within ``unallowed_reap_after`` is removed
    (:func:`road._timers.manage`): a join proves nothing (it is unsigned), an allow does.
    """
    stack._strangers[remote.uid] = None
    if stack.config.unallowed_reap_after > 0:
        stack._unallowed[remote.uid] = stack.now + stack.config.unallowed_reap_after
        stack._schedule(remote)
    while len(stack._strangers) > stack.config.max_pending_joins:
        uid = next(iter(stack._strangers))
        del stack._strangers[uid]
        oldest = stack.remotes.get(uid)
        if oldest is not None and not oldest.joined:
            stack.stats.joins_evicted += 1
            remove_remote(stack, oldest, "too many estates that never finished joining")


def add_remote(stack: RoadStack, remote: Remote) -> None:
    """File ``remote`` in the register and start its timers."""
    stack.register.add(remote)
    remote.presence_due = stack.now + stack.config.presence_delay(stack.local.main)
    remote.reap_due = stack.now + stack.config.reap_interval
    stack._schedule(remote)


def remove_remote(stack: RoadStack, remote: Remote, reason: str) -> None:
    for transaction in list(remote.transactions.values()):
        transaction.end()
    stack.register.drop(remote)
    stack._want_joined.pop(remote.uid, None)
    stack._strangers.pop(remote.uid, None)
    stack._unallowed.pop(remote.uid, None)
    stack._retries.pop(remote.uid, None)
    if remote.host_address in stack._budget.validated and not any(
            other.host_address == remote.host_address for other in stack.remotes.values()):
        stack._budget.forget(remote.host_address)
    stack._fast.remove(remote, reason)
    while remote.outbox:
        stack._expire(remote, remote.outbox.popleft(), f"remote removed: {reason}")
    stack.keep.remove_remote(remote)
    stack._emit(events.RemoteRemoved(remote.name, reason))


def save_remote(stack: RoadStack, remote: Remote) -> None:
    if remote.uid in stack.remotes:
        stack.keep.save_remote(remote)


def join_extras(stack: RoadStack) -> dict[str, Any]:
    return stack._fast.join_extras()


def capabilities(stack: RoadStack, remote: Remote, extra: dict[str, Any]) -> None:
    """Take the join body's extra keys as the remote's capabilities (a few short ones)."""
    remote.capabilities = bounded_capabilities(extra, stack.config.max_join_extras)


def bounded_capabilities(extra: Any, limit: int) -> frozenset[str]:
    """At most ``limit`` keys of ``extra`` (a join body's keys beyond RAET's, or a kept
    list of names), each at most ``MAX_EXTRA_KEY`` printable characters, with a number,
    boolean or string of at most ``MAX_EXTRA_TEXT`` characters as value."""
    kept: list[str] = []
    items = extra.items() if isinstance(extra, dict) else ((name, 1) for name in extra)
    for key, value in items:
        if len(kept) >= limit:
            break
        if not isinstance(key, str) or not 0 < len(key) <= MAX_EXTRA_KEY or not key.isprintable():
            continue
        if isinstance(value, str) and len(value) > MAX_EXTRA_TEXT:
            continue
        if not isinstance(value, bool | int | float | str):
            continue
        kept.append(key)
    return frozenset(kept)
