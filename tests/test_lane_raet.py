"""Interop with a live RAET 0.6.8 LaneStack, both directions, in one peer process per kind."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lane import LaneConfig, LaneStack, LocalYard, events
from raetlike.run import Loop
from raetlike.uxd import UxdDriver
from raetlike.wire.kinds import PageKind
from tests.raetpeer import raet_command

RAET_YARD = """
import json, sys, time
import msgpack
# the shim patches packb/unpackb; RAET's lane pages call the loads/dumps aliases
msgpack.loads, msgpack.dumps = msgpack.unpackb, msgpack.packb
from raet.lane import stacking, yarding
from raet.raeting import PackKind
config = json.loads(sys.stdin.readline())
stack = stacking.LaneStack(name="raet", lanename="test", sockdirpath=config["dir"])
if config["msgpack"]:
    stack.Pk = PackKind.pack.value
ours = yarding.RemoteYard(stack=stack, ha=config["ours"])
stack.addRemote(ours)
print(json.dumps({"ready": stack.ha}), flush=True)
for message in config["send"]:
    stack.transmit(message, uid=ours.uid)
got = []
deadline = time.monotonic() + 20
while time.monotonic() < deadline and len(got) < config["expect"]:
    stack.serviceAll()
    while stack.rxMsgs:
        body, name = stack.rxMsgs.popleft()
        got.append({"from": name, "body": body})
    time.sleep(0.005)  # RAET lanes are polled; this is its poll period, not a wait for luck
for _ in range(20):
    stack.serviceAll()
stats = {key: value for key, value in stack.stats.items()}
stack.server.close()
print(json.dumps({"got": got, "stats": stats}), flush=True)
"""

TO_RAET: list[dict[str, Any]] = [
    {"small": "hello raet"},
    {"route": {"src": ["a", "b", None]}, "list": [1, 2.5, True, None]},
    {"multi": "m" * 300_000},
    {"big": "q" * 2_000_000, "n": 7},
]
FROM_RAET: list[dict[str, Any]] = [
    {"small": "hello raetlike"},
    {"multi": "r" * 250_000, "nested": {"k": [1, 2, 3]}},
    {"unicode": "yard \u00e9\u00e8 \u2603"},
]


@pytest.fixture
def loop() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.close()


@pytest.mark.parametrize("kind", [PageKind.JSON, PageKind.MSGPACK])
def test_raetlike_and_raet_yards_exchange_small_and_multi_page_messages_both_ways(
        tmp_path: Path, loop: Loop, kind: PageKind) -> None:
    directory = tmp_path / "uxd"
    ours = LaneStack(LocalYard("ours", "test", str(directory)), LaneConfig(page_kind=kind))
    loop.add(UxdDriver(ours))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    peer = subprocess.Popen(raet_command(RAET_YARD), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert peer.stdin is not None
    assert peer.stdout is not None
    try:
        peer.stdin.write(json.dumps({
            "dir": str(directory), "ours": ours.path, "msgpack": kind is PageKind.MSGPACK,
            "send": FROM_RAET, "expect": len(TO_RAET),
        }) + "\n")
        peer.stdin.flush()
        ready = json.loads(peer.stdout.readline())
        assert ready["ready"] == str(directory / "test.raet.uxd")
        for message in TO_RAET:
            ours.transmit(message, to="raet")
        seen: list[events.MessageReceived] = []

        def all_in() -> bool:
            assert peer.poll() is None, "the RAET peer died"
            while (event := ours.next_event()) is not None:
                if isinstance(event, events.MessageReceived):
                    seen.append(event)
            return len(seen) == len(FROM_RAET) and ours.get_timer() is None

        assert loop.run_until(all_in, timeout=20)
        report = json.loads(peer.stdout.readline())
        assert peer.wait(10) == 0
    finally:
        peer.kill()
        peer.wait(5)
    assert [event.body for event in seen] == FROM_RAET
    assert {event.yard for event in seen} == {"raet"}
    assert [event.pages for event in seen][:2] == [1, 4]
    assert [entry["body"] for entry in report["got"]] == TO_RAET
    assert {entry["from"] for entry in report["got"]} == {"ours"}
    assert ours.stats.dropped_total == 0
    assert ours.stats.messages_sent == len(TO_RAET)
