"""Manors routing yard to yard: two estate processes, an echo yard, and this yard.

main (a manor of lane 'moon', with the yard 'echo') and minion (a manor of lane
'sun'); this script is the yard 'asker' on 'sun' and sends a message routed to
('main', 'echo'): sun -> minion's manor -> road -> main's manor -> moon -> echo,
and the echo comes back the same way.

Run: .venv/bin/python tools/demo_manor.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

from lane import LaneStack, LocalYard, events
from raetlike.manor import Route, Triple, parse_route, with_route
from raetlike.run import Loop
from raetlike.uxd import UxdDriver


def check(ok: object, what: str) -> None:
    """Stop with a one-line reason when ``ok`` is false."""
    if not ok:
        raise SystemExit(f"demo failed: {what}")


def start(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m raetlike ARGS``; returns it and its first line (where it listens)."""
    child = subprocess.Popen([sys.executable, "-m", "raetlike", "-q", *args],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = child.stdout.readline().decode() if child.stdout is not None else ""
    check(" listening on " in line, f"{args[0]} {args[1]} did not start")
    return child, line.split(" listening on ")[1].strip()


with tempfile.TemporaryDirectory() as temp:
    children = []
    try:
        main, main_at = start("estate", "main", "--main", "--auto", "once", "--host",
                              "127.0.0.1", "--port", "0", "--keep", f"{temp}/keep",
                              "--lane", "moon", "--dir", f"{temp}/moon")
        children.append(main)
        children.append(start("yard", "echo", "--lane", "moon", "--dir", f"{temp}/moon",
                              "--echo")[0])
        children.append(start("estate", "minion", "--host", "127.0.0.1", "--port", "0",
                              "--keep", f"{temp}/keep", "--join", main_at,
                              "--lane", "sun", "--dir", f"{temp}/sun")[0])

        loop = Loop()
        asker = LaneStack(LocalYard("asker", "sun", f"{temp}/sun"))
        loop.add(UxdDriver(asker))
        question = with_route({"question": 42}, Route(Triple(), Triple("main", "echo")))
        answer = None
        deadline = time.monotonic() + 20
        while answer is None and time.monotonic() < deadline:  # until joined, allowed, routed
            asker.transmit(question, to="main")  # to our manor, the lane's main yard
            loop.run_until(lambda: False, timeout=0.5)
            while (event := asker.next_event()) is not None:
                if isinstance(event, events.MessageReceived) and "question" in event.body:
                    answer = event.body
        check(answer is not None, "no answer through the manors")
        print("answer", answer and answer["question"], "routed", parse_route(answer))
        loop.shutdown()
        loop.close()
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=10)
