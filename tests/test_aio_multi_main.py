"""aio.Estate.join_mains on real loopback UDP: failover to the other main, and hot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from raetlike import aio
from raetlike.errors import JoinTimeoutError
from raetlike.multimain import MainActive, MultiMode
from raetlike.udp import bind_udp
from road import events

TIMEOUT = 20.0


async def _main_active(estate: aio.Estate, name: str) -> MainActive:
    async for event in estate.events():
        if isinstance(event, MainActive) and event.remote == name:
            return event
    raise AssertionError("events ended")


@pytest.mark.asyncio
async def test_a_failover_estate_moves_to_the_other_main_and_its_send_still_completes(
        ) -> None:
    async with (aio.Estate("alpha", main=True, auto="once") as alpha,
                aio.Estate("beta", main=True, auto="once") as beta,
                aio.Estate("minion") as minion):
        first = await minion.join_mains([alpha.address, beta.address], multi="failover",
                                        timeout=TIMEOUT)
        assert minion.mains is not None
        assert first == minion.mains.active
        survivor = beta if first == "alpha" else alpha
        assert await minion.send({"n": 1}, to=first) == 1
        moved = asyncio.ensure_future(_main_active(minion, survivor.name))
        (alpha if first == "alpha" else beta).close()  # the active main is gone
        sending = asyncio.ensure_future(minion.send({"n": 2}, to=first))
        event = await asyncio.wait_for(moved, TIMEOUT)
        assert event.previous == first
        assert event.reason == "lost"
        # the message sent to the lost main went to the survivor; its id is the one
        # send returned, and its acknowledgement came from the survivor
        assert await asyncio.wait_for(sending, TIMEOUT) == 2
        received = [m async for m in _take(survivor, 1)]
        assert [m.body for m in received] == [{"n": 2}]


async def _take(estate: aio.Estate, count: int) -> AsyncIterator[events.MessageReceived]:
    async for message in estate.messages():
        yield message
        count -= 1
        if count == 0:
            return


@pytest.mark.asyncio
async def test_a_hot_estate_serves_with_one_main_down_and_joins_it_when_it_appears() -> None:
    with bind_udp("127.0.0.1", 0) as sock:
        down = sock.getsockname()[:2]  # a port nobody answers on (yet)
    async with (aio.Estate("alpha", main=True, auto="once") as alpha,
                aio.Estate("minion") as minion):
        assert await minion.join_mains([down, alpha.address], multi=MultiMode.HOT,
                                       timeout=TIMEOUT) == "alpha"
        async with aio.Estate("beta", main=True, auto="once", port=down[1]) as beta:
            assert beta.address[1] == down[1]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + TIMEOUT
            assert minion.mains is not None
            while sorted(minion.mains.upstreams()) != ["alpha", "beta"]:
                assert loop.time() < deadline, minion.mains.upstreams()
                await asyncio.sleep(0.05)


@pytest.mark.asyncio
async def test_join_mains_times_out_when_no_main_answers() -> None:
    with bind_udp("127.0.0.1", 0) as one, bind_udp("127.0.0.1", 0) as two:
        silent = [one.getsockname()[:2], two.getsockname()[:2]]
        async with aio.Estate("minion") as minion:
            with pytest.raises(JoinTimeoutError, match="none of 2 mains"):
                await minion.join_mains(silent, timeout=0.5)
