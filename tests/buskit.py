"""A bus on the simulated road: main plus minions, each a BusNode hosted on its RoadStack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raetlike.bus import BusAttachment, BusConfig, BusNode, Call, Reply
from raetlike.channels import Hosted, RoadChannel
from road import events
from road.stack import LocalEstate, RoadStack
from tests.roadkit import FilterNet
from tests.simlink import Address, Impairment

MAIN_ADDRESS: Address = ("127.0.0.1", 7600)

FAST = BusConfig(request_timeout=30.0, retry_interval=2.0, keepalive_interval=1.0,
                 keepalive_timeout=3.0)
"""Short timers so the virtual-time tests stay short."""


@dataclass
class Bus:
    """Nodes and stacks by name on one simulated network."""

    net: FilterNet
    nodes: dict[str, BusNode]
    stacks: dict[str, RoadStack]
    addresses: dict[str, Address]
    replies: list[Reply] = field(default_factory=list)

    def call(self, origin: str, destination: str, topic: str, payload: Any = None,
             **kwargs: Any) -> list[Reply]:
        """Send a request from ``origin``; returns the list its replies land in."""
        got: list[Reply] = []
        self.nodes[origin].send(destination, Call(topic, payload), got.append, now=self.net.now,
                                **kwargs)
        return got

    def run_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        assert self.net.run_until(condition, timeout=timeout), f"not by t={self.net.now:.3f}"

    def rpc(self, origin: str, destination: str, topic: str, payload: Any = None) -> Reply:
        """A request and its one reply."""
        got = self.call(origin, destination, topic, payload)
        self.run_until(lambda: bool(got))
        assert len(got) == 1
        return got[0]

    def stack_events(self, name: str, kind: type) -> list[Any]:
        return self.net.of_type(self.addresses[name], kind)


def make_bus(minions: tuple[str, ...] = ("alpha", "beta"), *, seed: int = 0,
             impairment: Impairment | None = None, config: BusConfig = FAST,
             link_ttl: float = 5.0) -> Bus:
    """A main estate ``main`` and ``minions`` joined to it, all allowed, nodes linked."""
    net = FilterNet(seed=seed, impairment=impairment or Impairment())
    nodes: dict[str, BusNode] = {}
    stacks: dict[str, RoadStack] = {}
    addresses: dict[str, Address] = {}
    for index, name in enumerate(("main", *minions)):
        stack = RoadStack(LocalEstate(name, main=name == "main"))
        node = BusNode(name, config=config)
        address = (MAIN_ADDRESS[0], MAIN_ADDRESS[1] + index)
        net.add(address, Hosted(stack, [BusAttachment(node)]))
        nodes[name], stacks[name], addresses[name] = node, stack, address
    for name in minions:
        stacks[name].join(MAIN_ADDRESS, now=net.now)
    assert net.run_until(lambda: all(
        net.of_type(addresses[name], events.Allowed) for name in minions), timeout=60)
    for name in minions:
        nodes["main"].add_link(RoadChannel(stacks["main"], name, ttl=link_ttl), now=net.now)
        nodes[name].add_link(RoadChannel(stacks[name], "main", ttl=link_ttl), upstream=True,
                             now=net.now)
    return Bus(net, nodes, stacks, addresses)
