"""Durable asyncio estates on loopback UDP: what was accepted survives a restart, once."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from raetlike import aio
from raetlike.durable import DurableConfig
from raetlike.journal import FsyncPolicy
from road.persist import open_estate
from road.stack import RoadConfig, RoadStack
from tests.test_aio_estates import collect

TIMEOUT = 10.0


def _estate(root: Path, name: str, *, main: bool, port: int = 0) -> aio.Estate:
    local, keep = open_estate(root / "keep", name, main=main,
                              host_address=("127.0.0.1", port))
    stack = RoadStack(local, RoadConfig(auto=keep.auto), keep=keep)
    keep.restore_remotes(stack)
    return aio.Estate(stack, port=port, durable=root / "durable",
                      durable_config=DurableConfig(fsync=FsyncPolicy.ALWAYS))


@pytest.mark.asyncio
async def test_messages_accepted_before_a_restart_arrive_once_after_it(tmp_path: Path) -> None:
    main_root, minion_root = tmp_path / "main", tmp_path / "minion"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        there = probe.getsockname()[1]  # a restarted minion comes back at its address:
    # a main road is immutable (RAET), so an estate that moved would be rejected
    main = _estate(main_root, "main", main=True)
    async with main:
        port = main.address[1]
        async with _estate(minion_root, "minion", main=False, port=there) as minion:
            await minion.join(("127.0.0.1", port), timeout=TIMEOUT)
            receiving = asyncio.ensure_future(collect(main, 2))
            sent = [await asyncio.wait_for(minion.send({"n": n}, to="main"), TIMEOUT)
                    for n in range(2)]
            assert sent == [1, 2]  # durable ids
            assert [m.body for m in await asyncio.wait_for(receiving, TIMEOUT)] == [
                {"n": 0}, {"n": 1}]
    # main is down: the minion accepts three more, and stops before any is delivered
    async with _estate(minion_root, "minion", main=False, port=there) as minion:
        assert [minion.transmit({"n": n}, to="main") for n in range(2, 5)] == [3, 4, 5]
    assert minion.durable is not None
    assert len(minion.durable.outbox) == 3
    # both come back: the three arrive, once, and nothing of before arrives again
    async with _estate(main_root, "main", main=True, port=port) as main, \
            _estate(minion_root, "minion", main=False, port=there) as minion:
        assert minion.durable is not None
        assert minion.durable.resent == 3
        await minion.join(("127.0.0.1", port), timeout=TIMEOUT)  # a restart joins again
        received = await asyncio.wait_for(collect(main, 3), TIMEOUT)
        assert [m.body for m in received] == [{"n": 2}, {"n": 3}, {"n": 4}]

        async def emptied() -> None:
            assert minion.durable is not None
            while len(minion.durable.outbox):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(emptied(), TIMEOUT)
        assert main.durable is not None
        assert main.durable.duplicates_seen == 0
