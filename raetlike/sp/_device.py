"""A device: a raw REP paired with a raw REQ (or RESPONDENT with SURVEYOR), forwarding.

Requests taken in at the front (which pushed their channel id) go out of the
back with their stack as it is; replies coming into the back go out of the
front, which pops the channel id to find the way.  The device keeps nothing
per message: the stack is the route.
"""

from __future__ import annotations

from raetlike.errors import LocalProtocolError
from raetlike.sp._events import RawReply, RawResponse
from raetlike.sp._rep import Rep
from raetlike.sp._req import Req
from raetlike.sp._respondent import Respondent
from raetlike.sp._surveyor import Surveyor

__all__ = ["Device"]


class Device:
    """Forwards between a raw front (REP/RESPONDENT) and a raw back (REQ/SURVEYOR)."""

    __slots__ = ("back", "front")

    def __init__(self, front: Rep | Respondent, back: Req | Surveyor) -> None:
        """Pair ``front`` and ``back``; both raw, and of matching patterns."""
        if not (front.raw and back.raw):
            raise LocalProtocolError("a device is made of raw endpoints")
        if isinstance(front, Rep) != isinstance(back, Req):
            raise LocalProtocolError("a device pairs REP with REQ, or RESPONDENT with SURVEYOR")
        self.front = front
        self.back = back

    def pump(self, now: float) -> int:
        """Move everything waiting across, both ways; returns how many messages moved."""
        moved = 0
        while (incoming := self.front.next_event()) is not None:
            self.back.forward(incoming.backtrace, incoming.body, now)
            moved += 1
        while (outcome := self.back.next_event()) is not None:
            if isinstance(outcome, RawReply | RawResponse):
                self.front.answer(outcome.backtrace, outcome.body)
                moved += 1
        return moved
