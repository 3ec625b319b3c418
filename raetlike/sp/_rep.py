"""REP: takes requests from many channels fairly and sends each reply back the way it came."""

from __future__ import annotations

from typing import Any

from raetlike.sp._answerer import Answerer
from raetlike.sp._events import Request

__all__ = ["Rep"]


class Rep(Answerer):
    """A replier.  Cooked: ``reply``/``cancel`` each request once.  Raw: a device's front.

    Drive it with ``add_channel``, ``receive(channel, payload, now)``,
    ``next_event()`` (the next :class:`Request`, round-robin over channels),
    ``reply(request, body)`` and ``messages_to_send()``.
    """

    __slots__ = ()

    def next_event(self) -> Request | None:
        """The next request, taken round-robin over the channels that have one."""
        taken = self.take()
        return None if taken is None else Request(*taken)

    def reply(self, request: Request, body: Any) -> None:
        """Send ``body`` back to whoever sent ``request``."""
        self.answer(request.backtrace, body)

    def cancel_request(self, request: Request) -> bool:
        """Drop ``request`` without replying; True if it was waiting for a reply."""
        return self.cancel(request.backtrace)
