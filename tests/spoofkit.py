"""Spoofed join floods against a main on the simulated link (virtual clock): a spoofer that
cannot receive at the addresses it sends from, so it never answers (docs/road.md, "A main
under a join storm").  Used by tests/test_road_handshake_guard.py and
tools/handshake_storm_sim.py."""

from __future__ import annotations

from collections.abc import Callable

from road import events
from road.stack import RoadConfig
from tests.roadkit import MAIN, MINION, Pair
from tests.test_road_amplification import forged_join

RATE = RoadConfig().join_rate_per_source  # 2 a second from each source IP address
BURST = RoadConfig().join_burst_per_source  # in bursts of 20


def spoofed_hosts(count: int) -> list[str]:
    """``count`` source IP addresses, none of them anyone's on the link."""
    return [f"10.9.{n // 250}.{n % 250 + 1}" for n in range(count)]


class Spoofer:
    """Forged vacuous joins from ``hosts`` source IP addresses, each host within the main's
    per-source join rate (token buckets as the main's: a request past them would only be
    dropped unanswered), sent one at a time when the caller wants one."""

    def __init__(self, hosts: int) -> None:
        self.buckets = {host: (float(BURST), 0.0) for host in spoofed_hosts(hosts)}
        self.sent = 0

    def send(self, pair: Pair) -> bool:
        """One more join, from the first host with a token left, taken by the main at
        once; False when no host has one."""
        now = pair.net.now
        for host, (left, at) in self.buckets.items():
            tokens = min(float(BURST), left + (now - at) * RATE)
            if tokens >= 1.0:
                self.buckets[host] = (tokens - 1.0, now)
                request, _ = forged_join(f"spoof{self.sent}")
                pair.net.inject(request, (host, 40000 + self.sent % 20000), MAIN)
                self.sent += 1
                pair.net.step()
                return True
        return False


class JoinStream:
    """A steady stream of forged joins, ``rate`` a second from ``rate`` / 2 hosts in turn
    (each at the per-source rate), from ``start`` on."""

    def __init__(self, pair: Pair, rate: float, start: float) -> None:
        self.pair = pair
        self.rate = rate
        self.start = start
        self.hosts = spoofed_hosts(max(1, round(rate / RATE)))
        self.sent = 0

    def due(self) -> float:
        """When the next join of the stream goes."""
        return self.start + self.sent / self.rate

    def send_due(self) -> None:
        """Put every join whose time has come on the wire."""
        net = self.pair.net
        while net.now >= self.due():
            request, _ = forged_join(f"stream{self.sent}")
            host = self.hosts[self.sent % len(self.hosts)]
            net.inject(request, (host, 50000 + self.sent % 10000), MAIN)
            self.sent += 1

    def run_until(self, moment: float, done: Callable[[], bool] = lambda: False) -> bool:
        """Stream until ``moment`` or until ``done()``; whether ``done()`` held."""
        net = self.pair.net
        while net.now < moment:
            if done():
                return True
            self.send_due()
            if not net.step():
                net.run_to(min(moment, self.due()))
        return done()


def joined_within(pair: Pair, seconds: float,
                  between: Callable[[], object] = lambda: None) -> float | None:
    """Step (calling ``between`` after each step) until the minion joined or ``seconds``
    passed; how long it took, or None."""
    start = pair.net.now
    while pair.net.now < start + seconds:
        if pair.events(MINION, events.Joined):
            return pair.net.now - start
        pair.net.step()
        between()
    return None
