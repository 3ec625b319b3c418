"""The lane driver hands its stack only socket-file senders (a path, or None when unbound):
a page from a sender bound to an abstract name is dropped and counted, on both receive
paths (recvfrom and recvmmsg) and in both builds alike."""
from __future__ import annotations

import os
import select
import socket
import time
from pathlib import Path

import pytest

from lane import LaneStack, LocalYard, events
from raetlike import uxd
from raetlike.uxd import UxdDriver
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import paginate

SESSION = "01" + "b" * 16

PATHS = [pytest.param(False, id="recvfrom"),
         pytest.param(True, id="recvmmsg", marks=pytest.mark.skipif(
             not uxd.BATCHED, reason="raetlike._cmmsg not built, or the pure path asked for"))]


def _page(source: str, number: int) -> bytes:
    return paginate(source, "me", SESSION, number, {"n": number}, PageKind.JSON)[0]


@pytest.mark.parametrize("batched", PATHS)
def test_a_page_from_an_abstract_socket_is_dropped_and_counted(tmp_path: Path,
                                                               batched: bool) -> None:
    stack = LaneStack(LocalYard("me", "lane", str(tmp_path / "uxd")))
    driver = UxdDriver(stack)
    driver.batched = batched
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    named = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    unbound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        abstract.bind(b"\0raetlike-test-abstract-%d-%d" % (os.getpid(), batched))
        named_path = str(tmp_path / "uxd" / "lane.you.uxd")
        named.bind(named_path)
        for number in range(3):
            abstract.sendto(_page("mallory", number), stack.path)
        unbound.sendto(_page("anon", 0), stack.path)
        named.sendto(_page("you", 9), stack.path)
        seen: list[events.Event] = []
        deadline = time.monotonic() + 5.0
        while not any(isinstance(e, events.MessageReceived) and e.yard == "you" for e in seen):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the named sender's page never came: {seen}"
            if select.select([driver.fileno()], [], [], remaining)[0]:
                driver.receive(time.monotonic())  # raised TypeError (compiled) before the fix
            while (event := stack.next_event()) is not None:
                seen.append(event)
        assert sorted(stack.yards) == ["anon", "you"]  # the pure build added "mallory"
        assert driver.foreign_sources == 3
        assert all(type(yard.path) is str for yard in stack.yards.values())
        assert stack.yards["you"].path == named_path
        assert [e.yard for e in seen if isinstance(e, events.MessageReceived)] == ["anon", "you"]
    finally:
        for sock in (abstract, named, unbound):
            sock.close()
        driver.close()
