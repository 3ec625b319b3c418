"""A tree of estates in one process: a top main, relay estates, leaves, each with its bus.

Every estate is what ``raetlike estate NAME [--main] --join UP --bus`` runs, sans-IO: a
RoadStack (fast mode, as the real stack negotiates) with an EstateBus hosted on it
(``raetlike.channels.Hosted``).  The top trusts its relays (``--trust-relay``), the
relays learn their leaves, and tell the top their names.  Datagrams cross a simulated
link (``--delay``) on a virtual clock; nothing is mocked and no socket is opened.

Clock: with ``--charge 1`` (the default) each estate is charged the time it really
took (``time.perf_counter`` around its work: ``time.thread_time`` is a system call here,
95 us, more than the work) on its own virtual clock, as if every estate ran on a core
of its own: a relay that verifies 1,000 joins is busy that long, and what it sends
leaves when it is done.  As a driver drains its socket, an estate takes every datagram
that arrived while it was busy in one wake, then sends and asks its timer once.
``--charge 0`` gives protocol time alone (free CPU).

Reports: time until every estate is joined and allowed to its main (virtual seconds,
and the real CPU seconds of the whole process), until the top can route to every leaf,
datagrams a second at the top and at one relay while idle (presence and bus
keepalives), memory per estate (RSS growth, or tracemalloc with ``--tracemalloc``),
and requests from the top to leaves (virtual round trip, CPU on the path).

    .venv/bin/python tools/scale_tree.py --relays 100 --leaves 999 [--json]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raetlike.bus import BusNode, Call, Errno, Reply
from raetlike.channels import Hosted
from raetlike.hosting import ECHO_PREFIX, EstateBus, echo
from road import events
from road.stack import LocalEstate, RoadConfig, RoadStack

Address = tuple[str, int]
INFINITY = float("inf")


def _address(index: int) -> Address:
    """A distinct IPv4 address per estate (one estate per host, as in a real tree)."""
    return (f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}", 4510)


def _rss() -> int:
    """This process's resident set, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass(slots=True)
class Estate:
    """One estate of the tree, its place, and what the simulation knows of it."""

    index: int
    name: str
    parent: int | None
    stack: RoadStack
    bus: EstateBus
    hosted: Hosted[Address]
    busy: float = 0.0
    """Its virtual clock: it is busy until then (the CPU it used, charged)."""
    scheduled: float = INFINITY
    """The earliest wake it has on the heap."""
    inbox: list[tuple[bytes, Address]] = field(default_factory=list)
    """Datagrams arrived and not yet taken (its socket's receive buffer)."""
    cpu: float = 0.0
    """CPU seconds it used."""
    received: int = 0
    sent: int = 0
    allowed_at: float | None = None
    """When it was allowed by its parent (its own clock)."""


@dataclass
class Tree:
    """The estates, the heap of arrivals and timers, and the counters."""

    charge: float
    delay: float
    estates: list[Estate] = field(default_factory=list)
    by_address: dict[Address, int] = field(default_factory=dict)
    heap: list[tuple[float, int, int, bytes | None, Address | None]] = field(default_factory=list)
    now: float = 0.0
    sequence: int = 0
    processed: int = 0
    allowed: int = 0
    dropped: int = 0

    # -- building ------------------------------------------------------------------------
    def add(self, name: str, parent: int | None, *, main: bool,
            relays: frozenset[str] = frozenset()) -> Estate:
        index = len(self.estates)
        address = _address(index)
        stack = RoadStack(LocalEstate(name, main=main), RoadConfig(), now=self.now)
        bus = EstateBus(BusNode(name, now=self.now), stack, relays=relays)
        bus.node.serve(ECHO_PREFIX, echo)
        estate = Estate(index, name, parent, stack, bus, Hosted(stack, [bus]), busy=self.now)
        self.estates.append(estate)
        self.by_address[address] = index
        return estate

    def join(self, child: Estate) -> None:
        parent = _address(child.parent or 0)
        self.act(child, lambda now: child.stack.join(parent, now=now))

    # -- running -------------------------------------------------------------------------
    def act(self, estate: Estate, command: Callable[[float], object]) -> None:
        """Run ``command(now)`` on ``estate`` now (a join, a request), charged to it."""
        self._process(estate, self.now, command)

    def _push(self, at: float, index: int, data: bytes | None, source: Address | None) -> None:
        self.sequence += 1
        heapq.heappush(self.heap, (at, self.sequence, index, data, source))

    def _process(self, estate: Estate, at: float,
                 command: Callable[[float], object] | None = None) -> None:
        """One wake of ``estate``: its inbox, its due timers (or ``command``), then what
        it sends and its next timer, the time taken charged to its clock."""
        hosted = estate.hosted
        start = max(at, estate.busy)
        began = time.perf_counter()
        if command is not None:
            command(start)
        inbox = estate.inbox
        if inbox:
            estate.inbox = []
            estate.received += len(inbox)
            for data, source in inbox:
                hosted.receive_datagram(data, source, start)
        timer = hosted.get_timer()
        if timer is not None and timer <= start:
            hosted.handle_timer(start)
        out = hosted.datagrams_to_send(start)
        while (event := hosted.next_event()) is not None:
            if isinstance(event, events.Allowed) and estate.allowed_at is None \
                    and estate.parent is not None \
                    and event.remote == self.estates[estate.parent].name:
                estate.allowed_at = start
                self.allowed += 1
        timer = hosted.get_timer()
        used = time.perf_counter() - began
        estate.cpu += used
        done = start + used * self.charge
        estate.busy = done
        estate.sent += len(out)
        here = _address(estate.index)
        for payload, destination in out:
            target = self.by_address.get(destination)
            if target is None:
                self.dropped += 1
                continue
            self._push(done + self.delay, target, payload, here)
        if timer is not None:
            self._wake(estate, timer)

    def _wake(self, estate: Estate, at: float) -> None:
        """Have ``estate`` woken at ``at`` (or when it is no longer busy)."""
        at = max(at, estate.busy)
        if at < estate.scheduled:
            estate.scheduled = at
            self._push(at, estate.index, None, None)

    def step(self) -> bool:
        """Take the next arrival (into its estate's inbox) or wake; False when none is left."""
        if not self.heap:
            return False
        at, _, index, data, source = heapq.heappop(self.heap)
        self.now = max(self.now, at)
        estate = self.estates[index]
        if data is not None and source is not None:
            estate.inbox.append((data, source))
            self._wake(estate, at)
            return True
        if estate.scheduled != at:
            return True  # a wake superseded by an earlier one, which ran
        estate.scheduled = INFINITY
        self.processed += 1
        self._process(estate, at)
        return True

    def run_until(self, condition: Callable[[], bool], timeout: float,
                  check: float = 0.01) -> bool:
        """Step until ``condition()`` (checked every ``check`` virtual seconds) holds, or
        ``timeout`` virtual seconds pass."""
        deadline = self.now + timeout
        while self.now < deadline:
            # 100,000 estates share one heap here (each would have its own): keep the cyclic
            # collector to what was made since (without this a full collection walks every
            # estate, and its pause is charged to whichever estate triggered it)
            gc.freeze()
            if condition():
                return True
            end = self.now + check
            while self.heap and self.heap[0][0] <= end:
                self.step()
            if not self.heap:
                return condition()
            self.now = max(self.now, end)
        return condition()

    def run_for(self, seconds: float) -> None:
        end = self.now + seconds
        while self.heap and self.heap[0][0] <= end:
            self.step()
        self.now = max(self.now, end)


def build(relays: int, leaves: int, *, charge: float, delay: float) -> Tree:
    tree = Tree(charge=charge, delay=delay)
    names = frozenset(f"r{r}" for r in range(relays))
    tree.add("top", None, main=True, relays=names)
    for r in range(relays):
        tree.add(f"r{r}", 0, main=True)
    for r in range(relays):
        for n in range(leaves):
            tree.add(f"r{r}l{n}", 1 + r, main=False)
    return tree


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ask(tree: Tree, top: Estate, leaf: Estate) -> tuple[float, float] | None:
    """One echo request from the top to ``leaf``: (virtual round trip, CPU seconds used by
    the estates on its path meanwhile), or None when it was not answered right."""
    path = (top, tree.estates[leaf.parent or 0], leaf)
    before = sum(estate.cpu for estate in path)
    node = top.bus.node
    sent: list[float] = []
    got: list[tuple[Reply, float]] = []

    def send(now: float) -> None:
        sent.append(now)
        node.send(leaf.name, Call("echo.ping", {"to": leaf.name}),
                  lambda reply: got.append((reply, node.now)), now=now)

    tree.act(top, send)
    tree.run_until(lambda: bool(got), timeout=30.0, check=0.0001)
    if not got or got[0][0].errno is not Errno.OK or got[0][0].payload != {"to": leaf.name}:
        return None
    return got[0][1] - sent[0], sum(estate.cpu for estate in path) - before


def run(relays: int, leaves: int, *, charge: float = 1.0, delay: float = 0.0005,
        idle: float = 5.0, requests: int = 10, use_tracemalloc: bool = False,
        seed: int = 1) -> dict[str, Any]:
    """Build, join, idle, ask; the figures as a dict."""
    count = 1 + relays + relays * leaves
    if use_tracemalloc:
        tracemalloc.start()
    rss_before = _rss()
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    tree = build(relays, leaves, charge=charge, delay=delay)
    built_cpu = time.process_time() - cpu_start
    for estate in tree.estates[1:]:
        tree.join(estate)
    joined = tree.run_until(lambda: tree.allowed == count - 1, timeout=600.0)
    allowed_virtual = max((e.allowed_at or 0.0) for e in tree.estates)
    allowed_cpu = time.process_time() - cpu_start
    top = tree.estates[0]
    leaf_names = [e.name for e in tree.estates[1 + relays:]]
    routed = tree.run_until(
        lambda: all(top.bus.node.route_to(name) is not None for name in leaf_names),
        timeout=60.0, check=0.05)
    routed_virtual = tree.now
    rss_after = _rss()
    traced = tracemalloc.get_traced_memory()[0] if use_tracemalloc else None
    if use_tracemalloc:
        tracemalloc.stop()
    # idle: presence checks and bus keepalives only
    relay = tree.estates[1]
    marks = [(e.received, e.sent) for e in (top, relay)]
    idle_cpu = time.process_time()
    idle_start = tree.now
    tree.run_for(idle)
    idle_cpu = time.process_time() - idle_cpu
    span = tree.now - idle_start
    rates = [((e.received - r) / span, (e.sent - s) / span)
             for e, (r, s) in zip((top, relay), marks, strict=True)]
    lost = sum(1 for e in tree.estates[1:]
               if e.bus.node.upstream is None or e.bus.node.is_lost(e.bus.node.upstream))
    # requests from the top to leaves picked at random
    rng = random.Random(seed)
    round_trips: list[float] = []
    path_cpu: list[float] = []
    answered = 0
    for _ in range(requests):
        leaf = tree.estates[1 + relays + rng.randrange(relays * leaves)] if leaves else relay
        asked = _ask(tree, top, leaf)
        if asked is not None:
            answered += 1
            round_trips.append(asked[0])
            path_cpu.append(asked[1])
    wall = time.perf_counter() - wall_start
    return {
        "estates": count, "relays": relays, "leaves_per_relay": leaves,
        "charge": charge, "link_delay_ms": delay * 1000,
        "all_allowed": joined, "allowed": tree.allowed,
        "allowed_virtual_s": round(allowed_virtual, 3),
        "build_cpu_s": round(built_cpu, 1),
        "allowed_cpu_s": round(allowed_cpu, 1),
        "routed": routed, "routed_virtual_s": round(routed_virtual, 3),
        "memory_per_estate_kb": round((rss_after - rss_before) / count / 1024, 1),
        "traced_per_estate_kb": None if traced is None else round(traced / count / 1024, 1),
        "idle_virtual_s": round(span, 2), "idle_cpu_s": round(idle_cpu, 1),
        "top_datagrams_in_per_s": round(rates[0][0], 1),
        "top_datagrams_out_per_s": round(rates[0][1], 1),
        "relay_datagrams_in_per_s": round(rates[1][0], 1),
        "relay_datagrams_out_per_s": round(rates[1][1], 1),
        "bus_links_lost": lost,
        "requests": requests, "answered": answered,
        "request_virtual_ms_p50": round(_quantile(round_trips, 0.5) * 1000, 3)
        if round_trips else None,
        "request_virtual_ms_max": round(max(round_trips) * 1000, 3) if round_trips else None,
        "request_path_cpu_ms_p50": round(_quantile(path_cpu, 0.5) * 1000, 3)
        if path_cpu else None,
        "datagrams_dropped": tree.dropped, "wakes": tree.processed,
        "wall_s": round(wall, 1), "cpu_s": round(time.process_time() - cpu_start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relays", type=int, default=100)
    parser.add_argument("--leaves", type=int, default=999, help="leaves per relay")
    parser.add_argument("--charge", type=float, default=1.0,
                        help="CPU seconds charged to an estate's clock per CPU second used "
                             "(0: protocol time only)")
    parser.add_argument("--delay", type=float, default=0.0005, help="link delay, seconds")
    parser.add_argument("--idle", type=float, default=5.0,
                        help="virtual seconds of idle traffic measured after the joins")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also trace allocations (slow: small trees)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.relays < 1 or args.leaves < 0:
        parser.error("--relays must be at least 1 and --leaves at least 0")
    figures = run(args.relays, args.leaves, charge=args.charge, delay=args.delay,
                  idle=args.idle, requests=args.requests, use_tracemalloc=args.tracemalloc)
    print(json.dumps(figures) if args.json else "\n".join(f"{k}: {v}" for k, v in
                                                            figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
