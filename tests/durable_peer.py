"""A durable sender for the crash tests, run as ``python -m tests.durable_peer``.

It joins the main estate, then transmits ``{"_seq": n, "_sent": t}`` for n = 1..COUNT
through a :class:`DurableRoad` at about RATE messages/s, resuming after a restart where
its durable outbox left off (the durable id *is* the number, so a message accepted just
before a kill is never numbered twice).  It prints ``done N`` and exits 0 once every
message was accepted and acknowledged.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from raetlike.durable import DurableConfig, DurableRoad
from raetlike.errors import BackpressureError
from raetlike.journal import FsyncPolicy
from raetlike.run import Loop
from raetlike.udp import UdpDriver, bind_udp, parse_host_port
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--keep", type=Path, required=True)
    parser.add_argument("--durable", type=Path, required=True)
    parser.add_argument("--join", type=parse_host_port, required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--raet-mode", action="store_true")
    args = parser.parse_args(argv)
    local, keep = open_estate(args.keep, args.name, main=False,
                              host_address=("127.0.0.1", args.port))
    stack = RoadStack(local, RoadConfig(fast=not args.raet_mode), keep=keep,
                      now=time.monotonic())
    keep.restore_remotes(stack)
    road = DurableRoad(stack, args.durable, DurableConfig(fsync=FsyncPolicy.INTERVAL))
    loop = Loop()
    loop.add(UdpDriver(road, sock=bind_udp("127.0.0.1", args.port)))
    stack.join(args.join, now=time.monotonic())

    def allowed() -> bool:
        remote = stack.names.get(args.to)
        return remote is not None and bool(remote.allowed)

    started, first = time.monotonic(), road.next_id
    while road.next_id <= args.count or len(road.outbox):
        loop.run_once(max_wait=0.005)
        while road.next_event() is not None:
            pass
        if not allowed():
            continue
        due = first + int((time.monotonic() - started) * args.rate)
        while road.next_id <= min(due, args.count):
            try:
                road.transmit({"_seq": road.next_id, "_sent": time.time()}, to=args.to)
            except BackpressureError:
                break
    road.close(now=time.monotonic())
    sys.stdout.write(f"done {args.count}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
