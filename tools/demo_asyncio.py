"""The same with asyncio: two estates on UDP and two yards on a lane, ``async with``.

Run: .venv/bin/python tools/demo_asyncio.py
"""

from __future__ import annotations

import asyncio
import tempfile

from raetlike import aio
from road.events import JoinPending


async def estates() -> None:
    async with aio.Estate("main", main=True) as main, aio.Estate("minion") as minion:
        joining = asyncio.ensure_future(minion.join(main.address))
        async for event in main.events():  # a main estate leaves keys it never saw pending
            if isinstance(event, JoinPending):
                main.accept(event.role)  # the operator's 'raetlike keys accept'
                break
        await joining  # joined and allowed
        await minion.send({"event": "started"}, to="main")  # acknowledged by main
        async for message in main.messages():
            print(f"main got {message.body} from {message.remote}")
            break
        await main.send({"event": "welcome"}, to="minion")
        async for message in minion.messages():
            print(f"minion got {message.body} from {message.remote}")
            break


async def yards(directory: str) -> None:
    async with aio.Yard("alpha", lane="jobs", directory=directory) as alpha, \
            aio.Yard("beta", lane="jobs", directory=directory) as beta:
        await alpha.send({"job": 1}, to="beta")  # the kernel took it
        async for message in beta.messages():
            print(f"beta got {message.body} from {message.yard}")
            break


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        await asyncio.wait_for(asyncio.gather(estates(), yards(directory)), timeout=30)


asyncio.run(main())
