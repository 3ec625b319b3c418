"""Fast mode's event constructors make the same events as the dataclasses' own."""

from __future__ import annotations

import dataclasses

import pytest

from road import events
from road._fast_events import _setters, message_received, message_sent


def test_message_received_made_fast_equals_the_dataclass_and_stays_frozen() -> None:
    made = message_received("main", {"k": 1}, 7, 8, 9)
    assert made == events.MessageReceived("main", {"k": 1}, 7, 8, 9)
    assert type(made) is events.MessageReceived
    assert repr(made) == repr(events.MessageReceived("main", {"k": 1}, 7, 8, 9))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.body = b"other"  # type: ignore[misc]


def test_message_sent_made_fast_equals_the_dataclass_and_hashes_alike() -> None:
    made = message_sent("minion", 42)
    assert made == events.MessageSent("minion", 42)
    assert hash(made) == hash(events.MessageSent("minion", 42))


def test_a_field_list_that_differs_from_the_dataclass_fails_loudly() -> None:
    with pytest.raises(TypeError, match="fields are"):
        _setters(events.MessageSent, ("remote",))
