"""Both sans-IO stacks keep a clock that only goes on: a ``now`` behind it (a driver's
clock read on another core, a test's stale value) is ignored, never taken back."""

from __future__ import annotations

from pathlib import Path

from lane import LaneStack, LocalYard
from road.stack import LocalEstate, RoadConfig, RoadStack


def test_a_road_stack_s_clock_never_goes_back() -> None:
    stack = RoadStack(LocalEstate("a"), RoadConfig(message_ttl=30.0), now=100.0)
    remote = stack.add_remote(("127.0.0.1", 9))
    stack.handle_timer(50.0)
    stack.receive_datagram(b"garbage", ("127.0.0.1", 9), 40.0)
    stack.datagrams_to_send(60.0)
    stack.transmit(b"m", to=remote.name, now=70.0)
    assert stack.now == 100.0
    assert [o.expires for o in remote.outbox] == [130.0]  # from the clock, not the stale now
    stack.handle_timer(101.0)
    assert stack.now == 101.0


def test_a_lane_stack_s_clock_never_goes_back(tmp_path: Path) -> None:
    stack = LaneStack(LocalYard("a", "lane", str(tmp_path)), now=100.0)
    stack.handle_timer(50.0)
    stack.receive_datagram(b"garbage", None, 40.0)
    assert stack.now == 100.0
    stack.handle_timer(101.0)
    assert stack.now == 101.0
