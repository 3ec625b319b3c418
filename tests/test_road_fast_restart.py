"""A fast-mode pair survives a restart of main from its keep.

Regression: the fast-mode capability was not kept, so a restarted main spoke
RAET mode to a minion that still spoke fast mode, and nothing got through.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from road import events
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from tests.simlink import SimNet

MAIN = ("127.0.0.1", 7530)
MINION = ("127.0.0.1", 7531)


def _main(tmp_path: Path, net: SimNet) -> RoadStack:
    """The main from its keep, replacing (as after a crash once its records were written)
    the one at MAIN."""
    if MAIN in net.stacks:
        net.stacks[MAIN].keep.flush()
    local, keep = open_estate(tmp_path / "m", "main", main=True, host_address=MAIN)
    stack = RoadStack(local, RoadConfig(fast=True), keep=keep, now=net.now)
    keep.restore_remotes(stack)
    net.add(MAIN, stack)
    return stack


def test_messages_sent_after_main_restarts_from_its_keep_arrive_in_fast_mode(
        tmp_path: Path) -> None:
    net = SimNet(seed=5)
    _main(tmp_path, net)
    local, keep = open_estate(tmp_path / "n", "minion", main=False, host_address=MINION)
    minion = RoadStack(local, RoadConfig(fast=True), keep=keep)
    net.add(MINION, minion)
    minion.join(MAIN, now=0.0)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=10)
    minion.transmit({"seq": -1}, to="main")
    assert net.run_until(lambda: bool(net.of_type(MAIN, events.MessageReceived)), timeout=10)
    assert minion.stats.fast_datagrams_sent, "the pair never used fast mode"

    restarted = _main(tmp_path, net)  # replaces main at the same address, keys from the keep
    assert "rlk" in restarted.remote("minion").capabilities
    net.run_for(5.0)  # presence finds the new session; the pair allows again
    for seq in range(50):
        minion.transmit({"seq": seq}, to="main")
    delivered = lambda: {e.body["seq"] for e in net.of_type(MAIN, events.MessageReceived)  # noqa: E731
                         if isinstance(e.body, dict)}
    assert net.run_until(lambda: set(range(50)) <= delivered(), timeout=30)
    assert not net.of_type(MINION, events.MessageExpired)


def test_a_peer_that_restarts_its_fast_stream_is_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="road")
    net = SimNet(seed=5)
    first = _main(tmp_path, net)
    local, keep = open_estate(tmp_path / "n", "minion", main=False, host_address=MINION)
    minion = RoadStack(local, RoadConfig(fast=True), keep=keep)
    net.add(MINION, minion)
    minion.join(MAIN, now=0.0)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.Allowed)), timeout=10)
    first.transmit(b"before", to="minion", now=net.now)
    assert net.run_until(lambda: bool(net.of_type(MINION, events.MessageReceived)), timeout=10)
    assert "restarted its fast stream" not in caplog.text
    _main(tmp_path, net).transmit(b"after", to="minion", now=net.now)
    net.run_for(5.0)
    assert net.run_until(lambda: len(net.of_type(MINION, events.MessageReceived)) == 2,
                         timeout=10)
    assert "minion: main restarted its fast stream" in caplog.text
