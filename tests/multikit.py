"""A site with several mains on the simulated road: mains, a multi-main minion, a collector.

Every estate is a RoadStack with a bus node (raetlike.hosting.EstateBus); the
minion's stack is driven by a :class:`raetlike.multimain.MultiMain`.  The
*collector* ("sink") is an estate joined hot to every main and subscribed to
``seq.``: it stands for "the application" of docs/multi-main.md, and counts
what it is given.  Everything runs on the virtual clock of
:class:`tests.simlink.SimNet`; a link between two estates can be cut and
restored (:meth:`Site.cut`), a main can be absent (down) and added later.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raetlike.bus import BusConfig, BusNode, follows_failover
from raetlike.hosting import EstateBus
from raetlike.multimain import MainActive, MultiConfig, MultiMain, MultiMode
from road import events
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.simlink import Address, Impairment, SimNet

BUS = BusConfig(request_timeout=30.0, retry_interval=2.0, keepalive_interval=1.0,
                keepalive_timeout=3.0)
"""Short bus timers, so virtual runs stay short."""

PRESENCE_PERIOD = RoadConfig().presence_delay(main=False)
"""A minion's presence period with the default settings (period + offset, 1.5 s)."""

BASE_PORT = 7700


class CutNet(SimNet):
    """A SimNet whose links between two addresses can be cut both ways (any datagram)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cuts: set[frozenset[Address]] = set()
        self.times: dict[Address, list[tuple[float, Any]]] = {}

    def _flush(self) -> None:
        """As SimNet's, and each event stamped with the virtual time it came out."""
        for address, stack in self.stacks.items():
            for data, destination in stack.datagrams_to_send(self.now):
                self._transmit(data, address, destination)
            while (event := stack.next_event()) is not None:
                self.events[address].append(event)
                self.times.setdefault(address, []).append((self.now, event))

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        if frozenset((source, destination)) in self.cuts:
            self.counters.sent += 1
            self.counters.dropped += 1
            return
        super()._transmit(data, source, destination)


class _BusAttachment:
    """An EstateBus as a Hosted attachment: road events in, the node's timers out."""

    def __init__(self, bus: EstateBus) -> None:
        self.bus = bus

    def handle_event(self, event: object, now: float) -> bool:
        return isinstance(event, events.Event) and self.bus.handle_road_event(event, now)

    def get_timer(self) -> float | None:
        return self.bus.node.get_timer()

    def handle_timer(self, now: float) -> None:
        self.bus.node.handle_timer(now)

    def pump(self, now: float) -> int:  # noqa: ARG002
        return 0


@dataclass
class Estate:
    """One estate of the site."""

    name: str
    address: Address
    stack: RoadStack
    bus: EstateBus
    host: Any
    mains: MultiMain | None = None

    @property
    def node(self) -> BusNode:
        return self.bus.node


@dataclass
class Site:
    """Mains, one multi-main minion and a hot collector on one CutNet."""

    net: CutNet
    estates: dict[str, Estate]
    got: Counter[int] = field(default_factory=Counter)
    """Collector: how many times its subscriber was given each ``seq.`` sequence number."""

    def __getitem__(self, name: str) -> Estate:
        return self.estates[name]

    @property
    def minion(self) -> Estate:
        return self.estates["minion"]

    def run_until(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        assert self.net.run_until(condition, timeout=timeout), f"not by t={self.net.now:.3f}"

    def up(self, name: str) -> None:
        """Start (or restart the clock of) the estate ``name`` on the network."""
        estate = self.estates[name]
        self.net.add(estate.address, estate.host)

    def down(self, name: str) -> None:
        """Take ``name`` off the network: it neither sends nor receives (nor ticks)."""
        self.net.stacks.pop(self.estates[name].address, None)

    def cut(self, one: str, other: str, *, cut: bool = True) -> None:
        """Cut (or restore) the link between two estates, both ways."""
        pair = frozenset((self.estates[one].address, self.estates[other].address))
        if cut:
            self.net.cuts.add(pair)
        else:
            self.net.cuts.discard(pair)

    def stack_events(self, name: str, kind: type) -> list[Any]:
        return [e for e in self.net.events.get(self.estates[name].address, [])
                if isinstance(e, kind)]

    def active(self) -> str | None:
        mains = self.minion.mains
        assert mains is not None
        return mains.active

    def linked_up(self, main: str) -> bool:
        """Whether ``main``'s bus and the minion's have each other as links."""
        return ("minion" in self.estates[main].node.links
                and main in self.minion.node.links)

    def collector_ready(self) -> bool:
        """The collector's subscription reached every main that is on the network (its
        keepalive told the main: events published before that are not for it)."""
        sink = self.estates.get("sink")
        return sink is None or all(
            "sink" in self.estates[name].node.links and name in sink.node.links
            and "seq." in self.estates[name].node._links["sink"].subscriptions
            for name in self.main_names() if self.estates[name].address in self.net.stacks)

    def first_time(self, name: str, kind: type, remote: str | None, after: float) -> float:
        """When ``name`` first reported a ``kind`` event (about ``remote``) at or after
        ``after``; fails the test when it never did."""
        for at, event in self.net.times.get(self.estates[name].address, []):
            if at >= after and isinstance(event, kind) and remote in (None, event.remote):
                return at
        raise AssertionError(f"{name}: no {kind.__name__} after t={after}")

    def main_names(self) -> list[str]:
        return [name for name in self.estates if name not in ("minion", "sink")]


def _estate(net: CutNet, name: str, index: int, *, main: bool,
            joins: list[Address] | None = None, multi: MultiConfig | None = None,
            config: RoadConfig | None = None) -> Estate:
    address = ("127.0.0.1", BASE_PORT + index)
    stack = RoadStack(LocalEstate(name, main=main), config or RoadConfig(), now=net.now)
    node = BusNode(name, config=BUS, now=net.now)
    mains = None
    road: RoadStack | MultiMain = stack
    if joins is not None and multi is not None:
        mains = MultiMain(stack, joins, multi, movable=follows_failover)
        road = mains
    bus = EstateBus(node, road, ttl=30.0)
    node.serve("echo.", lambda request: {"from": name, "payload": request.payload})
    if main:
        node.serve("main.", lambda request: {"from": name, "payload": request.payload})
    from raetlike.channels import Hosted  # noqa: PLC0415 - kit-local

    host = Hosted(road, [_BusAttachment(bus)])
    return Estate(name, address, stack, bus, host, mains)


def make_site(mode: MultiMode, *, mains: tuple[str, ...] = ("alpha", "beta"),
              down: tuple[str, ...] = (), seed: int = 0, collector: bool = True,
              failback_after: float | None = None, impairment: Impairment | None = None,
              config: RoadConfig | None = None) -> Site:
    """Mains (those in ``down`` not on the network yet), a minion in ``mode`` and (by
    default) a hot collector subscribed to ``seq.``; started, not yet run."""
    net = CutNet(seed=seed, impairment=impairment or Impairment())
    estates: dict[str, Estate] = {}
    for index, name in enumerate(mains):
        estates[name] = _estate(net, name, index, main=True, config=config)
    addresses = [estates[name].address for name in mains]
    estates["minion"] = _estate(net, "minion", 10, main=False, joins=addresses,
                                multi=MultiConfig(mode, failback_after=failback_after),
                                config=config)
    site = Site(net, estates)
    if collector:
        sink = estates["sink"] = _estate(net, "sink", 11, main=False, joins=addresses,
                                         multi=MultiConfig(MultiMode.HOT), config=config)
        sink.node.subscribe("seq.", lambda event: site.got.update([event.payload["n"]]),
                            now=net.now)
    for name, estate in estates.items():
        if name not in down:
            site.up(name)
        if estate.mains is not None:
            estate.mains.start(net.now)
    return site


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


@dataclass
class FailoverRun:
    """One seeded failover: when the active main went, was seen lost, and was replaced."""

    seed: int
    killed_at: float
    lost_at: float
    switched_at: float
    sent: int
    delivered: Counter[int]

    @property
    def detection(self) -> float:
        return self.lost_at - self.killed_at

    @property
    def switch(self) -> float:
        """From presence saying the main is gone to the next main active."""
        return self.switched_at - self.lost_at

    @property
    def total(self) -> float:
        return self.switched_at - self.killed_at


def failover_run(seed: int, *, count: int = 120, every: float = 0.05,
                 impairment: Impairment | None = None) -> FailoverRun:
    """Stream ``count`` events from the minion; cut it from its active main mid-stream.

    The cut comes at a seeded moment; the stream goes on through the failover.
    """
    site = make_site(MultiMode.FAILOVER, seed=seed, impairment=impairment)
    site.run_until(lambda: site.active() is not None and site.collector_ready()
                   and all(site.linked_up(main) for main in site.main_names()))
    first = site.active()
    assert first is not None
    rng = site.net.rng
    cut_after = rng.randrange(count // 4, count // 2)
    killed_at = lost_at = switched_at = -1.0
    actives_before = len(site.stack_events("minion", MainActive))
    for n in range(1, count + 1):
        site.minion.node.publish("seq.n", {"n": n}, now=site.net.now)
        if n == cut_after:
            site.cut("minion", first)
            killed_at = site.net.now
        site.net.run_for(every)
    site.run_until(lambda: len(site.stack_events("minion", MainActive)) > actives_before)
    site.run_until(lambda: len(site.got) == count, timeout=120)
    site.net.run_for(10.0)  # late copies would show up now
    lost_at = site.first_time("minion", events.RemoteLost, first, killed_at)
    switched_at = site.first_time("minion", MainActive, None, killed_at)
    return FailoverRun(seed, killed_at, lost_at, switched_at, count, Counter(site.got))


def summary(values: list[float]) -> str:
    return (f"p50 {statistics.median(values):.3f} s, max {max(values):.3f} s "
            f"over {len(values)} runs")
