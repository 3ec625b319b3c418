"""Durable delivery on the simulated link: crashes of either side lose and repeat nothing.

Two estates with keeps and durable stores on disk run on SimNet's virtual clock.  A
"crash" abandons a side's objects as ``kill -9`` would (the files keep what was written,
nothing more is written) and starts it again from its keep and store.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from raetlike.durable import DurableConfig, DurableMessageReceived, DurableRoad
from raetlike.errors import BackpressureError, StoreError
from raetlike.journal import FsyncPolicy, JournalWriter, journal_files
from road import events
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from tests.simlink import Impairment, SimNet

MAIN = ("127.0.0.1", 7530)
MINION = ("127.0.0.1", 7531)
NEVER_SYNC = DurableConfig(fsync=FsyncPolicy.NEVER)


@dataclass
class Side:
    """One estate that can be crashed and restarted."""

    net: SimNet
    root: Path
    name: str
    address: tuple[str, int]
    main: bool
    fast: bool
    journal: bool = False
    config: DurableConfig = NEVER_SYNC
    road: DurableRoad | None = None
    delivered: list[Any] = field(default_factory=list)
    sent: set[int] = field(default_factory=set)
    starts: int = 0

    def start(self) -> DurableRoad:
        local, keep = open_estate(self.root / "keep", self.name, main=self.main,
                                  host_address=self.address)
        stack = RoadStack(local, RoadConfig(fast=self.fast), keep=keep, now=self.net.now)
        keep.restore_remotes(stack)
        journal = JournalWriter(self.root / "journal", self.name) if self.journal else None
        clock = self.net
        self.road = DurableRoad(stack, self.root / "durable", self.config, journal=journal,
                                wall=lambda: 1_000_000.0 + clock.now)
        self.net.add(self.address, self.road)
        self.starts += 1
        return self.road

    def crash(self) -> None:
        """As kill -9: drop everything unwritten, release the files."""
        assert self.road is not None
        self.take()
        self.net.stacks.pop(self.address)
        self.road.abandon()
        if self.road.journal is not None:
            self.road.journal.abandon()
        self.road = None

    def take(self) -> None:
        """Collect what the application was handed."""
        for event in self.net.events[self.address]:
            if isinstance(event, events.MessageReceived):
                self.delivered.append(event.body)
            elif isinstance(event, events.MessageSent):
                self.sent.add(event.message_id)
        self.net.events[self.address].clear()


def _pair(tmp_path: Path, net: SimNet, *, fast: bool, journal: bool = False) -> tuple[Side, Side]:
    main = Side(net, tmp_path / "main", "main", MAIN, True, fast, journal=journal)
    minion = Side(net, tmp_path / "minion", "minion", MINION, False, fast)
    main.start()
    minion.start().stack.join(MAIN, now=net.now)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=30)
    return main, minion


def _send(minion: Side, upto: int) -> None:
    """Transmit numbered messages until ``upto`` were accepted in all (across restarts)."""
    road = minion.road
    assert road is not None
    while road.next_id <= upto:
        try:
            road.transmit({"seq": road.next_id}, to="main")
        except BackpressureError:
            return


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "raet"])
@pytest.mark.parametrize("who", ["sender", "receiver", "both"])
def test_every_message_is_delivered_once_across_crashes(tmp_path: Path, fast: bool,
                                                        who: str) -> None:
    net = SimNet(seed=3, impairment=Impairment(loss=0.05, duplicate=0.02, jitter=0.002))
    main, minion = _pair(tmp_path, net, fast=fast)
    total, rng = 600 if fast else 300, random.Random(7)
    for _ in range(6):
        _send(minion, total)
        net.run_for(rng.uniform(0.005, 0.3))
        for side in ((minion,) if who == "sender" else (main,) if who == "receiver"
                     else (minion, main)):
            side.crash()
            net.run_for(rng.uniform(0.0, 0.5))
            side.start()
        net.run_for(rng.uniform(0.0, 0.2))
    _send(minion, total)
    assert net.run_until(lambda: len(minion.road.outbox) == 0, timeout=300), (  # type: ignore[union-attr]
        f"{len(minion.road.outbox)} still held")  # type: ignore[union-attr]
    main.take()
    minion.take()
    seqs = Counter(body["seq"] for body in main.delivered)
    assert sorted(seqs) == list(range(1, total + 1)), "lost messages"
    assert max(seqs.values()) == 1, f"delivered twice: {[s for s, n in seqs.items() if n > 1]}"
    assert all(isinstance(body, dict) and set(body) == {"seq"} for body in main.delivered)


def test_a_journal_line_is_the_mark_a_crash_before_the_commit_cannot_lose(
        tmp_path: Path) -> None:
    net = SimNet(seed=1)
    main, minion = _pair(tmp_path, net, fast=True, journal=True)
    _send(minion, 50)
    assert net.run_until(lambda: len(main.net.of_type(MAIN, events.MessageReceived)) == 50)
    road = main.road
    assert road is not None
    road.journal.flush()  # type: ignore[union-attr]  # the lines are out; no checkpoint since
    main.crash()
    main.start()
    assert main.road is not None
    assert main.road.seen.recovered_from_journal == 50
    # the minion never heard the acks: pretend so by sending the same ids again
    for durable_id in range(1, 51):
        minion.road.stack.transmit(  # type: ignore[union-attr]
            {"durable": [minion.road.outbox.store, durable_id], "body": {"seq": durable_id}},  # type: ignore[union-attr]
            to="main")
    net.run_for(2.0)
    assert main.road.duplicates_seen == 50
    assert not net.of_type(MAIN, events.MessageReceived)
    lines = [json.loads(line) for path in journal_files(tmp_path / "main" / "journal")
             for line in path.read_bytes().splitlines()]
    assert sorted(line["durable_seq"] for line in lines) == list(range(1, 51))


def test_expired_while_stopped_comes_back_as_message_expired(tmp_path: Path) -> None:
    net = SimNet(seed=2)
    _main, minion = _pair(tmp_path, net, fast=True)
    net.stacks.pop(MAIN)  # main goes away
    road = minion.road
    assert road is not None
    first = road.transmit({"seq": 1}, to="main", ttl=5.0)
    second = road.transmit({"seq": 2}, to="main", ttl=500.0)
    minion.crash()
    net.now += 10.0  # nothing runs: both are down
    restarted = minion.start()
    assert restarted.resent == 0  # not before the first call that brings the time
    restarted.handle_timer(net.now)
    assert restarted.resent == 1
    expired = [e for e in iter(restarted.next_event, None)
               if isinstance(e, events.MessageExpired)]
    assert [(e.message_id, e.body) for e in expired] == [(first, {"seq": 1})]
    assert [s.id for s in restarted.outbox.pending()] == [second]


def test_a_full_durable_outbox_refuses_and_stores_nothing(tmp_path: Path) -> None:
    net = SimNet(seed=2)
    main = Side(net, tmp_path / "main", "main", MAIN, True, True)
    minion = Side(net, tmp_path / "minion", "minion", MINION, False, True,
                  config=DurableConfig(fsync=FsyncPolicy.NEVER, max_messages=3))
    main.start()
    road = minion.start()
    road.stack.join(MAIN, now=net.now)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=30)
    for n in range(3):
        road.transmit({"seq": n}, to="main")
    with pytest.raises(BackpressureError, match="durable outbox is full"):
        road.transmit({"seq": 3}, to="main")
    assert road.next_id == 4
    assert len(road.outbox) == 3
    assert net.run_until(lambda: len(road.outbox) == 0, timeout=30)
    road.transmit({"seq": 3}, to="main")


def test_a_store_in_use_is_refused(tmp_path: Path) -> None:
    net = SimNet()
    main = Side(net, tmp_path / "main", "main", MAIN, True, True)
    road = main.start()
    with pytest.raises(StoreError, match="in use by another process"):
        DurableRoad(road.stack, tmp_path / "main" / "durable")


def test_delivered_events_carry_the_durable_seq_and_the_original_body(tmp_path: Path) -> None:
    net = SimNet(seed=4)
    _main, minion = _pair(tmp_path, net, fast=False)
    road = minion.road
    assert road is not None
    ids = [road.transmit(b"raw bytes", to="main"), road.transmit({"k": [1, 2]}, to="main")]
    assert net.run_until(lambda: len(net.of_type(MINION, events.MessageSent)) == 2)
    received = net.of_type(MAIN, events.MessageReceived)
    assert all(isinstance(e, DurableMessageReceived) for e in received)
    assert [(e.durable_seq, e.body) for e in received] == [(ids[0], b"raw bytes"),
                                                          (ids[1], {"k": [1, 2]})]
    assert sorted(e.message_id for e in net.of_type(MINION, events.MessageSent)) == ids


OTHER = ("127.0.0.1", 7532)


def test_a_receiver_s_numbers_have_no_gaps_whatever_else_the_sender_sends(
        tmp_path: Path) -> None:
    """The sender numbers its messages per remote: what it sends others never opens gaps
    in a receiver's window, so reordering is measured in that receiver's own messages.
    (With one number for all remotes, a message overtaken by a few of its successors
    here lay hundreds of numbers behind and was refused as a repeat.)"""
    net = SimNet(seed=11, impairment=Impairment(loss=0.1, jitter=0.02))
    main = Side(net, tmp_path / "main", "main", MAIN, True, True)
    small = DurableConfig(fsync=FsyncPolicy.NEVER, dedup_window=200)  # > its 150
    minion = Side(net, tmp_path / "minion", "minion", MINION, False, True, config=small)
    other = Side(net, tmp_path / "other", "other", OTHER, False, True)
    sender = main.start()
    for side in (minion, other):
        side.start().stack.join(MAIN, now=net.now)
    assert net.run_until(lambda: {"minion", "other"} <= {
        e.remote for e in net.of_type(MAIN, events.Allowed)}, timeout=60)
    for n in range(150):
        sender.transmit({"n": n}, to="minion")
        for _ in range(20):
            sender.transmit({"noise": True}, to="other")
    assert net.run_until(lambda: len(sender.outbox) == 0, timeout=600)
    minion.take()
    assert sorted(body["n"] for body in minion.delivered) == list(range(150))
    assert minion.road is not None
    assert minion.road.duplicates_seen == 0
