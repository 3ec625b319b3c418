"""A yard whose queue is full is written to again as soon as it has room, not on a timer."""

from __future__ import annotations

import time
from pathlib import Path

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver

SLOW_TIMER = LaneConfig(busy_retry=5.0, max_retry=5.0, unreachable_after=60.0)


def test_a_busy_yard_is_resumed_when_its_queue_drains_long_before_the_back_off_ends(
        tmp_path: Path) -> None:
    sender = LaneStack(LocalYard("sender", "busy", str(tmp_path)), SLOW_TIMER)
    receiver = LaneStack(LocalYard("receiver", "busy", str(tmp_path)))
    loop = Loop()
    loop.add(UxdDriver(sender))
    loop.add(UxdDriver(receiver))
    got: list[int] = []

    def all_in() -> bool:
        while (event := receiver.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                got.append(event.body["n"])
        return len(got) == 300

    try:
        for number in range(300):
            sender.transmit({"n": number, "pad": "x" * 100}, to="receiver")
        started = time.monotonic()
        assert loop.run_until(all_in, timeout=4.0), f"{len(got)} of 300 in 4 s"
        assert time.monotonic() - started < 4.0
        assert got == list(range(300))
        assert sender.stats.send_failures > 0  # the queue did fill (it holds a few datagrams)
    finally:
        loop.close()


def test_a_big_message_to_a_busy_yard_arrives_whole_without_waiting_on_timers(
        tmp_path: Path) -> None:
    sender = LaneStack(LocalYard("sender", "busy", str(tmp_path)), SLOW_TIMER)
    receiver = LaneStack(LocalYard("receiver", "busy", str(tmp_path)))
    loop = Loop()
    loop.add(UxdDriver(sender))
    loop.add(UxdDriver(receiver))
    got: list[events.MessageReceived] = []

    def arrived() -> bool:
        while (event := receiver.next_event()) is not None:
            if isinstance(event, events.MessageReceived):
                got.append(event)
        return bool(got)

    try:
        sender.transmit({"blob": "y" * 3_000_000}, to="receiver")
        assert loop.run_until(arrived, timeout=4.0)
        assert got[0].body == {"blob": "y" * 3_000_000}
        assert got[0].pages > 40
    finally:
        loop.close()
