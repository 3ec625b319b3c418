"""A tree of estates with relays on the simulated road, each estate a RoadStack and its bus.

Every estate is what ``raetlike estate NAME [--main] [--join UP] --bus`` runs: a
RoadStack with an :class:`raetlike.hosting.EstateBus` hosted on it, so the links
(upstream, relays trusted by role) are made by the real hosting rules, not by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from raetlike.bus import BusConfig, BusNode, Call, Reply, follows_failover
from raetlike.channels import Hosted
from raetlike.hosting import EstateBus
from raetlike.multimain import MultiConfig, MultiMain, MultiMode
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.buskit import FAST
from tests.roadkit import FilterNet
from tests.simlink import Address, Impairment

BASE: Address = ("127.0.0.1", 7700)


@dataclass
class Tree:
    """Estates by name on one simulated network: stacks, bus nodes, hosting, addresses."""

    net: FilterNet
    stacks: dict[str, RoadStack]
    buses: dict[str, EstateBus]
    addresses: dict[str, Address]
    parents: dict[str, str | None]

    def node(self, name: str) -> BusNode:
        return self.buses[name].node

    def run_until(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        assert self.net.run_until(condition, timeout=timeout), f"not by t={self.net.now:.3f}"

    def call(self, origin: str, target: str, topic: str, payload: Any = None) -> list[Reply]:
        """Send a request from ``origin``; returns the list its one reply lands in."""
        got: list[Reply] = []
        self.node(origin).send(target, Call(topic, payload), got.append, now=self.net.now)
        return got

    def rpc(self, origin: str, target: str, topic: str, payload: Any = None) -> Reply:
        got = self.call(origin, target, topic, payload)
        self.run_until(lambda: bool(got))
        assert len(got) == 1
        return got[0]

    def linked(self) -> bool:
        """Every estate has its parent as upstream, and each parent links its children."""
        return all(
            self.node(name).upstream == parent and name in self.node(parent).links
            for name, parent in self.parents.items() if parent is not None)

    def routed(self) -> bool:
        """Every estate is reachable by name from the top (routes learnt from keepalives)."""
        top = self.node(self.top)
        return all(top.route_to(name) is not None for name in self.parents if name != self.top)

    @property
    def top(self) -> str:
        return next(name for name, parent in self.parents.items() if parent is None)

    def add(self, name: str, parent: str, config: BusConfig = FAST) -> Address:
        """A new leaf ``name`` (at a new address) joining ``parent``; returns its address."""
        address = (BASE[0], BASE[1] + 100 + len(self.net.stacks))
        self.stacks[name], self.buses[name] = _estate(self.net, address, name, config,
                                                      main=False, relays=frozenset())
        self.addresses[name] = address
        self.parents[name] = parent
        self.stacks[name].join(self.addresses[parent], now=self.net.now)
        return address

    def add_hot(self, name: str, mains: tuple[str, ...], config: BusConfig = FAST) -> None:
        """A new leaf ``name`` joined to each of ``mains`` in hot mode (``--multi hot``)."""
        address = (BASE[0], BASE[1] + 100 + len(self.net.stacks))
        stack = RoadStack(LocalEstate(name), RoadConfig(), now=self.net.now)
        road = MultiMain(stack, [self.addresses[main] for main in mains],
                         MultiConfig(mode=MultiMode.HOT), movable=follows_failover)
        bus = EstateBus(BusNode(name, config=config, now=self.net.now), road, ttl=5.0)
        bus.node.serve("echo.", lambda request: request.payload)
        self.net.add(address, Hosted(road, [bus]))
        self.stacks[name], self.buses[name], self.addresses[name] = stack, bus, address
        road.start(self.net.now)


def _estate(net: FilterNet, address: Address, name: str, config: BusConfig, *, main: bool,
            relays: frozenset[str]) -> tuple[RoadStack, EstateBus]:
    """An estate as ``raetlike estate NAME [--main] --bus`` runs it, serving ``echo.``."""
    stack = RoadStack(LocalEstate(name, main=main), RoadConfig(), now=net.now)
    bus = EstateBus(BusNode(name, config=config, now=net.now), stack, ttl=5.0, relays=relays)
    bus.node.serve("echo.", lambda request: request.payload)
    net.add(address, Hosted(stack, [bus]))
    return stack, bus


def make_tree(parents: Mapping[str, str | None], *, mains: frozenset[str] = frozenset(),
              trusted: Mapping[str, frozenset[str]] | None = None,
              config: BusConfig = FAST, seed: int = 0,
              impairment: Impairment | None = None, link: bool = True) -> Tree:
    """Estates named by ``parents`` (name -> the estate it joins, None for the top).

    An estate with children, or in ``mains``, is a main estate.  ``trusted`` gives each
    estate the roles of its relays (default: its children that have children).  With
    ``link`` the joins run until every estate is linked and routed from the top.
    """
    net = FilterNet(seed=seed, impairment=impairment or Impairment())
    children: dict[str, list[str]] = {}
    for name, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    stacks: dict[str, RoadStack] = {}
    buses: dict[str, EstateBus] = {}
    addresses: dict[str, Address] = {}
    for index, name in enumerate(parents):
        relays = (trusted or {}).get(name, frozenset(
            child for child in children.get(name, ()) if child in children))
        address = (BASE[0], BASE[1] + index)
        stacks[name], buses[name] = _estate(net, address, name, config,
                                            main=name in children or name in mains,
                                            relays=relays)
        addresses[name] = address
    for name, parent in parents.items():
        if parent is not None:
            stacks[name].join(addresses[parent], now=net.now)
    tree = Tree(net, stacks, buses, addresses, dict(parents))
    if link:
        tree.run_until(lambda: tree.linked() and tree.routed())
    return tree


def two_relays() -> dict[str, str | None]:
    """top; relays r1 and r2; leaves l1a, l1b under r1 and l2a under r2."""
    return {"top": None, "r1": "top", "r2": "top", "l1a": "r1", "l1b": "r1", "l2a": "r2"}
