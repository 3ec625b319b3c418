"""raetlike estates across real network namespaces (tests/netnskit.py): a 1280-byte MTU
link, a minion re-addressed mid-session (streaming, and idle), 10 % loss through
``raetlike chaos``, and a failover minion whose active main's cable is pulled.

Each test builds its own lab (namespaces on a bridge, 10.231.0.0/24 only inside them)
and removes it however it ends.  Skipped, with the reason, where namespaces cannot be
made (not root, no ``ip``, refused).  Deliveries are counted in the main estate's
journal (``--journal``): one record per message delivered, so a duplicate shows;
events by a bus subscriber in this process (a yard on a lane inside the lab's
directory: UNIX sockets are not per network namespace).  docs/testing-netns.md.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from raetlike.hosting import LoopBus, bus_yard
from raetlike.journal import read_journal
from tests.netnskit import (
    PREFIX,
    Lab,
    Proc,
    ipv6_unavailable,
    lab,
    remove_stale,
    unavailable,
)

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PORT = 7530
START = 30.0  # seconds for an estate to print where it listens, on a busy machine


def _main(net: Lab, host: str = "main", name: str = "main", *extra: str,
          ipv6: bool = False) -> Proc:
    """An echoing main estate in ``host`` that journals what it delivers."""
    address = net.address6(host) if ipv6 else net.address(host)
    proc = net.spawn(host, name, "estate", name, "--main", "--host", address,
                     "--port", str(PORT), "--auto", "always", "--echo",
                     "--keep", str(net.base / "keep"), "--journal", str(net.base / f"j-{name}"),
                     "--stats-every", "0.5", *extra)
    proc.first_line(f"estate {name} listening on ", START)
    return proc


def _ping(net: Lab, host: str, target: str, *args: str) -> Proc:
    return net.spawn(host, f"ping-{host}", "ping", target, "--json", *args)


def _result(ping: Proc, timeout: float) -> dict[str, Any]:
    code = ping.finish(timeout)
    assert code == 0, f"ping exited {code}:\n{ping.stdout()}\n{ping.stderr()[-4000:]}"
    result: dict[str, Any] = json.loads(ping.stdout().strip().splitlines()[-1])
    return result


def _deliveries(net: Lab, name: str = "main") -> dict[str, list[Any]]:
    """The messages the estate ``name`` journaled, by sender (after it stopped)."""
    by_sender: dict[str, list[Any]] = {}
    for record in read_journal([net.base / f"j-{name}"]).records:
        by_sender.setdefault(record.source.estate, []).append(record)
    return by_sender


def _remote(stats: dict[str, Any], name: str) -> dict[str, Any]:
    """The remote ``name`` in a stats line."""
    remotes = [r for r in stats["remotes"] if r["name"] == name]
    assert len(remotes) == 1, stats["remotes"]
    remote: dict[str, Any] = remotes[0]
    return remote


def _pinger(stats: dict[str, Any]) -> dict[str, Any]:
    """The one ping estate a main's stats line lists."""
    remotes = [r for r in stats["remotes"] if r["name"].startswith("ping-")]
    assert len(remotes) == 1, stats["remotes"]
    pinger: dict[str, Any] = remotes[0]
    return pinger


def _last_stats(proc: Proc) -> dict[str, Any]:
    """A fresh stats line of ``proc`` (asked for with SIGUSR1)."""
    before = len(proc.stats_lines())
    proc.signal(signal.SIGUSR1)
    lines: list[dict[str, Any]] = proc.wait_for(
        lambda _o, _e: (lines := proc.stats_lines()) and len(lines) > before and lines,
        10.0, "a stats line")
    return lines[-1]


def _oversized_datagram(net: Lab, host: str, to: str, *, ipv6: bool) -> None:
    """Send one 1400-byte UDP datagram from ``host`` (the kernel fragments it on a smaller
    link): the control that shows the MTU is real and the counters see it."""
    family = "AF_INET6" if ipv6 else "AF_INET"
    code = (f"import socket; s = socket.socket(socket.{family}, socket.SOCK_DGRAM); "
            f"s.sendto(b'x' * 1400, ('{to}', 9))")
    done = net.tool(host, sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("mode", "count", "family"), [
    ("fast", 20, 4), ("raet", 4, 4),
    pytest.param("fast", 20, 6, marks=pytest.mark.skipif(
        ipv6_unavailable() is not None, reason=str(ipv6_unavailable()))),
])
def test_large_messages_cross_a_1280_byte_mtu_link_whole_and_no_datagram_is_fragmented(
        mode: str, count: int, family: int) -> None:
    """100 KB messages echoed over a link whose MTU is 1280 (the minion's, both ends).
    Fast mode cuts 1232-byte datagrams, RAET mode 1024-byte packets: none needs an IP
    fragment on the way out, and nothing bigger is sent to the minion (its bridge port
    drops a frame over 1280, so an echo would never arrive).  Over IPv6 a full fast
    datagram is exactly 1280 bytes on the wire (1232 + 8 UDP + 40 IPv6): the bound."""
    ipv6 = family == 6
    frag, reasm = ("Ip6FragCreates", "Ip6ReasmOKs") if ipv6 else ("FragCreates", "ReasmOKs")
    watched = (("Ip6FragCreates", "Ip6FragOKs", "Ip6FragFails", "Ip6ReasmReqds") if ipv6
               else ("FragCreates", "FragOKs", "FragFails", "ReasmReqds"))
    with lab("main", "minion", ipv6=ipv6) as net:
        net.set_mtu("minion", 1280)
        main = _main(net, ipv6=ipv6)
        main_ip = net.address6("main") if ipv6 else net.address("main")
        # control: an oversized datagram from the minion is fragmented and reassembled
        _oversized_datagram(net, "minion", main_ip, ipv6=ipv6)
        assert net.snmp("minion")[frag] >= 2
        deadline = time.monotonic() + 10.0
        while net.snmp("main")[reasm] < 1:
            assert time.monotonic() < deadline, "the control datagram was never reassembled"
            time.sleep(0.02)
        before = {host: net.snmp(host) for host in ("main", "minion")}
        extra = ["--raet-mode"] if mode == "raet" else []
        target = f"[{main_ip}]:{PORT}" if ipv6 else f"{main_ip}:{PORT}"
        ping = _ping(net, "minion", target, "--count", str(count),
                     "--size", "100000", "--window", "4", "--timeout", "90", *extra)
        result = _result(ping, 100.0)
        assert (result["echoed"], result["size"]) == (count, 100000)
        after = {host: net.snmp(host) for host in ("main", "minion")}
        for host in ("main", "minion"):
            for counter in watched:
                assert after[host][counter] == before[host][counter], (host, counter)
        pinger = _pinger(_last_stats(main))
        assert pinger["mode"] == mode
        assert pinger["bytes_in"] / pinger["datagrams_in"] <= 1232
        assert main.stop() == 0
        deliveries = _deliveries(net)[pinger["name"]]
        assert len(deliveries) == count  # each once
        assert all(record.body_bytes > 100000 for record in deliveries)


@pytest.mark.parametrize(("mode", "count"), [("fast", 800), ("raet", 200)])
def test_a_minion_readdressed_mid_session_keeps_its_identity_and_every_message_arrives_once(
        mode: str, count: int) -> None:
    """The pinging minion's veth gets a new address while it streams.  Main hears it from
    there (a fast datagram, or a signed RAET packet), asks it "alive?" there, and its
    answer moves it (docs/road.md, "A remote that moves").  Same uid and keys, no new
    join; the rest of the stream continues, each message once.  (20 KB messages, 4 in
    flight: the minion nearly always has data of its own in flight when it moves; the
    idle case is the next test's.)"""
    with lab("main", "minion") as net:
        main = _main(net)
        main_ip, old_ip = net.address("main"), net.address("minion")
        extra = ["--raet-mode"] if mode == "raet" else []
        ping = _ping(net, "minion", f"{main_ip}:{PORT}", "--count", str(count),
                     "--size", "20000", "--window", "4", "--timeout", "90", *extra)
        main.wait_for(lambda _o, _e: any(line["road"]["messages_received"] >= count // 8
                                         for line in main.stats_lines()),
                      30.0, f"{count // 8} messages delivered")
        net.readdress("minion", "10.231.0.12")
        assert ping.popen.poll() is None, "the ping was over before the move: no test"
        result = _result(ping, 100.0)
        assert result["echoed"] == count
        main.wait_for(lambda _o, err: f"moved from {old_ip}:" in err, 10.0, "the move")
        assert "to 10.231.0.12:" in main.stderr()
        stats = _last_stats(main)
        pinger = _pinger(stats)
        assert pinger["address"][0] == "10.231.0.12"
        assert pinger["mode"] == mode
        assert stats["road"]["joins_completed"] == 1  # one join: the same estate, moved
        assert stats["road"]["remotes_moved"] == 1
        assert main.stop() == 0
        deliveries = _deliveries(net)[pinger["name"]]
        assert len(deliveries) == count  # each once, before and after the move
        assert len({record.transaction_id for record in deliveries}) == count


def test_a_minion_estate_readdressed_while_idle_keeps_its_keep_identity_and_answers_again(
        ) -> None:
    """A real minion (``raetlike estate minion --join ... --bus``, keys in its keep) answers
    bus calls that a yard on main's lane (this process) makes through main.  Its address
    changes while it has nothing to send: main's next request goes to the old address,
    but the minion's next presence check (1.5 s after it last heard main) comes from the
    new one, main asks it "alive?" there, and its answer moves it (docs/road.md, "A remote
    that moves").  Same uid, one join each side, every call answered once."""
    with lab("main", "minion") as net:
        main = _estate(net, "main", "main", "--main", "--auto", "always", "--stats-every",
                       "0.5")
        old_ip = net.address("minion")
        minion = net.spawn("minion", "minion", "estate", "minion", "--host",
                           "0.0.0.0",  # noqa: S104 - bound to no address: its address changes
                           "--port", str(PORT), "--keep", str(net.base / "keep"), "--bus",
                           "--join", f"{net.address('main')}:{PORT}")
        minion.first_line("estate minion listening on ", START)
        asker = bus_yard("asker", "mainl", str(net.base / "lanes"))
        try:
            deadline = time.monotonic() + START
            reply = asker.call_until_routed("minion", "echo.n", {"n": -1}, deadline)
            assert reply.ok, reply
            for number in range(20):
                reply = asker.call("minion", "echo.n", {"n": number}, timeout=10.0)
                assert (reply.ok, reply.payload) == (True, {"n": number}), reply
            before = _remote(_last_stats(main), "minion")
            net.readdress("minion", "10.231.0.12")
            moved_at = time.monotonic()
            for number in range(20, 40):
                reply = asker.call("minion", "echo.n", {"n": number}, timeout=30.0)
                assert (reply.ok, reply.payload) == (True, {"n": number}), reply
            followed = time.monotonic() - moved_at
            assert followed < 6.0, f"followed after {followed:.1f} s"
        finally:
            asker.loop.close()
        stats = _last_stats(main)
        remote = _remote(stats, "minion")
        assert remote["address"][0] == "10.231.0.12"
        assert before["address"] == [old_ip, PORT]
        assert stats["road"]["joins_completed"] == 1
        assert stats["road"]["remotes_moved"] == 1
        assert f"main: minion moved from {old_ip}:{PORT} to 10.231.0.12:{PORT}" in main.stderr()
        assert minion.stderr().count("estate minion: joined main") == 1
        assert minion.stop() == 0
        assert main.stop() == 0
        print(f"calls answered again {followed:.2f} s after the move")  # noqa: T201 - the figure, in -s output


def test_every_message_arrives_once_through_ten_percent_loss_of_raetlike_chaos() -> None:
    """Minion, chaos relay and main on three hosts; chaos loses 10 % of the datagrams
    each way.  Every echo comes back and main delivers each message exactly once.
    (3 KB messages: three datagrams each, so about 900 datagrams go each way and some
    90 are lost; small ones would share datagrams and give chaos little to lose.)"""
    count = 300
    with lab("main", "relay", "minion") as net:
        main = _main(net)
        chaos = net.spawn("relay", "chaos", "chaos", "--listen", f"{net.address('relay')}:{PORT}",
                          "--forward", f"{net.address('main')}:{PORT}", "--loss", "0.1",
                          "--seed", "17")
        chaos.first_line("chaos listening on ", START)
        ping = _ping(net, "minion", f"{net.address('relay')}:{PORT}", "--count", str(count),
                     "--size", "3000", "--window", "8", "--timeout", "90")
        result = _result(ping, 100.0)
        assert result["echoed"] == count
        assert chaos.stop() == 0
        counters = json.loads(chaos.stdout().strip().splitlines()[-1])
        for direction in counters.values():  # about a tenth lost each way, none refused
            assert direction["lost"] > direction["received"] * 0.03, counters
            assert direction["send_errors"] == 0, counters
        pinger = _pinger(_last_stats(main))
        assert main.stop() == 0
        assert len(_deliveries(net)[pinger["name"]]) == count  # each once


def _pump(buses: list[LoopBus], seconds: float) -> None:
    """Service this process's yards for ``seconds`` (each loop waits at most 5 ms)."""
    end = time.monotonic() + seconds
    while True:
        for bus in buses:
            bus.loop.run_once(max_wait=0.005)
        if time.monotonic() >= end:
            return


def _pump_until(buses: list[LoopBus], done: Callable[[], bool], timeout: float,
                what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"no {what} in {timeout:g} s"
        _pump(buses, 0.05)


def _estate(net: Lab, host: str, name: str, *args: str, port: int = PORT) -> Proc:
    """A bus manor ``name`` in ``host`` with its lane ``<name>l`` in the lab's directory."""
    proc = net.spawn(host, name, "estate", name, "--host", net.address(host), "--port",
                     str(port), "--keep", str(net.base / "keep"), "--bus", "--lane",
                     f"{name}l", "--dir", str(net.base / "lanes"), *args)
    proc.first_line(f"estate {name} listening on ", START)
    return proc


def _log_has(proc: Proc, text: str) -> Callable[[str, str], bool]:
    return lambda _out, err: text in err


def test_a_failover_minion_moves_to_the_other_main_when_a_link_goes_down_mid_stream(
        ) -> None:
    """Mains alpha and beta and a failover minion, each on its own host; a collector
    joined hot to both mains, beside the minion, is the application
    (docs/multi-main.md).  A
    yard on the minion's lane publishes a numbered stream of events; mid-stream the
    active main's cable is pulled (its bridge port down), the minion fails over, and
    later the cable comes back (the old main may then pass on copies it held).  The
    collector's subscriber sees every event exactly once."""
    count, cut_at = 150, 50
    with lab("alpha", "beta", "minion") as net:
        mains = {name: _estate(net, name, name, "--main", "--auto", "always")
                 for name in ("alpha", "beta")}
        joins = [part for name in mains for part in ("--join", f"{net.address(name)}:{PORT}")]
        collector = _estate(net, "minion", "collector", *joins, "--multi", "hot",
                            port=PORT + 1)
        minion = _estate(net, "minion", "minion", *joins, "--multi", "failover")
        lanes = str(net.base / "lanes")
        seen: list[int] = []
        probes: set[str] = set()

        def heard(event: Any) -> None:
            payload = event.payload
            if "n" in payload:
                seen.append(payload["n"])
            else:
                probes.add(payload["probe"])

        buses: list[LoopBus] = []
        try:
            sub = bus_yard("sub", "collectorl", lanes)
            buses.append(sub)
            sub.node.subscribe("seq.", heard, now=sub.clock())
            for name in mains:
                minion.wait_for(_log_has(minion, f"estate minion: allowed {name}"), START,
                                f"the minion allowed by {name}")
                collector.wait_for(_log_has(collector, f"remote {name} linked (upstream)"),
                                   START, f"the collector linked to {name}")
            active = minion.wait_for(
                lambda _o, err: next((name for name in mains
                                      if f"main {name} active (first up" in err), None),
                START, "an active main")
            other = next(name for name in mains if name != active)
            # each main passes events on to the collector, and the minion's go up
            for name in [*mains, "minion"]:
                probe = bus_yard(f"probe{name}", f"{name}l", lanes)
                buses.append(probe)
                tries = iter(range(10_000))

                def arrived(name: str = name, probe: LoopBus = probe,
                            tries: Iterator[int] = tries) -> bool:
                    if name in probes:
                        return True
                    if next(tries) % 10 == 0:
                        probe.node.publish("seq.probe", {"probe": name}, now=probe.clock())
                    return False

                _pump_until(buses, arrived, START, f"an event through {name}")
            pub = buses[-1]
            moved = f"main {other} active (lost, was {active}"
            cut = time.monotonic()
            switched_at: float | None = None  # first seen while still publishing, or after
            for number in range(count):
                if number == cut_at:
                    net.link_down(active)
                    cut = time.monotonic()
                pub.node.publish("seq.n", {"n": number}, now=pub.clock())
                _pump(buses, 0.02)
                if number >= cut_at and switched_at is None and moved in minion.stderr():
                    switched_at = time.monotonic()
            _pump_until(buses, lambda: moved in minion.stderr(), 30.0, "the failover")
            failover = (switched_at or time.monotonic()) - cut
            # a presence period (1.5 s) plus the mains' check timeout, 1 s (docs/multi-main.md),
            # with room for a busy machine; a minion that never moves on fails here
            assert failover < 10.0, f"failover took {failover:.1f} s"
            _pump_until(buses, lambda: len(set(seen)) == count, 60.0,
                        f"all {count} events (have {len(set(seen))})")
            net.link_up(active)
            back = f"estate minion: {active} is alive"
            _pump_until(buses, lambda: minion.stderr().count(back) >= 2, 30.0,
                        f"{active} alive again")
            _pump(buses, 3.0)  # copies the old main held would arrive now
            assert sorted(seen) == list(range(count))  # each once
            switched = re.findall(re.escape(moved) + r", (\d+) message\(s\) moved",
                                  minion.stderr())
            assert len(switched) == 1, minion.stderr()[-4000:]  # one switch, no flapping
            assert int(switched[0]) > 0  # events were in flight to the cut main: they moved
            print(f"failover {failover:.2f} s after the cut, {switched[0]} message(s) "  # noqa: T201 - the figure, in -s output
                  f"moved, {len(seen)} events of {count} seen, each once")
        finally:
            for bus in buses:
                bus.loop.close()


def _fail_inside_a_lab(made: list[str], bases: list[Path], procs: list[Proc]) -> None:
    """Make a lab, start an estate in it, and fail."""
    with lab("a", "b", ipv6=ipv6_unavailable() is None) as net:
        made.extend(net.made)
        bases.append(net.base)
        procs.append(net.spawn("a", "estate-a", "estate", "a", "--host", net.address("a"),
                               "--port", "0", "--keep", str(net.base / "keep")))
        procs[0].first_line("estate a listening on ", START)
        raise RuntimeError("a failure inside the lab")


def test_the_lab_leaves_nothing_behind() -> None:
    """After a lab closes (here after a failure inside it) no namespace of this run, no
    process in it and no 10.231 or fd31:231 address or route is left in the root
    namespace, and its files are gone."""
    made: list[str] = []
    bases: list[Path] = []
    procs: list[Proc] = []
    with pytest.raises(RuntimeError, match="inside"):
        _fail_inside_a_lab(made, bases, procs)
    assert procs[0].popen.poll() is not None
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           check=True).stdout
    assert len(made) == 3  # the hub and two hosts
    assert not [namespace for namespace in made if namespace in names]
    for what in (["address"], ["route"], ["-6", "route"]):
        shown = subprocess.run(["ip", *what], capture_output=True, text=True, check=True).stdout
        assert "10.231." not in shown
        assert "fd31:231:" not in shown
    assert not bases[0].exists()


def test_namespaces_left_by_a_crashed_run_are_removed() -> None:
    """A namespace named for a process that is gone (a run killed before it cleaned up) is
    deleted by ``remove_stale``, with what still runs in it, and so is its lab directory;
    a live run's namespace is left alone."""
    dead_pid = subprocess.Popen(["true"])  # a pid that has ended
    assert dead_pid.wait() == 0
    stale, live = f"{PREFIX}{dead_pid.pid}-dead-hub", f"{PREFIX}{os.getpid()}-live-hub"
    stale_files = Path(tempfile.mkdtemp(prefix=f"rlkt{dead_pid.pid}-"))
    for name in (stale, live):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        removed = remove_stale()
        assert not stale_files.exists()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=True).stdout.split()
        assert stale in removed
        assert stale not in names
        assert live in names
    finally:
        for name in (stale, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
