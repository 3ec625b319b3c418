"""Two yards on one lane (UNIX datagram sockets in a temporary directory).

Run: .venv/bin/python tools/demo_yards.py
"""

from __future__ import annotations

import tempfile

from lane import LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver


def check(ok: object, what: str) -> None:
    """Stop with a one-line reason when ``ok`` is false."""
    if not ok:
        raise SystemExit(f"demo failed: {what}")


with tempfile.TemporaryDirectory() as directory:
    loop = Loop()
    alpha = LaneStack(LocalYard("alpha", "jobs", directory))
    beta = LaneStack(LocalYard("beta", "jobs", directory))
    got: list[events.MessageReceived] = []
    loop.add(UxdDriver(alpha), on_event=lambda e: got.append(e)
             if isinstance(e, events.MessageReceived) else None)
    loop.add(UxdDriver(beta), on_event=lambda e: got.append(e)
             if isinstance(e, events.MessageReceived) else None)

    alpha.transmit({"job": 1, "blob": "x" * 200_000}, to="beta")  # split into pages
    check(loop.run_until(lambda: len(got) == 1, timeout=10), "beta got nothing")
    beta.transmit({"done": 1}, to="alpha")
    check(loop.run_until(lambda: len(got) == 2, timeout=10), "alpha got nothing")
    for message in got:
        print(f"{message.yard} -> {sorted(message.body)} in {message.pages} page(s)")
    loop.shutdown()  # closes the stacks and removes the socket files
    loop.close()
