"""A remote's lifecycle: starting joins, allows and presence checks, and what follows when
they complete, fail, or a session changes.

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raetlike.wire.kinds import TransactionKind
from road import events
from road._alive import Aliver
from road._allow import Allowent, Allower
from road._join import Joiner
from road._message import Messenger
from road.remote import Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


def retry_delay(stack: RoadStack, remote: Remote) -> float:
    """Seconds to the remote's next presence check (:meth:`RoadConfig.presence_delay`,
    with our attempts in a row it left unanswered)."""
    return stack.config.presence_delay(stack.local.main, stack._retries.get(remote.uid, 0))


def start_join(stack: RoadStack, remote: Remote, *, renewal: bool = False,
               afresh: bool = False) -> None:
    if remote.in_process(TransactionKind.JOIN):
        return
    if remote.uid in stack._want_joined and remote.uid not in stack._unallowed:
        # we were asked to join this address (join(), a rejoin): our own choice, so no
        # anti-amplification limit on it (road._amplification)
        stack._budget.validate(remote.host_address)
    stack._want_joined.setdefault(remote.uid, stack.now)
    stack._want_joined[remote.uid] = stack.now + stack.config.rejoin_interval
    Joiner(stack, remote, renewal=renewal, afresh=afresh).start()


def start_allow(stack: RoadStack, remote: Remote) -> None:
    if remote.in_process(TransactionKind.JOIN) or remote.in_process(TransactionKind.ALLOW):
        return
    if not remote.joined:
        start_join(stack, remote)
        return
    Allower(stack, remote).start()


def start_alive(stack: RoadStack, remote: Remote, *, asked: bool = False) -> None:
    """The periodic presence check: join, allow or ask "alive?", whichever is due.

    Never a join to a stranger (an estate that joined us vacuously): its joiner joins and
    allows, we only answer.  Each join or allow we start counts as an attempt for the
    back-off of :func:`retry_delay` until one completes.  Not main, a remote that left
    ``allow_tries_before_rejoin`` checks unanswered is allowed again, and after as many
    unanswered allows joined afresh (docs/road.md, "A main that lost us"), unless the
    check was ``asked`` for (:meth:`RoadStack.alive`: "alive?" it is).
    """
    busy = remote.in_process(TransactionKind.JOIN) or remote.in_process(TransactionKind.ALLOW)
    limit = 0 if stack.local.main or asked else stack.config.allow_tries_before_rejoin
    if not remote.joined:
        if remote.uid in stack._unallowed:
            return
        if remote.uid in stack._want_joined or remote.far_uid:
            if not busy:
                tries = stack._retries[remote.uid] = stack._retries.get(remote.uid, 0) + 1
                if limit and remote.far_uid and tries > limit:
                    # joins by the far uid fail (no answer, or renew refused on an
                    # immutable road: a main that lost us): a vacuous one, as below
                    start_join(stack, remote, afresh=True)
                    return
            start_join(stack, remote)
        return
    if not remote.allowed or (limit and remote.unanswered_checks >= limit):
        # not allowed yet, or (not main) it stopped answering "alive?": a main that came
        # back without us drops our checks unanswered; an allow finds out
        if not busy:
            tries = stack._retries[remote.uid] = stack._retries.get(remote.uid, 0) + 1
            if limit and tries > limit:
                # unanswered allows too: the main may have lost our join (killed before
                # it kept it).  A vacuous join finds it either way (a main reuses the
                # remote of the same name): only the far uid may change; name, role and
                # keys must stay (or an immutable road rejects the answer)
                start_join(stack, remote, afresh=True)
                return
        start_allow(stack, remote)
        return
    if remote.in_process(TransactionKind.ALIVE):
        return
    Aliver(stack, remote).start()


def joined(stack: RoadStack, remote: Remote, *, initiator: bool) -> None:
    stack.stats.joins_completed += 1
    remote.failure_warned = False
    stack._strangers.pop(remote.uid, None)
    stack._retries.pop(remote.uid, None)
    stack._want_joined.pop(remote.uid, None)
    stack._save_remote(remote)
    stack._emit(events.Joined(remote.name, remote.uid, remote.main, initiator))
    if initiator:
        start_allow(stack, remote)


def join_ended(stack: RoadStack, remote: Remote, *, joined: bool) -> None:
    if not joined and remote.uid in stack._want_joined:
        stack._want_joined[remote.uid] = stack.now + stack.config.rejoin_interval


def session_started(stack: RoadStack, remote: Remote) -> None:
    remote.allowed = True
    # the allow proved the keys, and the cookie it echoed proved the address
    stack._budget.validate(remote.host_address)
    stack._unallowed.pop(remote.uid, None)
    stack._retries.pop(remote.uid, None)
    stack._pending_keys.unproven.pop(remote.role, None)
    remote.session_keys_changed()  # the one event that may clear message dedup
    remote.done_transactions.clear()
    remote.next_session_id()
    replace_stale_initiators(stack, remote)
    stack._fast.session_started(remote)
    stack._save_remote(remote)
    presence(stack, remote, alive=True)


def allowed(stack: RoadStack, remote: Remote) -> None:
    stack.stats.allows_completed += 1
    remote.failure_warned = False
    stack._emit(events.Allowed(remote.name, remote.session_id))
    stack._fast.allowed(remote)
    stack._pump(remote)


def presence(stack: RoadStack, remote: Remote, *, alive: bool, reason: str = "") -> None:
    if alive:
        remote.unanswered_checks = 0
        stack._retries.pop(remote.uid, None)
    elif stack.local.main:
        stack._retries[remote.uid] = stack._retries.get(remote.uid, 0) + 1
    remote.presence_due = stack.now + retry_delay(stack, remote)
    if alive:
        remote.reap_due = stack.now + stack.config.reap_interval
        remote.reaped = False
        stack._schedule(remote)
        if remote.alive is not True:
            remote.alive = True
            stack._emit(events.Alive(remote.name))
            stack._pump(remote)
        return
    remote.unanswered_checks += 1
    if remote.alive is not False:
        remote.alive = False
        stack._emit(events.RemoteLost(remote.name, reason))
    for messenger in list(stack._in_flight.get(remote.uid, {})):
        messenger.requeue()


def replace_stale_initiators(_stack: RoadStack, remote: Remote) -> None:
    for transaction in list(remote.transactions.values()):
        if transaction.correspondent or remote.own_session_is_valid(transaction.session_id):
            continue
        if transaction.session_id == remote.session_id:
            continue
        if isinstance(transaction, Messenger):
            transaction.requeue()
        else:
            transaction.end()


def remove_stale_correspondents(stack: RoadStack, remote: Remote) -> None:
    for transaction in list(remote.transactions.values()):
        if transaction.correspondent and not remote.remote_session_is_valid(
            transaction.session_id
        ):
            transaction.end()
            if isinstance(transaction, Allowent) and transaction.state is Allowent.States.ACKED:
                # the initiator speaks in a newer session: our allow had finished
                allowed(stack, remote)
