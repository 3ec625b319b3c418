"""A relay on the road: a main estate that joined another main is that main's minion.

Toward the main it joined (``Remote.sought``) a relay acts as any minion does: it
checks presence at a minion's pace, joins again when the main came back without it,
and never reaps it; toward the estates that joined it, it stays their main.
"""

from __future__ import annotations

from pathlib import Path

from road import events
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from tests.simlink import Impairment, SimNet

TOP = ("127.0.0.1", 7560)
RELAY = ("127.0.0.1", 7561)
LEAF = ("127.0.0.1", 7562)
CONFIG = RoadConfig(reap_interval=5.0)


class Road:
    """A top main, a relay (a main that joined it) and a leaf of the relay, with keeps."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.net = SimNet(seed=2, impairment=Impairment(delay=0.01))
        self.top = self.start("top", TOP)
        self.relay = self.start("relay", RELAY)
        self.leaf = self.start("leaf", LEAF, main=False)
        self.relay.join(TOP, now=self.net.now)
        self.leaf.join(RELAY, now=self.net.now)
        assert self.net.run_until(lambda: self.allowed(RELAY, "top")
                                  and self.allowed(LEAF, "relay"), timeout=30)

    def start(self, name: str, address: tuple[str, int], *, main: bool = True) -> RoadStack:
        local, keep = open_estate(self.root / name, name, main=main, host_address=address)
        stack = RoadStack(local, CONFIG, keep=keep, now=self.net.now)
        keep.restore_remotes(stack)
        self.net.add(address, stack)
        return stack

    def allowed(self, address: tuple[str, int], remote: str) -> bool:
        return any(e.remote == remote for e in self.net.of_type(address, events.Allowed))


def test_a_relay_joins_again_when_its_main_came_back_without_it(tmp_path: Path) -> None:
    road = Road(tmp_path)
    assert road.relay.remote("top").sought
    assert not road.top.remote("relay").sought
    road.top.keep.flush()  # its records were written before the crash
    road.net.stacks.pop(TOP)  # kill -9, and the top's record of the relay is lost
    for record in ("remote/estate.relay.json", "raetlike/remote.relay.json"):
        (tmp_path / "top" / "top" / record).unlink()
    road.net.run_for(3.0)
    road.top = road.start("top", TOP)
    road.net.events[RELAY].clear()
    assert road.net.run_until(lambda: road.allowed(RELAY, "top"), timeout=60)
    assert "relay" in road.top.names
    assert road.relay.remote("leaf").alive  # still the leaf's main meanwhile


def test_a_relay_never_reaps_its_main_but_reaps_a_silent_leaf(tmp_path: Path) -> None:
    road = Road(tmp_path)
    road.net.stacks.pop(TOP)
    road.net.stacks.pop(LEAF)
    road.net.run_for(20.0)  # four reap intervals of silence from both
    reaped = {e.remote for e in road.net.of_type(RELAY, events.RemoteReaped)}
    assert reaped == {"leaf"}


def test_a_relay_checks_its_main_at_a_minions_pace(tmp_path: Path) -> None:
    road = Road(tmp_path)
    presence = road.relay._retry_delay
    assert presence(road.relay.remote("top")) == CONFIG.period + CONFIG.offset
    assert presence(road.relay.remote("leaf")) == CONFIG.period
