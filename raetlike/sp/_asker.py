"""The sending side shared by REQ and SURVEYOR: a roster, open asks, finished ids, events.

An *ask* is a request (REQ) or a survey (SURVEYOR): it gets a request id,
stays open until it ends, and its id is remembered for a while after, so a
later answer can be told apart from a stray.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from raetlike.sp._channel import Channel, Payload
from raetlike.sp._endpoint import SpEndpoint
from raetlike.sp._framing import Framing
from raetlike.sp._roster import Roster
from raetlike.wire.tags import Backtrace

__all__ = ["Asker"]

_REMEMBERED = 1024
"""How many finished ask ids are kept to tell late answers and duplicates from strays."""


class _Open(Protocol):
    """What an open ask must say: when its timer fires."""

    deadline: float


EventT = TypeVar("EventT")
OpenT = TypeVar("OpenT", bound=_Open)


class Asker(SpEndpoint, Generic[EventT, OpenT]):
    """Sends asks over a roster of channels and takes their answers in; see the module docstring."""

    __slots__ = ("_events", "_finished", "_open", "_roster")

    def __init__(
        self, *, name: str, raw: bool, framing: Framing, max_hops: int, rng: random.Random | None
    ) -> None:
        """An asker with no channels; ``rng`` seeds the first ask id."""
        super().__init__(
            name=name, raw=raw, framing=framing, max_hops=max_hops, rng=rng, request_ids=True
        )
        self._roster = Roster()
        self._open: dict[int, OpenT] = {}
        self._finished: OrderedDict[int, bool] = OrderedDict()
        self._events: deque[EventT] = deque()

    def add_channel(self, channel: Channel) -> None:
        """Take ``channel`` in, at the end of its priority's rotation."""
        self._roster.add(channel)

    def cancel(self, ask_id: int) -> bool:
        """Stop waiting for ``ask_id`` (no SurveyDone for a survey); late answers are strays."""
        if self._open.pop(ask_id, None) is None:
            return False
        self._finish(ask_id, normally=False)
        self.stats.cancelled += 1
        return True

    def in_flight(self) -> list[int]:
        """Ids of the asks still open."""
        return list(self._open)

    def next_event(self) -> EventT | None:
        """The next event, or None."""
        return self._events.popleft() if self._events else None

    def get_timer(self) -> float | None:
        """When the next open ask's timer fires, or None when none is open."""
        return min((ask.deadline for ask in self._open.values()), default=None)

    def _take_answer(
        self, channel: Channel, payload: Payload, raw_event: Callable[[Backtrace, Any], EventT]
    ) -> tuple[int, Any] | None:
        """The ask id and body of a cooked answer, else None.

        Payloads from an unknown channel and garbage are dropped and counted;
        a raw endpoint turns a well-formed answer into ``raw_event`` here.
        """
        if self._roster.get(channel.name) is not channel:
            self.stats.unknown_channel += 1
            return None
        decoded = self._decode(channel, payload)
        if decoded is None:
            return None
        stack, body = decoded
        if self.raw:
            if len(stack) < 2:
                self.stats.malformed += 1
                return None
            self.stats.received += 1
            self._events.append(raw_event(Backtrace.from_tags(stack), body))
            return None
        if len(stack) != 1:
            self.stats.malformed += 1
            return None
        return stack[0], body

    def _finish(self, ask_id: int, *, normally: bool) -> None:
        """Keep ``ask_id`` among the recently finished; ``normally`` unless it was cancelled."""
        self._finished[ask_id] = normally
        self._finished.move_to_end(ask_id)
        while len(self._finished) > _REMEMBERED:
            self._finished.popitem(last=False)

    def _ended_normally(self, ask_id: int) -> bool:
        """True if ``ask_id`` finished recently other than by a cancel."""
        return self._finished.get(ask_id, False)
