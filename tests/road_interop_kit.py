"""A road of raetlike stacks (in this process) and live RAET 0.6.8 estates (subprocesses).

Our stacks run on a :class:`raetlike.run.Loop` with :class:`raetlike.udp.UdpDriver`
on 127.0.0.1; RAET estates are :class:`tests.raetpeer.road.RaetRoadPeer`
processes.  :meth:`InteropRoad.until` services the loop until a condition
holds or a deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raetlike.run import Loop
from raetlike.udp import UdpDriver
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.raetpeer.road import PeerWaker, RaetRoadPeer

MEGABYTE_TEXT = "".join(chr(ord("a") + i % 26) for i in range(1_000_000))


class InteropRoad:
    """Owns the loop, our stacks and the RAET peers of one test."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.loop = Loop()
        self.waker = PeerWaker()
        self.loop.add(self.waker)
        self.peers: list[RaetRoadPeer] = []
        self.drivers: dict[str, UdpDriver] = {}
        self.stacks: dict[str, RoadStack] = {}
        self.events: dict[str, list[events.Event]] = {}

    # -- our side ------------------------------------------------------------
    def ours(self, name: str, *, main: bool = False, auto: AutoMode = AutoMode.ONCE,
             port: int = 0, local: LocalEstate | None = None,
             keep: MemoryKeep | None = None, config: RoadConfig | None = None) -> RoadStack:
        """Start (or restart) a raetlike estate called ``name``."""
        if name in self.drivers:
            self.drop_ours(name)
        local = local or LocalEstate(name, main=main)
        stack = RoadStack(local, config or RoadConfig(auto=auto),
                          keep=keep or MemoryKeep(auto), now=time.monotonic())
        driver = UdpDriver(stack, port=port)
        self.loop.add(driver)
        self.drivers[name] = driver
        self.stacks[name] = stack
        self.events[name] = []
        return stack

    def drop_ours(self, name: str) -> None:
        """Stop our estate ``name`` abruptly (its socket closes; nothing is sent)."""
        driver = self.drivers.pop(name)
        self.loop.remove(driver)
        driver.close()
        del self.stacks[name]

    def address(self, name: str) -> tuple[str, int]:
        return self.drivers[name].address

    def address_text(self, name: str) -> str:
        host, port = self.address(name)
        return f"{host}:{port}"

    def now(self) -> float:
        return time.monotonic()

    def drain(self) -> None:
        for name, stack in self.stacks.items():
            while (event := stack.next_event()) is not None:
                self.events[name].append(event)

    def seen(self, name: str, kind: type[events.Event], **match: Any) -> list[Any]:
        """Events of ``kind`` our estate ``name`` reported (fields equal ``match``)."""
        self.drain()
        return [e for e in self.events[name] if isinstance(e, kind)
                and all(getattr(e, k) == v for k, v in match.items())]

    def received(self, name: str, remote: str | None = None) -> list[Any]:
        return [e.body for e in self.seen(name, events.MessageReceived)
                if remote is None or e.remote == remote]

    # -- RAET side -----------------------------------------------------------
    def raet(self, name: str, keep: str = "", **options: Any) -> RaetRoadPeer:
        """Start (or restart, same keep) a RAET estate called ``name``.

        ``keep`` names another keep directory (a fresh one: new keys).
        """
        directory = self.base / f"raet-{keep or name}"
        peer = RaetRoadPeer(name, directory, waker=self.waker, **options)
        self.peers.append(peer)
        return peer

    def status(self, peer: RaetRoadPeer, timeout: float = 5.0) -> dict[str, Any]:
        """A fresh status report from ``peer`` (servicing our side meanwhile)."""
        before = peer.status_request()
        assert self.until(lambda: len(peer.find("status")) > before, timeout)
        report = peer.latest_status()
        assert report is not None
        return report

    def raet_remote(self, peer: RaetRoadPeer, name: str) -> dict[str, Any] | None:
        for remote in self.status(peer)["remotes"]:
            if remote["name"] == name:
                return dict(remote)
        return None

    # -- waiting -------------------------------------------------------------
    def until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Service everything until ``condition()`` holds; False when the deadline passed."""

        def check() -> bool:
            self.drain()
            return condition()

        return self.loop.run_until(check, timeout)

    def close(self) -> None:
        for peer in self.peers:
            peer.stop()
        self.loop.close()
