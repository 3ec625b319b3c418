"""RAET mode's message pump: the messengers sending to each remote, and starting more.

An owned part of :class:`road.stack.RoadStack` that knows nothing of it: it keeps, per
remote, the messengers in flight (in the order they started), those waiting for window
room, and how many were started; and it starts queued messages while the window
(``window`` segments) and the ordering bound (``max_messages_in_flight``) allow.
Making a messenger and giving a message back are the callables it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from road.config import RoadConfig
from road.remote import Outgoing, Remote

if TYPE_CHECKING:
    from road._message import Messenger

__all__ = ["MessagePump"]


class MessagePump:
    """The sending side of RAET-mode messages; see the module doc."""

    def __init__(self, config: RoadConfig,
                 launch: Callable[[Remote, Outgoing], Messenger],
                 expire: Callable[[Remote, Outgoing, str], None]) -> None:
        self.config = config
        self._launch = launch
        self._expire = expire
        self._in_flight: dict[int, dict[Messenger, None]] = {}  # uid -> in start order
        self._stalled: dict[int, dict[Messenger, None]] = {}  # uid -> waiting for room
        self._launched: dict[int, int] = {}  # uid -> messages started to it so far

    def flying(self, uid: int) -> list[Messenger]:
        """The messengers sending to the remote ``uid``, oldest first."""
        return list(self._in_flight.get(uid, {}))

    def held(self, uid: int) -> int:
        """Messages to the remote ``uid`` that a messenger holds (in flight or stalled)."""
        return len(self._in_flight.get(uid, ())) + len(self._stalled.get(uid, ()))

    def track(self, messenger: Messenger) -> None:
        """``messenger`` started."""
        self._in_flight.setdefault(messenger.remote.uid, {})[messenger] = None

    def untrack(self, messenger: Messenger) -> None:
        """``messenger`` ended."""
        uid = messenger.remote.uid
        self._in_flight.get(uid, {}).pop(messenger, None)
        self._stalled.get(uid, {}).pop(messenger, None)

    def stall(self, messenger: Messenger) -> None:
        """``messenger`` has more to send but no window room."""
        self._stalled.setdefault(messenger.remote.uid, {})[messenger] = None

    def pump(self, remote: Remote, now: float) -> None:
        """Let stalled messengers go on, then start queued messages, while there is room."""
        config, uid = self.config, remote.uid
        stalled = self._stalled.get(uid, {})
        for messenger in list(stalled):
            if remote.segments_in_flight >= config.window:
                return
            stalled.pop(messenger, None)
            messenger.pump()
        flying = self._in_flight.setdefault(uid, {})
        while (remote.outbox and len(flying) < config.max_messages_in_flight
               and remote.segments_in_flight < config.window):
            # Ordering bound: a message starts only within max_messages_in_flight starts
            # of the oldest one still in flight, so at most that many later messages can
            # overtake any message (docs/road.md, "Delivery guarantees").
            launched = self._launched.get(uid, 0)
            oldest = next(iter(flying), None)
            if oldest is not None and launched - oldest.launch >= config.max_messages_in_flight:
                return
            outgoing = remote.outbox.popleft()
            if outgoing.expires <= now:
                self._expire(remote, outgoing, "time to live ran out while queued")
                continue
            messenger = self._launch(remote, outgoing)
            self._launched[uid] = messenger.launch = launched + 1
            messenger.start()
