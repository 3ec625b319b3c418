"""Live RAET 0.6.8 ignores the fast-mode advertisement: joins, allows and messages still work."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.udp import UdpDriver
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.road_interop_kit import InteropRoad

pytestmark = pytest.mark.interop


@pytest.fixture
def road(tmp_path: Path) -> Iterator[InteropRoad]:
    interop = InteropRoad(tmp_path)
    yield interop
    interop.close()


def fast_estate(road: InteropRoad, name: str, *, main: bool = False) -> RoadStack:
    """Our estate with fast mode advertised, on the interop loop."""
    stack = RoadStack(LocalEstate(name, main=main), RoadConfig(fast=True),
                      keep=MemoryKeep(AutoMode.ONCE), now=time.monotonic())
    assert stack._join_extras() == {"rlk": 1}
    driver = UdpDriver(stack)
    road.loop.add(driver)
    road.drivers[name] = driver
    road.stacks[name] = stack
    road.events[name] = []
    return stack


def test_a_raet_estate_joins_our_advertising_main_and_both_stay_in_raet_mode(
    road: InteropRoad,
) -> None:
    ours = fast_estate(road, "alpha", main=True)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: peer.has("joined", remote="alpha"), 10)
    peer.do("allow", name="alpha")
    assert road.until(lambda: peer.has("allowed", remote="alpha")
                      and bool(road.seen("alpha", events.Allowed, remote="beta")), 15)
    peer.do("send", to="alpha", body={"greeting": "from raet"})
    ours.transmit({"greeting": "from raetlike"}, to="beta", now=road.now())
    assert road.until(lambda: bool(road.received("alpha")) and bool(peer.messages()), 10)
    assert road.received("alpha", "beta") == [{"greeting": "from raet"}]
    assert peer.messages("alpha") == [{"greeting": "from raetlike"}]
    assert ours._fast.links == {}
    assert ours.stats.fast_datagrams_sent == 0
    assert peer.errors() == []


def test_our_advertising_estate_joins_a_raet_main_and_both_stay_in_raet_mode(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True)
    ours = fast_estate(road, "beta")
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha"))
                      and peer.has("allowed", remote="beta"), 15)
    ours.transmit({"greeting": "from raetlike"}, to="alpha", now=road.now())
    peer.do("send", to="beta", body={"greeting": "from raet"})
    assert road.until(lambda: bool(road.received("beta")) and bool(peer.messages()), 10)
    assert road.received("beta", "alpha") == [{"greeting": "from raet"}]
    assert peer.messages("beta") == [{"greeting": "from raetlike"}]
    assert ours._fast.links == {}
    assert ours.stats.fast_datagrams_sent == 0
    assert peer.errors() == []
