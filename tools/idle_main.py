"""One main and N minions on the simulated link: the main's CPU per remote while idle.

Sans-IO stacks on tests/simlink.py's virtual clock (no sockets): N minions join and are
allowed, then the link stays idle for ``--idle`` virtual seconds, presence checks only.
The main's own CPU is the real time its calls take (``time.perf_counter`` around
``receive_datagram``, ``handle_timer``, ``get_timer``, ``datagrams_to_send`` and
``next_event``), so the minions' work is not counted.  ``--profile`` prints the main's
hottest functions (cProfile over its calls only).

    .venv/bin/python tools/idle_main.py --minions 1000 [--raet] [--profile] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.simlink import SimNet


class _Timed:
    """The main's calls, timed (and profiled on request)."""

    def __init__(self, stack: RoadStack, profile: cProfile.Profile | None) -> None:
        self.spent = 0.0
        self.profile = profile
        for name in ("receive_datagram", "handle_timer", "get_timer", "datagrams_to_send",
                     "next_event"):
            setattr(stack, name, self._wrap(getattr(stack, name)))

    def _wrap(self, call: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            if self.profile is not None:
                self.profile.enable()
            try:
                return call(*args, **kwargs)
            finally:
                if self.profile is not None:
                    self.profile.disable()
                self.spent += time.perf_counter() - start
        return timed


def run(minions: int, idle: float, *, fast: bool, profile: bool) -> dict[str, Any]:
    net = SimNet(seed=1)
    config = RoadConfig(fast=fast, auto=AutoMode.ALWAYS)
    main = RoadStack(LocalEstate("main", main=True), config, MemoryKeep(AutoMode.ALWAYS))
    main_address = ("127.0.0.1", 7530)
    net.add(main_address, main)
    stacks = []
    for index in range(minions):
        stack = RoadStack(LocalEstate(f"m{index}"), RoadConfig(fast=fast, auto=AutoMode.ALWAYS),
                          MemoryKeep(AutoMode.ALWAYS))
        net.add((f"127.1.{index >> 8}.{index & 255}", 7531), stack)
        stacks.append(stack)
        stack.join(main_address, now=net.now)
    allowed = set()

    def all_allowed() -> bool:
        for event in net.events[main_address]:
            if isinstance(event, events.Allowed):
                allowed.add(event.remote)
        net.events[main_address].clear()
        return len(allowed) == minions

    started = time.perf_counter()
    if not net.run_until(all_allowed, timeout=600.0):
        raise SystemExit(f"only {len(allowed)} of {minions} allowed")
    join_s = time.perf_counter() - started
    net.run_for(3.0)  # the first checks settle
    profiler = cProfile.Profile() if profile else None
    timed = _Timed(main, profiler)
    sent_before = main.stats.datagrams_sent
    net.run_for(idle)
    lost = sum(1 for e in net.events[main_address] if isinstance(e, events.RemoteLost))
    figures = {
        "minions": minions, "mode": "fast" if fast else "raet", "idle_s": idle,
        "join_cpu_s": round(join_s, 1),
        "main_cpu_percent": round(100 * timed.spent / idle, 2),
        "main_us_per_remote_second": round(1e6 * timed.spent / idle / minions, 1),
        "main_datagrams_per_s": round((main.stats.datagrams_sent - sent_before) / idle, 1),
        "remote_lost": lost,
    }
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minions", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=10.0, help="virtual seconds")
    parser.add_argument("--raet", action="store_true", help="RAET mode (fast=False)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.minions < 1 or args.idle <= 0:
        parser.error("--minions and --idle must be positive")
    figures = run(args.minions, args.idle, fast=not args.raet, profile=args.profile)
    print(json.dumps(figures) if args.json else "\n".join(f"{k}: {v}" for k, v in
                                                            figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
