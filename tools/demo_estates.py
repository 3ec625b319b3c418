"""A main estate and a minion on one cooperative loop exchanging events over UDP.

Run: .venv/bin/python tools/demo_estates.py
"""

from __future__ import annotations

from collections.abc import Generator

from raetlike.run import Loop, Until
from raetlike.udp import UdpDriver
from road import events
from road.stack import LocalEstate, RoadStack

loop = Loop()
main = RoadStack(LocalEstate("main", main=True))
minion = RoadStack(LocalEstate("minion"))
heard: list[events.Event] = []
main_driver = UdpDriver(main)
loop.add(main_driver, on_event=heard.append)
loop.add(UdpDriver(minion), on_event=heard.append)


def check(ok: object, what: str) -> None:
    """Stop with a one-line reason when ``ok`` is false."""
    if not ok:
        raise SystemExit(f"demo failed: {what}")


def received(body: dict[str, object]) -> bool:
    return any(isinstance(e, events.MessageReceived) and e.body == body for e in heard)


def conversation() -> Generator[object, object, list[object]]:  # a task the loop resumes
    minion.join(main_driver.address)  # join, then allow: session keys
    allowed = yield Until(lambda: any(isinstance(e, events.Allowed) for e in heard), timeout=10)
    check(allowed, "the minion was not allowed")
    minion.transmit({"event": "started", "from": "minion"}, to="main")
    check((yield Until(lambda: received({"event": "started", "from": "minion"}), timeout=10)),
          "main did not receive the minion's event")
    main.transmit({"event": "welcome", "to": "minion"}, to="minion")
    check((yield Until(lambda: any(isinstance(e, events.MessageSent) and e.remote == "minion"
                                   for e in heard), timeout=10)),  # acknowledged by the minion
          "the minion did not acknowledge main's event")
    return [e.body for e in heard if isinstance(e, events.MessageReceived)]


bodies = loop.run_task(conversation(), timeout=20)
loop.shutdown()
loop.close()
for body in bodies:
    print("received", body)
