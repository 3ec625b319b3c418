"""asyncio yards on real UNIX datagram sockets: a pair exchanges messages, failures raise."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from lane import LaneConfig, events
from raetlike import aio
from raetlike.errors import BackpressureError

TIMEOUT = 10.0


async def collect(yard: aio.Yard, count: int) -> list[events.MessageReceived]:
    got: list[events.MessageReceived] = []
    async for message in yard.messages():
        got.append(message)
        if len(got) == count:
            break
    return got


@pytest.mark.asyncio
async def test_a_yard_pair_exchanges_messages_both_ways(tmp_path: Path) -> None:
    directory = str(tmp_path)
    async with aio.Yard("alpha", lane="test", directory=directory) as alpha, \
            aio.Yard("beta", lane="test", directory=directory) as beta:
        assert os.path.exists(alpha.path)
        receiving = asyncio.ensure_future(collect(beta, 2))
        first = await alpha.send({"n": 1}, to="beta")
        second = await alpha.send({"blob": "y" * 300_000}, to="beta")  # several pages
        assert (first, second) == (1, 2)
        received = await asyncio.wait_for(receiving, TIMEOUT)
        assert [m.body for m in received] == [{"n": 1}, {"blob": "y" * 300_000}]
        assert received[1].pages > 1
        assert {m.yard for m in received} == {"alpha"}

        replying = asyncio.ensure_future(collect(alpha, 1))
        await beta.send({"reply": True}, to="alpha")
        assert [m.body for m in await asyncio.wait_for(replying, TIMEOUT)] == [{"reply": True}]
        paths = [alpha.path, beta.path]
    assert not any(os.path.exists(path) for path in paths)  # socket files removed on exit


@pytest.mark.asyncio
async def test_send_to_a_yard_that_never_appears_raises_yard_unreachable(
        tmp_path: Path) -> None:
    config = LaneConfig(unreachable_after=0.3, gone_retry=0.05, max_retry=0.1)
    async with aio.Yard("alpha", lane="test", directory=str(tmp_path), config=config) as alpha:
        started = asyncio.get_running_loop().time()
        with pytest.raises(aio.YardUnreachableError) as caught:
            await asyncio.wait_for(alpha.send({"n": 1}, to="ghost"), TIMEOUT)
        assert caught.value.event.messages == ({"n": 1},)
        assert caught.value.event.yard == "ghost"
        assert asyncio.get_running_loop().time() - started < 2.0  # the back-off timers fired


@pytest.mark.asyncio
async def test_a_send_to_a_yard_that_starts_late_completes_once_it_is_there(
        tmp_path: Path) -> None:
    directory = str(tmp_path)
    async with aio.Yard("alpha", lane="test", directory=directory) as alpha:
        sending = asyncio.ensure_future(alpha.send({"late": True}, to="beta"))
        await asyncio.sleep(0.15)
        assert not sending.done()  # beta's socket does not exist yet: the stack backs off
        async with aio.Yard("beta", lane="test", directory=directory) as beta:
            receiving = asyncio.ensure_future(collect(beta, 1))
            assert await asyncio.wait_for(sending, TIMEOUT) == 1
            assert [m.body for m in await asyncio.wait_for(receiving, TIMEOUT)] == [
                {"late": True}]


@pytest.mark.asyncio
async def test_yard_send_raises_backpressure_at_once_when_the_outbox_is_full(
        tmp_path: Path) -> None:
    config = LaneConfig(outbox_limit=1)
    async with aio.Yard("alpha", lane="test", directory=str(tmp_path), config=config) as alpha:
        alpha.transmit({"n": 1}, to="ghost")
        with pytest.raises(BackpressureError):
            await alpha.send({"n": 2}, to="ghost")
    assert [e.messages for e in alpha.undelivered] == [({"n": 1},)]  # handed back on close
