"""The stack's timers: transactions' redo/timeout deadlines and each remote's presence,
reap, queued-expiry and cleanup times, on lazy heaps.

An entry may be stale (its deadline moved later or its owner is gone); it then only
causes one early :func:`handle_timer`.  Each function here is a method of
:class:`road.stack.RoadStack` (bound there by name); its first argument is the stack.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from raetlike.wire.kinds import TransactionKind
from road import _lifecycle, _remotes, events
from road._transaction import Transaction
from road.remote import Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


def get_timer(stack: RoadStack) -> float | None:
    """The earliest moment the stack wants :meth:`handle_timer`, or None when idle."""
    times: list[float] = []
    heap = stack._transaction_timers
    while heap and (heap[0][2].ended or heap[0][2] not in stack._transactions):
        heapq.heappop(heap)
    if heap:
        times.append(heap[0][0])
    remote_heap = stack._remote_timers
    while remote_heap and remote_heap[0][1] not in stack.remotes:
        heapq.heappop(remote_heap)
    if remote_heap:
        times.append(remote_heap[0][0])
    times.extend(stack._want_joined.values())
    if stack._fast.links and (fast := stack._fast.deadline(stack.now)) is not None:
        times.append(fast)
    return min(times) if times else None


def handle_timer(stack: RoadStack, now: float) -> None:
    """Let due timers fire: redos, timeouts, presence, reaping, expiries, rejoins."""
    stack._tick(now)
    now = stack.now  # (never behind the clock)
    heap = stack._transaction_timers
    fired: dict[Transaction, None] = {}
    while heap and heap[0][0] <= now:
        fired[heapq.heappop(heap)[2]] = None
    for transaction in fired:
        if transaction.ended or transaction not in stack._transactions:
            continue
        deadline = transaction.deadline()
        if deadline is not None and deadline <= now:
            transaction.handle_timer(now)
    remote_heap = stack._remote_timers
    uids: dict[int, None] = {}
    while remote_heap and remote_heap[0][0] <= now:
        uids[heapq.heappop(remote_heap)[1]] = None
    for uid in uids:
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
    heapq.heappush(stack._transaction_timers, (at, next(stack._timer_order), transaction))


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
        heapq.heappush(stack._remote_timers, (min(times), remote.uid))


def manage(stack: RoadStack, remote: Remote) -> None:
    config = stack.config
    unallowed = stack._unallowed.get(remote.uid)
    if unallowed is not None and unallowed <= stack.now:
        # a stranger that joined (or began to) and never proved its keys with an allow
        stack.stats.strangers_reaped += 1
        _remotes.forget_unproven_role(stack, remote)
        stack._remove_remote(remote, f"no allow within {config.unallowed_reap_after:g} s "
                                     "of its join")
        return
    if not remote.reaped and config.keepalive and remote.presence_due <= stack.now:
        stack._start_alive(remote)
        remote.presence_due = stack.now + _lifecycle.retry_delay(stack, remote)
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
