"""A main killed in the middle of a minion's first join or allow: the minion gets in.

Regression: a main killed after it answered a join but before it kept the minion (the
ack not yet in) comes back without the minion, and drops the minion's allows unanswered
(an unknown remote); the minion, joined in its own eyes, tried allows forever.  Now,
after ``allow_tries_before_rejoin`` unanswered allows in a row, it joins vacuously
again, which finds the main either way.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from road import events
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from road.stats import Drop
from tests.simlink import Impairment, SimNet

MAIN = ("127.0.0.1", 7540)
MINION = ("127.0.0.1", 7541)


class Pair:
    """A main and a minion with keeps under ``root`` on a simulated link (10 ms)."""

    def __init__(self, root: Path, config: RoadConfig) -> None:
        self.root, self.config = root, config
        self.net = SimNet(seed=1, impairment=Impairment(delay=0.01))
        self.main = self.start("main", MAIN, main=True)
        self.minion = self.start("minion", MINION, main=False)

    def start(self, name: str, address: tuple[str, int], *, main: bool) -> RoadStack:
        local, keep = open_estate(self.root / name, name, main=main, host_address=address)
        stack = RoadStack(local, self.config, keep=keep, now=self.net.now)
        keep.restore_remotes(stack)
        self.net.add(address, stack)
        return stack

    def kill_main(self, down: float, *, lose_keep: bool = False,
                  forget_minion: bool = False) -> None:
        """kill -9: the main's stack is gone, its keep stays (unless ``lose_keep``: then
        it comes back with new keys; ``forget_minion``: without its record of the minion,
        its role's keys still accepted); back after ``down`` s."""
        self.main.keep.flush()  # its records were written before the crash
        self.net.stacks.pop(MAIN, None)
        if lose_keep:
            shutil.rmtree(self.root / "main")
        if forget_minion:
            keep = self.root / "main" / "main"
            for record in ("remote/estate.minion.json", "raetlike/remote.minion.json"):
                (keep / record).unlink()
        self.net.run_for(down)
        self.main = self.start("main", MAIN, main=True)
        self.net.events[MINION].clear()

    def allowed(self, timeout: float) -> bool:
        return self.net.run_until(
            lambda: bool(self.net.of_type(MINION, events.Allowed)), timeout=timeout)

    def exchange(self, count: int) -> tuple[Counter[int], Counter[int]]:
        """``count`` messages each way; what each side received, by number."""
        for number in range(count):
            self.minion.transmit({"n": number}, to="main")
        self.net.run_for(10.0)
        to_main = Counter(e.body["n"] for e in self.net.of_type(MAIN, events.MessageReceived))
        for number in range(count):
            self.main.transmit({"n": number}, to="minion")
        self.net.run_for(10.0)
        to_minion = Counter(
            e.body["n"] for e in self.net.of_type(MINION, events.MessageReceived))
        return to_main, to_minion


@pytest.mark.parametrize("fast", [False, True], ids=["raet", "fast"])
@pytest.mark.parametrize("kill_at", range(16))
def test_a_main_killed_at_any_step_of_the_first_handshake_lets_the_minion_in(
        tmp_path: Path, kill_at: int, fast: bool) -> None:
    pair = Pair(tmp_path, RoadConfig(fast=fast))
    pair.minion.join(MAIN, now=pair.net.now)
    for _ in range(kill_at):  # each step: a datagram delivered or a timer fired
        pair.net.step()
    pair.kill_main(down=0.05)
    assert pair.allowed(timeout=60.0), [type(e).__name__ for e in pair.net.events[MINION]]
    to_main, to_minion = pair.exchange(20)
    assert to_main == Counter(range(20))
    assert to_minion == Counter(range(20))


def test_the_minion_finds_its_old_record_when_the_main_kept_it(tmp_path: Path) -> None:
    """A main down a while (its keep holds the minion): the minion's allows go
    unanswered, its vacuous join finds the same record (no second remote)."""
    pair = Pair(tmp_path, RoadConfig(fast=True))
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.allowed(timeout=30.0)
    uid = pair.main.names["minion"].uid
    pair.kill_main(down=30.0)
    assert pair.allowed(timeout=60.0)
    assert [remote.name for remote in pair.main.remotes.values()] == ["minion"]
    assert pair.main.names["minion"].uid == uid
    to_main, to_minion = pair.exchange(5)
    assert (to_main, to_minion) == (Counter(range(5)), Counter(range(5)))


@pytest.mark.parametrize("fast", [False, True], ids=["raet", "fast"])
def test_a_main_back_without_the_minion_s_record_after_an_allow_lets_it_in_again(
        tmp_path: Path, fast: bool) -> None:
    """Allowed, then the main comes back with its keys but without the minion's record
    (never written, or lost): it drops the minion's "alive?" unanswered.  The minion,
    finding it gone, allows again, then joins afresh, and the two talk again."""
    pair = Pair(tmp_path, RoadConfig(fast=fast))
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.allowed(timeout=30.0)
    pair.kill_main(down=0.05, forget_minion=True)
    assert pair.allowed(timeout=60.0)
    assert [type(e).__name__ for e in pair.net.events[MINION]][:1] == ["RemoteLost"]
    to_main, to_minion = pair.exchange(10)
    assert (to_main, to_minion) == (Counter(range(10)), Counter(range(10)))


@pytest.mark.parametrize("fast", [False, True], ids=["raet", "fast"])
def test_a_main_down_a_minute_that_lost_the_minion_lets_it_in_again(
        tmp_path: Path, fast: bool) -> None:
    """Down longer than the minion's allows and its first join afresh last: its later
    joins by the far uid get renew (refused on an immutable road) or nothing, so after
    as many it joins afresh again."""
    pair = Pair(tmp_path, RoadConfig(fast=fast))
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.allowed(timeout=30.0)
    pair.kill_main(down=60.0, forget_minion=True)
    assert pair.allowed(timeout=120.0)
    to_main, to_minion = pair.exchange(10)
    assert (to_main, to_minion) == (Counter(range(10)), Counter(range(10)))


@pytest.mark.parametrize("fast", [False, True], ids=["raet", "fast"])
def test_after_the_rejoin_the_main_s_new_sessions_and_far_uid_are_taken(
        tmp_path: Path, fast: bool) -> None:
    """Five allows in: the minion knows main's session numbers as high.  The main comes
    back without the minion and gives it another uid (an estate joined it first); its
    sessions count from the start again.  Messages from the main must not be dropped as
    stale, and the minion must use its new uid."""
    pair = Pair(tmp_path, RoadConfig(fast=fast))
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.allowed(timeout=30.0)
    for _ in range(5):
        pair.net.events[MINION].clear()
        pair.minion.allow("main", now=pair.net.now)
        assert pair.allowed(timeout=30.0)
    pair.main.transmit({"n": -1}, to="minion", now=pair.net.now)  # main's session: known
    pair.main.alive("minion", now=pair.net.now)  # (so in fast mode too: its checks are pings)
    pair.net.run_for(5.0)
    assert pair.minion.remote("main").remote_session_id > 2
    old_uid = pair.minion.remote("main").far_uid
    pair.kill_main(down=0.05, forget_minion=True)
    other = pair.start("other", ("127.0.0.1", 7542), main=False)
    other.join(MAIN, now=pair.net.now)
    pair.net.run_until(lambda: "other" in pair.main.names, timeout=10.0)
    assert pair.allowed(timeout=60.0)
    assert pair.minion.remote("main").far_uid != old_uid
    assert pair.minion.remote("main").far_uid == pair.main.names["minion"].uid
    pair.net.events[MINION].clear()
    stale = pair.minion.stats.dropped[Drop.STALE_SESSION]
    to_main, to_minion = pair.exchange(10)
    assert (to_main, to_minion) == (Counter(range(10)), Counter(range(10)))
    assert pair.minion.stats.dropped[Drop.STALE_SESSION] == stale


def test_with_the_rejoin_turned_off_the_minion_stays_out(tmp_path: Path) -> None:
    """``allow_tries_before_rejoin=0``: the old behaviour, and the failure the rejoin
    exists for (the main answers none of the allows of a minion it does not know)."""
    pair = Pair(tmp_path, replace(RoadConfig(fast=False), allow_tries_before_rejoin=0))
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_until(lambda: bool(pair.net.of_type(MINION, events.Joined)), timeout=5.0)
    pair.kill_main(down=0.05)  # the minion joined; the main never got its ack
    assert not pair.allowed(timeout=60.0)
    assert pair.net.of_type(MINION, events.AllowFailed)
    assert "minion" not in pair.main.names


def test_an_afresh_join_still_refuses_changed_keys_on_an_immutable_road(
        tmp_path: Path) -> None:
    """The vacuous rejoin may change the far uid, never the keys: a main that comes back
    with new keys (its keep lost) is rejected, as any changed claim is."""
    pair = Pair(tmp_path, RoadConfig(fast=True))
    pair.minion.join(MAIN, now=pair.net.now)
    assert pair.allowed(timeout=30.0)
    pair.kill_main(down=0.05, lose_keep=True)
    assert not pair.allowed(timeout=60.0)
    assert "changed name, address or keys refused: road immutable" in {
        e.reason for e in pair.net.of_type(MINION, events.JoinFailed)}
    assert pair.minion.names["main"].verify_key != pair.main.local.signing_key.verify_key
