"""RESPONDENT: takes surveys from many channels and sends each response back the way it came."""

from __future__ import annotations

from typing import Any

from raetlike.sp._answerer import Answerer
from raetlike.sp._events import Survey

__all__ = ["Respondent"]


class Respondent(Answerer):
    """A respondent.  Cooked: ``respond``/``cancel`` each survey once.  Raw: a device's front.

    Drive it with ``add_channel``, ``receive(channel, payload, now)``,
    ``next_event()`` (the next :class:`Survey`, round-robin over channels),
    ``respond(survey, body)`` and ``messages_to_send()``.
    """

    __slots__ = ()

    def next_event(self) -> Survey | None:
        """The next survey, taken round-robin over the channels that have one."""
        taken = self.take()
        return None if taken is None else Survey(*taken)

    def respond(self, survey: Survey, body: Any) -> None:
        """Send ``body`` back to whoever sent ``survey``."""
        self.answer(survey.backtrace, body)

    def cancel_survey(self, survey: Survey) -> bool:
        """Drop ``survey`` without responding; True if it was waiting for a response."""
        return self.cancel(survey.backtrace)
