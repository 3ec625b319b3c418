"""Many remote estates on one main through the sans-IO RoadStack (no sockets, virtual clock).

Joins and allows N minions in batches, then runs presence checks for a while, and reports
memory per remote (tracemalloc), get_timer/handle_timer cost, and join/allow/alive rates.

    .venv/bin/python tools/scale_road.py --remotes 10000 [--mode raet|fast] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from road import events
from road.stack import LocalEstate, RoadConfig, RoadStack

Address = tuple[str, int]
MAIN: Address = ("10.0.0.1", 7530)


def _address(index: int) -> Address:
    return (f"10.{1 + index // 62500}.{index // 250 % 250}.{index % 250}", 7531)


class Road:
    """A main and its minions; datagrams go straight across, time moves on demand."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.now = 0.0
        self.main = RoadStack(LocalEstate("main", main=True), self._config(), now=0.0)
        self.minions: dict[Address, RoadStack] = {}
        self.datagrams = 0

    def _config(self) -> RoadConfig:
        return RoadConfig(fast=self.mode == "fast", reap_interval=0)

    def add(self, index: int) -> None:
        minion = RoadStack(LocalEstate(f"m{index}"), self._config(), now=self.now)
        self.minions[_address(index)] = minion
        minion.join(MAIN, now=self.now)

    def pump(self, busy: set[Address]) -> None:
        """Carry datagrams until nobody has any; ``busy`` are the minions that may."""
        while True:
            moved = 0
            for address in list(busy):
                for data, _ in self.minions[address].datagrams_to_send(self.now):
                    self.main.receive_datagram(data, address, self.now)
                    moved += 1
            for data, destination in self.main.datagrams_to_send(self.now):
                minion = self.minions.get(destination)
                if minion is not None:
                    minion.receive_datagram(data, MAIN, self.now)
                    busy.add(destination)
                moved += 1
            self.datagrams += moved
            if not moved:
                return

    def advance(self, seconds: float, *, minion_timers: bool = True) -> None:
        """Move the clock, firing main's timers (and the minions') as they come due."""
        end = self.now + seconds
        while self.now < end:
            timer = self.main.get_timer()
            step = min(end, max(self.now + 0.01, timer if timer is not None else end))
            self.now = step
            self.main.handle_timer(self.now)
            busy: set[Address] = set()
            if minion_timers:
                for address, minion in self.minions.items():
                    t = minion.get_timer()
                    if t is not None and t <= self.now:
                        minion.handle_timer(self.now)
                        busy.add(address)
            self.pump(busy)


def run(remotes: int, mode: str, batch: int, presence_seconds: float) -> dict[str, Any]:
    road = Road(mode)
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    started = time.perf_counter()
    for first in range(0, remotes, batch):
        count = min(batch, remotes - first)
        for index in range(first, first + count):
            road.add(index)
        road.pump({_address(i) for i in range(first, first + count)})
    joined_s = time.perf_counter() - started
    allowed = sum(isinstance(e, events.Allowed) for e in iter(road.main.next_event, None))
    memory, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    main_memory = memory - base
    calls = 200
    t0 = time.perf_counter()
    for _ in range(calls):
        road.main.get_timer()
    get_timer_ms = (time.perf_counter() - t0) / calls * 1000
    t0 = time.perf_counter()
    for _ in range(20):
        road.main.handle_timer(road.now)
    handle_timer_ms = (time.perf_counter() - t0) / 20 * 1000
    t0 = time.perf_counter()
    before = road.datagrams
    road.advance(presence_seconds)
    presence_wall = time.perf_counter() - t0
    lost = sum(isinstance(e, events.RemoteLost) for e in iter(road.main.next_event, None))
    alive = sum(1 for r in road.main.remotes.values() if r.alive)
    return {
        "mode": mode, "remotes": remotes, "allowed": allowed,
        "join_allow_wall_s": round(joined_s, 2),
        "joins_allows_per_s": round(remotes / joined_s, 1),
        "traced_memory_mb": round(main_memory / 1e6, 1),
        "memory_per_remote_kb": round(main_memory / remotes / 1e3, 2),
        "get_timer_ms": round(get_timer_ms, 3), "handle_timer_ms": round(handle_timer_ms, 3),
        "presence_virtual_s": presence_seconds, "presence_wall_s": round(presence_wall, 2),
        "presence_datagrams": road.datagrams - before,
        "alive_after": alive, "lost_events": lost,
        "transactions_after": len(road.main._transactions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remotes", type=int, default=10_000)
    parser.add_argument("--mode", choices=["raet", "fast"], default="raet")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--presence", type=float, default=5.0,
                        help="virtual seconds of presence checks after the joins")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args.remotes, args.mode, args.batch, args.presence)
    print(json.dumps(figures) if args.json else "\n".join(f"{k}: {v}" for k, v in
                                                            figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
