"""This test process as a bus yard on a Loop (raetlike.bus._hosting.LoopBus)."""

from __future__ import annotations

import time

from lane import LaneConfig, LaneStack, LocalYard
from raetlike.bus import BusAttachment, BusNode
from raetlike.bus._hosting import LoopBus
from raetlike.channels import LaneChannel
from raetlike.run import Loop
from raetlike.uxd import UxdDriver


def bus_yard(name: str, lane: str, directory: str, main_yard: str = "main") -> LoopBus:
    """The yard ``name`` on ``lane`` as a bus node whose upstream is ``main_yard``."""
    loop = Loop()
    stack = LaneStack(LocalYard(name, lane, directory), LaneConfig(main_yard=main_yard))
    node = BusNode(name, now=time.monotonic())
    attachment = BusAttachment(node)

    def on_event(event: object) -> None:
        attachment.handle_event(event, time.monotonic())

    loop.add(UxdDriver(stack), on_event=on_event)
    node.add_link(LaneChannel(stack, main_yard), upstream=True)
    return LoopBus(node, loop, time.monotonic)
