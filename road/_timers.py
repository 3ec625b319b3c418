"""The stack's timers: transactions' redo/timeout deadlines and each remote's presence,
reap, queued-expiry and cleanup times, on two lazy heaps the stack owns
(:class:`road._deadlines.Deadlines`).

An entry may be stale (its deadline moved later or its owner is gone); it then only
causes one early :func:`handle_timer`.  Each function here is a method of
:class:`road.stack.RoadStack` (bound there by name); its first argument is the stack.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from raetlike.wire.kinds import TransactionKind
from road import events
from road._transaction import Transaction
from road.remote import Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


def get_timer(stack: RoadStack) -> float | None:
    """The earliest moment the stack wants :meth:`handle_timer`, or None when idle."""
    times: list[float] = []
    live = stack._transactions
    soonest = stack._transaction_timers.earliest(
        lambda transaction: not transaction.ended and transaction in live)
    if soonest is not None:
        times.append(soonest)
    remotes = stack.remotes
    soonest = stack._remote_timers.earliest(lambda uid: uid in remotes)
    if soonest is not None:
        times.append(soonest)
    times.extend(stack._want_joined.values())
    if stack._fast.links and (fast := stack._fast.deadline(stack.now)) is not None:
        times.append(fast)
    return min(times) if times else None


def handle_timer(stack: RoadStack, now: float) -> None:
    """Let due timers fire: redos, timeouts, presence, reaping, expiries, rejoins."""
    stack._tick(now)
    now = stack.now  # (never behind the clock)
    for transaction in stack._transaction_timers.due(now):
        if transaction.ended or transaction not in stack._transactions:
            continue
        deadline = transaction.deadline()
        if deadline is not None and deadline <= now:
            transaction.handle_timer(now)
    for uid in stack._remote_timers.due(now):
        remote = stack.remotes.get(uid)
        if remote is not None:
            manage(stack, remote)
            schedule(stack, remote)
    stack._fast.handle_timer(now)
    for uid, due in list(stack._want_joined.items()):
        wanted = stack.remotes.get(uid)
        if wanted is None or wanted.joined:
            stack._want_joined.pop(uid, None)
        elif due <= now:
            # a join still open keeps its turn: look again later, never spin on a past deadline
            stack._want_joined[uid] = now + stack.config.rejoin_interval
            if not wanted.in_process(TransactionKind.JOIN):
                stack._start_join(wanted)


def wake(stack: RoadStack, transaction: Transaction, at: float) -> None:
    stack._transaction_timers.push(at, transaction)


def schedule(stack: RoadStack, remote: Remote, at: float | None = None) -> None:
    """Put the remote's next presence, reap, expiry or cleanup time on the heap."""
    config, times = stack.config, [] if at is None else [at]
    if (unallowed := stack._unallowed.get(remote.uid)) is not None:
        times.append(unallowed)
    if not remote.reaped:
        if config.keepalive:
            times.append(remote.presence_due)
        if stack.local.main and config.reap_interval > 0:
            times.append(remote.reap_due)
    if remote.outbox and remote.outbox_soonest < math.inf:
        times.append(remote.outbox_soonest)
    if remote.done_transactions:
        times.append(next(iter(remote.done_transactions.values())))
    if times:
        stack._remote_timers.push(min(times), remote.uid)


def manage(stack: RoadStack, remote: Remote) -> None:
    config = stack.config
    unallowed = stack._unallowed.get(remote.uid)
    if unallowed is not None and unallowed <= stack.now:
        # a stranger that joined (or began to) and never proved its keys with an allow
        stack.stats.strangers_reaped += 1
        stack.admission.forget_unproven(remote.role, remote.verify_key, remote.public_key)
        stack._remove_remote(remote, f"no allow within {config.unallowed_reap_after:g} s "
                                     "of its join")
        return
    if not remote.reaped and config.keepalive and remote.presence_due <= stack.now:
        stack._start_alive(remote)
        remote.presence_due = stack.now + stack._retry_delay(remote)
    if (stack.local.main and config.reap_interval > 0 and not remote.reaped
            and remote.reap_due <= stack.now):
        remote.reaped = True
        stack._emit(events.RemoteReaped(remote.name))
    if remote.outbox_soonest <= stack.now:
        remote.outbox_soonest = stack._expire_queued(remote, stack.now)
    while remote.done_transactions:
        tid, expires = next(iter(remote.done_transactions.items()))
        if expires > stack.now:
            break
        del remote.done_transactions[tid]
