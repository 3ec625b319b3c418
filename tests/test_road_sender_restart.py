"""RAET mode: a sender that restarts numbers its transactions afresh; none of its new
messages may be answered "done" without being delivered.

Regression: the receiver remembered delivered transactions by transaction id alone, so
after the sender restarted (and before the receiver's side of the new allow finished) it
acknowledged the new messages with the old session's ids unread: acked, never delivered.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from road import events
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from tests.simlink import Impairment, SimNet

MAIN = ("127.0.0.1", 7530)
MINION = ("127.0.0.1", 7531)


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_every_message_acknowledged_after_a_sender_restart_was_delivered(
        tmp_path: Path, seed: int) -> None:
    net = SimNet(seed=seed, impairment=Impairment(loss=0.05))

    def start(name: str, address: tuple[str, int], main: bool) -> RoadStack:
        local, keep = open_estate(tmp_path / name, name, main=main, host_address=address)
        stack = RoadStack(local, RoadConfig(fast=False), keep=keep, now=net.now)
        keep.restore_remotes(stack)
        net.add(address, stack)
        return stack

    start("main", MAIN, True)
    minion = start("minion", MINION, False)
    minion.join(MAIN, now=0.0)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=30)
    rng, number, acked, delivered = random.Random(7), 0, [], Counter()

    def take() -> None:
        delivered.update(e.body["n"] for e in net.of_type(MAIN, events.MessageReceived))
        net.events[MAIN].clear()
        acked.extend(ids[e.message_id] for e in net.of_type(MINION, events.MessageSent))
        net.events[MINION].clear()

    ids: dict[int, int] = {}

    def send() -> None:
        nonlocal number
        ids.clear()
        for _ in range(50):
            number += 1
            ids[minion.transmit({"n": number}, to="main")] = number

    for _ in range(6):
        send()
        net.run_for(rng.uniform(0.005, 0.3))
        take()
        net.stacks.pop(MINION)  # killed: its keep stays
        net.run_for(rng.uniform(0.0, 0.5))
        minion = start("minion", MINION, False)
        net.run_for(rng.uniform(0.0, 0.2))  # sends again while the new allow may be unfinished
    send()
    net.run_for(30.0)
    take()
    assert acked, "nothing was acknowledged: the test saw no traffic"
    assert [n for n in acked if n not in delivered] == []
    assert max(delivered.values()) == 1
