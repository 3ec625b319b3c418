"""Bus nodes in real processes: this process as a bus yard or estate on a Loop."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from lane import LaneConfig, LaneStack, LocalYard
from raetlike.bus import BusAttachment, BusNode, Call, Errno, Reply
from raetlike.bus._hosting import timer_task
from raetlike.channels import LaneChannel
from raetlike.run import Loop
from raetlike.uxd import UxdDriver


@dataclass
class BusClient:
    """A bus node on a Loop, with blocking calls for tests and benchmarks."""

    node: BusNode
    loop: Loop

    def call(self, target: str, topic: str, payload: Any, timeout: float) -> Reply:
        """One request and its one reply (a timeout reply when none came)."""
        got: list[Reply] = []
        self.node.send(target, Call(topic, payload), got.append, now=time.monotonic(),
                       timeout=timeout)
        self.loop.run_until(lambda: bool(got), timeout=timeout + 1.0)
        assert len(got) == 1, got
        return got[0]

    def call_until_routed(self, target: str, topic: str, payload: Any,
                          deadline: float) -> Reply:
        """Call until the answer is not 'no route' (links appear as nodes start) or time is up."""
        while True:
            reply = self.call(target, topic, payload, timeout=max(0.1, deadline - time.monotonic()))
            if reply.errno is not Errno.EHOSTUNREACH or time.monotonic() >= deadline:
                return reply
            self.loop.run_until(lambda: False, timeout=0.05)


def bus_yard(name: str, lane: str, directory: str, main_yard: str = "main") -> BusClient:
    """The yard ``name`` on ``lane`` as a bus node whose upstream is ``main_yard``."""
    loop = Loop()
    stack = LaneStack(LocalYard(name, lane, directory), LaneConfig(main_yard=main_yard))
    node = BusNode(name, now=time.monotonic())
    attachment = BusAttachment(node)

    def on_event(event: object) -> None:
        attachment.handle_event(event, time.monotonic())

    loop.add(UxdDriver(stack), on_event=on_event)
    node.add_link(LaneChannel(stack, main_yard), upstream=True)
    loop.spawn(timer_task(node, time.monotonic), name="bus timers")
    return BusClient(node, loop)
