"""The outbox: put messages back in transmit order, expire them, and report their fate as
events (starting them is the pump's, :class:`road._pump.MessagePump`).

Each function here is a method of :class:`road.stack.RoadStack` (bound there by name);
its first argument is the stack.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from road import events
from road.remote import Outgoing, Remote

if TYPE_CHECKING:
    from road.stack import RoadStack


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
