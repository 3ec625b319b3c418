"""asyncio estates on real loopback UDP: join, send awaiting the ack, expiry, messages()."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from raetlike import aio
from raetlike.errors import BackpressureError, RaetError
from raetlike.names import InvalidNameError
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

TIMEOUT = 10.0


async def collect(estate: aio.Estate, count: int) -> list[events.MessageReceived]:
    got: list[events.MessageReceived] = []
    async for message in estate.messages():
        got.append(message)
        if len(got) == count:
            break
    return got


@pytest.mark.asyncio
async def test_two_estates_join_and_exchange_messages_each_send_awaiting_its_ack() -> None:
    async with aio.Estate("main", main=True, auto="once") as main, aio.Estate("minion") as minion:
        name = await minion.join(main.address, timeout=TIMEOUT)
        assert name == "main"
        assert minion.stack.remote("main").allowed is True

        receiving = asyncio.ensure_future(collect(main, 3))
        ids = [await minion.send({"n": n}, to="main") for n in range(3)]
        assert ids == [1, 2, 3]
        received = await asyncio.wait_for(receiving, TIMEOUT)
        assert [m.body for m in received] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert {m.remote for m in received} == {"minion"}

        # and back the other way, a big one in many segments
        back = asyncio.ensure_future(collect(minion, 1))
        await main.send({"blob": "x" * 200_000}, to="minion")
        reply = await asyncio.wait_for(back, TIMEOUT)
        assert reply[0].body == {"blob": "x" * 200_000}
        assert reply[0].segments > 1


@pytest.mark.asyncio
async def test_concurrent_sends_all_complete_once_acknowledged() -> None:
    async with aio.Estate("main", main=True, auto="once") as main, aio.Estate("minion") as minion:
        await minion.join(main.address, timeout=TIMEOUT)
        ids = await asyncio.wait_for(
            asyncio.gather(*(minion.send({"n": n}, to="main") for n in range(50))), TIMEOUT)
        assert sorted(ids) == list(range(1, 51))
        assert main.stack.stats.messages_received == 50


@pytest.mark.asyncio
async def test_send_raises_message_expired_when_nobody_acknowledges() -> None:
    async with aio.Estate("alone") as alone:
        alone.stack.add_remote(("127.0.0.1", 9), name="nobody")
        started = asyncio.get_running_loop().time()
        with pytest.raises(aio.MessageExpiredError) as caught:
            await asyncio.wait_for(alone.send({"lost": True}, to="nobody", ttl=0.3), TIMEOUT)
        assert isinstance(caught.value, RaetError)
        assert caught.value.event.body == {"lost": True}
        assert caught.value.event.remote == "nobody"
        assert asyncio.get_running_loop().time() - started < 2.0  # the expiry timer fired


@pytest.mark.asyncio
async def test_send_raises_backpressure_at_once_when_the_outbox_is_full() -> None:
    async with aio.Estate("alone", config=RoadConfig(outbox_limit=2)) as alone:
        alone.stack.add_remote(("127.0.0.1", 9), name="nobody")
        alone.transmit({"n": 1}, to="nobody")
        alone.transmit({"n": 2}, to="nobody")
        with pytest.raises(BackpressureError):
            await alone.send({"n": 3}, to="nobody")
    assert [e.body for e in alone.undelivered] == [{"n": 1}, {"n": 2}]  # handed back on close


@pytest.mark.asyncio
async def test_a_pending_send_fails_when_the_estate_closes() -> None:
    alone = aio.Estate("alone")
    async with alone:
        alone.stack.add_remote(("127.0.0.1", 9), name="nobody")
        sending = asyncio.ensure_future(alone.send({"n": 1}, to="nobody"))
        await asyncio.sleep(0)
    with pytest.raises(aio.MessageExpiredError, match="stack closed"):
        await sending


async def first_pending(estate: aio.Estate) -> events.JoinPending:
    async for event in estate.events():
        if isinstance(event, events.JoinPending):
            return event
    raise AssertionError("estate closed before a join was pending")


@pytest.mark.asyncio
async def test_join_raises_when_the_main_operator_rejects_us() -> None:
    keep = MemoryKeep(AutoMode.NEVER)
    strict = RoadStack(LocalEstate("main", main=True), RoadConfig(auto=AutoMode.NEVER), keep)
    async with aio.Estate(strict) as main, aio.Estate("minion") as minion:
        joining = asyncio.ensure_future(minion.join(main.address, timeout=TIMEOUT))
        pending = await asyncio.wait_for(first_pending(main), TIMEOUT)
        assert not joining.done()
        keep.reject(pending.role)
        with pytest.raises(aio.JoinError, match="rejected"):
            await joining


@pytest.mark.asyncio
async def test_a_main_estate_leaves_new_keys_pending_until_accepted_by_default() -> None:
    async with aio.Estate("main", main=True) as main, aio.Estate("minion") as minion:
        assert main.stack.keep.auto is AutoMode.NEVER
        assert minion.stack.keep.auto is AutoMode.ONCE  # a joiner takes the main's keys once
        joining = asyncio.ensure_future(minion.join(main.address, timeout=TIMEOUT))
        pending = await asyncio.wait_for(first_pending(main), TIMEOUT)
        assert (pending.remote, pending.role, pending.local) == ("minion", "minion", True)
        assert not joining.done()
        main.accept(pending.role)
        assert await joining == "main"
        with pytest.raises(RaetError, match="no keys of role 'stranger'"):
            main.accept("stranger")


@pytest.mark.parametrize(("auto", "mode"), [("once", AutoMode.ONCE), ("ALWAYS", AutoMode.ALWAYS),
                                            (AutoMode.NEVER, AutoMode.NEVER)])
def test_auto_chooses_the_acceptance_of_new_keys_over_the_configs(
        auto: str | AutoMode, mode: AutoMode) -> None:
    estate = aio.Estate("main", main=True, auto=auto, config=RoadConfig(auto=AutoMode.ONCE))
    assert estate.stack.keep.auto is mode
    assert estate.stack.config.auto is mode


def test_a_bad_auto_or_estate_name_is_refused_at_once() -> None:
    with pytest.raises(RaetError, match="never, once or always, not 'sometimes'"):
        aio.Estate("main", main=True, auto="sometimes")
    with pytest.raises(InvalidNameError, match=r"invalid estate name 'ma\\x1b\[31min'"):
        aio.Estate("ma\x1b[31min")


@pytest.mark.asyncio
async def test_join_times_out_when_nobody_answers() -> None:
    async with aio.Estate("minion") as minion:
        with pytest.raises(aio.JoinTimeoutError) as caught:
            await minion.join(("127.0.0.1", 9), timeout=0.3)
        assert isinstance(caught.value, TimeoutError)


@pytest.mark.asyncio
async def test_messages_ends_when_the_estate_closes() -> None:
    estate = aio.Estate("alone")
    async with estate:
        reading = asyncio.ensure_future(collect(estate, 1))
        await asyncio.sleep(0)
    assert await asyncio.wait_for(reading, TIMEOUT) == []


@pytest.mark.asyncio
async def test_an_idle_estate_arms_no_timer() -> None:
    async with aio.Estate("alone") as alone:
        assert alone.stack.get_timer() is None
        assert alone._timer is None  # nothing to wake for: no idle wake-ups


def _uvloop_runner() -> Callable[[Coroutine[Any, Any, None]], None] | None:
    if importlib.util.find_spec("uvloop") is None:
        return None
    import uvloop  # type: ignore[import-not-found]  # noqa: PLC0415 - optional

    def run(coroutine: Coroutine[Any, Any, None]) -> None:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(coroutine)
    return run


def test_estates_work_on_uvloop_when_it_is_installed() -> None:
    run = _uvloop_runner()
    if run is None:
        pytest.skip("uvloop is not installed (optional)")

    async def exchange() -> None:
        async with (aio.Estate("main", main=True, auto="once") as main,
                    aio.Estate("minion") as minion):
            await minion.join(main.address, timeout=TIMEOUT)
            receiving = asyncio.ensure_future(collect(main, 1))
            await minion.send({"on": "uvloop"}, to="main")
            assert [m.body for m in await asyncio.wait_for(receiving, TIMEOUT)] == [
                {"on": "uvloop"}]

    run(exchange())
