"""The outbox and message pump: start queued messages within the window and the ordering
bound, requeue or expire them, and report their fate as events.

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from road import events
from road._message import Messenger
from road.remote import Outgoing, Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


def pump(stack: RoadStack, remote: Remote) -> None:
    if not remote.allowed or remote.session_box is None or remote.alive is False:
        return
    if stack._fast.links and stack._fast.takes(remote):
        return  # the fast link pulls from the outbox as its window opens
    config = stack.config
    for messenger in list(stack._stalled.get(remote.uid, {})):
        if remote.segments_in_flight >= config.window:
            return
        stack._stalled[remote.uid].pop(messenger, None)
        messenger.pump()
    flying = stack._in_flight.setdefault(remote.uid, {})
    while (remote.outbox and len(flying) < config.max_messages_in_flight
           and remote.segments_in_flight < config.window):
        # Ordering bound: a message starts only within max_messages_in_flight starts
        # of the oldest one still in flight, so at most that many later messages can
        # overtake any message (docs/road.md, "Delivery guarantees").
        launched = stack._launched.get(remote.uid, 0)
        oldest = next(iter(flying), None)
        if oldest is not None and launched - oldest.launch >= config.max_messages_in_flight:
            return
        outgoing = remote.outbox.popleft()
        if outgoing.expires <= stack.now:
            expire(stack, remote, outgoing, "time to live ran out while queued")
            continue
        messenger = Messenger(stack, remote, outgoing)
        stack._launched[remote.uid] = messenger.launch = launched + 1
        messenger.start()


def stall(stack: RoadStack, messenger: Messenger) -> None:
    stack._stalled.setdefault(messenger.remote.uid, {})[messenger] = None


def window_opened(stack: RoadStack, remote: Remote) -> None:
    pump(stack, remote)


def sent(stack: RoadStack, remote: Remote, outgoing: Outgoing) -> None:
    stack.stats.messages_sent += 1
    stack._emit(events.MessageSent(remote.name, outgoing.message_id))


def requeue(stack: RoadStack, remote: Remote, outgoing: Outgoing) -> None:
    if outgoing.expires <= stack.now:
        expire(stack, remote, outgoing, "time to live ran out")
        return
    # back in transmit order: several messengers requeued one after another must
    # not come out reversed (the outbox is ordered by message id)
    position = 0
    for queued in remote.outbox:
        if queued.message_id > outgoing.message_id:
            break
        position += 1
    remote.outbox.insert(position, outgoing)
    watch_expiry(stack, remote, outgoing.expires)


def expire(stack: RoadStack, remote: Remote, outgoing: Outgoing, reason: str) -> None:
    stack.stats.messages_expired += 1
    stack._emit(events.MessageExpired(remote.name, outgoing.message_id, outgoing.body,
                                     reason))


def expire_queued(stack: RoadStack, remote: Remote, now: float) -> float:
    """Give back the outbox's messages whose time to live ran out by ``now``
    (MessageExpired); the soonest expiry among those left (inf: none)."""
    soonest = math.inf
    keep: deque[Outgoing] = deque()
    for outgoing in remote.outbox:
        if outgoing.expires <= now:
            expire(stack, remote, outgoing, "time to live ran out while queued")
        else:
            keep.append(outgoing)
            soonest = min(soonest, outgoing.expires)
    remote.outbox = keep
    return soonest


def watch_expiry(stack: RoadStack, remote: Remote, expires: float) -> None:
    """A message with time to live until ``expires`` joined the outbox: make sure a timer
    is due by then (one heap entry per new soonest expiry, not one per message)."""
    if expires < remote.outbox_soonest:
        remote.outbox_soonest = expires
        stack._schedule(remote)
