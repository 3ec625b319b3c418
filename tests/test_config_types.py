"""Settings of the wrong type are one-line errors naming the setting, when set (the
compiled build holds its code to the annotations: a float where an int belongs must not
turn into an internal error inside it; raetlike._fields)."""

from __future__ import annotations

import pytest

from raetlike.durable import DurableConfig
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import BodyKind
from road import RoadConfig


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("fast_messages_in_flight", 1e4,
     "RoadConfig.fast_messages_in_flight must be an int, not 10000.0"),
    ("fast_datagram_size", "1232", "RoadConfig.fast_datagram_size must be an int, not '1232'"),
    ("max_redos", True, "RoadConfig.max_redos must be an int, not True"),
    ("fast", 1, "RoadConfig.fast must be a bool, not 1"),
    ("body_kind", 1, "RoadConfig.body_kind must be a BodyKind, not 1"),
    ("period", "1", "RoadConfig.period must be a float, not '1'"),
])
def test_a_road_setting_of_the_wrong_type_is_refused_by_name(setting: str, value: object,
                                                              message: str) -> None:
    with pytest.raises(LocalProtocolError) as made:
        RoadConfig(**{setting: value})  # type: ignore[arg-type]
    assert str(made.value) == message
    config = RoadConfig()
    with pytest.raises(LocalProtocolError) as changed:
        setattr(config, setting, value)
    assert str(changed.value) == message


def test_ints_are_taken_for_floats_and_kept_as_floats() -> None:
    config = RoadConfig(period=2, fast_ack_delay=0)
    assert type(config.period) is float
    assert config.period == 2.0
    config.message_ttl = 30
    assert type(config.message_ttl) is float
    assert RoadConfig(body_kind=BodyKind.MSGPACK).body_kind is BodyKind.MSGPACK


def test_a_durable_setting_of_the_wrong_type_is_refused_by_name() -> None:
    with pytest.raises(LocalProtocolError, match=r"DurableConfig.max_messages must be an int"):
        DurableConfig(max_messages=1e5)  # type: ignore[arg-type]
    assert type(DurableConfig(fsync_interval=1).fsync_interval) is float
