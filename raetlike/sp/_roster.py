"""The channels of a sending endpoint (REQ, SURVEYOR) and round-robin choice among them."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from itertools import count

from raetlike.errors import LocalProtocolError
from raetlike.sp._channel import Channel

__all__ = ["Roster"]


class Roster:
    """Channels by name, in the order they came; picks the next one fairly.

    The pick goes to the lowest priority number among live channels; among
    channels of that priority it goes round-robin in arrival order, resuming
    after the last one picked even if that one has gone since (so a channel
    that comes or goes neither skips nor repeats anybody's turn).
    """

    __slots__ = ("_channels", "_counter", "_last_pick")

    def __init__(self) -> None:
        """An empty roster."""
        self._channels: dict[str, tuple[int, Channel]] = {}
        self._counter = count()
        self._last_pick: dict[int, int] = {}

    def add(self, channel: Channel) -> None:
        """Take ``channel`` in, at the end of the rotation."""
        if channel.name in self._channels:
            raise LocalProtocolError(f"a channel named {channel.name!r} is already here")
        self._channels[channel.name] = (next(self._counter), channel)

    def remove(self, name: str) -> Channel | None:
        """Drop the channel called ``name``; returns it, or None if it was not here."""
        entry = self._channels.pop(name, None)
        return None if entry is None else entry[1]

    def get(self, name: str) -> Channel | None:
        """The channel called ``name``, if it is here."""
        entry = self._channels.get(name)
        return None if entry is None else entry[1]

    def __len__(self) -> int:
        """How many channels are here."""
        return len(self._channels)

    def alive(self) -> Iterator[Channel]:
        """The live channels, in arrival order."""
        return (channel for _, channel in self._channels.values() if channel.alive)

    def pick(self, exclude: Collection[str] = ()) -> Channel | None:
        """The next channel to use, skipping dead ones and names in ``exclude``."""
        candidates = [
            (order, channel)
            for order, channel in self._channels.values()
            if channel.alive and channel.name not in exclude
        ]
        if not candidates:
            return None
        best = min(channel.priority for _, channel in candidates)
        group = [entry for entry in candidates if entry[1].priority == best]
        last = self._last_pick.get(best, -1)
        order, channel = next((entry for entry in group if entry[0] > last), group[0])
        self._last_pick[best] = order
        return channel
