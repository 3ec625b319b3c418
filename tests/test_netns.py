"""raetlike estates across real network namespaces (tests/netnskit.py): a 1280-byte MTU
link, a minion that is re-addressed mid-session, and 10 % loss through ``raetlike chaos``.

Each test builds its own lab (namespaces on a bridge, 10.231.0.0/24 only inside them)
and removes it however it ends.  Skipped, with the reason, where namespaces cannot be
made (not root, no ``ip``, refused).  Deliveries are counted in the main estate's
journal (``--journal``): one record per message delivered, so a duplicate shows.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import read_journal
from tests.netnskit import Lab, Proc, lab, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

PORT = 7530
START = 30.0  # seconds for an estate to print where it listens, on a busy machine


def _main(net: Lab, host: str = "main", name: str = "main", *extra: str) -> Proc:
    """An echoing main estate in ``host`` that journals what it delivers."""
    proc = net.spawn(host, name, "estate", name, "--main", "--host", net.address(host),
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


def _oversized_datagram(net: Lab, host: str, to: str) -> None:
    """Send one 1400-byte UDP datagram from ``host`` (the kernel fragments it on a smaller
    link): the control that shows the MTU is real and the counters see it."""
    code = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            f"s.sendto(b'x' * 1400, ('{to}', 9))")
    done = net.tool(host, sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("mode", "count"), [("fast", 20), ("raet", 4)])
def test_large_messages_cross_a_1280_byte_mtu_link_whole_and_no_datagram_is_fragmented(
        mode: str, count: int) -> None:
    """100 KB messages echoed over a link whose MTU is 1280 (the minion's, both ends).
    Fast mode cuts 1232-byte datagrams, RAET mode 1024-byte packets: none needs an IP
    fragment on the way out, and nothing bigger is sent to the minion (its bridge port
    drops a frame over 1280, so an echo would never arrive)."""
    with lab("main", "minion") as net:
        net.set_mtu("minion", 1280)
        main = _main(net)
        main_ip = net.address("main")
        # control: an oversized datagram from the minion is fragmented and reassembled
        _oversized_datagram(net, "minion", main_ip)
        assert net.snmp("minion")["FragCreates"] >= 2
        net_main = net.snmp("main")
        assert net_main["ReasmOKs"] >= 1, net_main
        before = {host: net.snmp(host) for host in ("main", "minion")}
        extra = ["--raet-mode"] if mode == "raet" else []
        ping = _ping(net, "minion", f"{main_ip}:{PORT}", "--count", str(count),
                     "--size", "100000", "--window", "4", "--timeout", "90", *extra)
        result = _result(ping, 100.0)
        assert (result["echoed"], result["size"]) == (count, 100000)
        after = {host: net.snmp(host) for host in ("main", "minion")}
        for host in ("main", "minion"):
            for counter in ("FragCreates", "FragOKs", "FragFails", "ReasmReqds"):
                assert after[host][counter] == before[host][counter], (host, counter)
        pinger = _pinger(_last_stats(main))
        assert pinger["mode"] == mode
        assert pinger["bytes_in"] / pinger["datagrams_in"] <= 1232
        assert main.stop() == 0
        deliveries = _deliveries(net)[pinger["name"]]
        assert len(deliveries) == count  # each once
        assert all(record.body_bytes > 100000 for record in deliveries)


def test_a_minion_readdressed_mid_session_keeps_its_identity_and_every_message_arrives_once(
        ) -> None:
    """The pinging minion's veth gets a new address while it streams.  Main hears its
    next fast datagram from there, allows with it at that address, and moves it (same
    uid and keys, no new join); the rest of the stream continues, each message once."""
    count = 3000
    with lab("main", "minion") as net:
        main = _main(net)
        main_ip, old_ip = net.address("main"), net.address("minion")
        ping = _ping(net, "minion", f"{main_ip}:{PORT}", "--count", str(count),
                     "--size", "2000", "--window", "2", "--timeout", "90")
        main.wait_for(lambda _o, err: "estate main: allowed ping-" in err, 30.0,
                      "the ping estate allowed")
        net.readdress("minion", "10.231.0.12")
        assert ping.popen.poll() is None, "the ping was over before the move: no test"
        result = _result(ping, 100.0)
        assert result["echoed"] == count
        main.wait_for(lambda _o, err: f"moved from {old_ip}:" in err, 10.0, "the move")
        assert "to 10.231.0.12:" in main.stderr()
        stats = _last_stats(main)
        pinger = _pinger(stats)
        assert pinger["address"][0] == "10.231.0.12"
        assert stats["road"]["joins_completed"] == 1  # one join: the same estate, moved
        assert stats["road"]["remotes_moved"] == 1
        assert main.stop() == 0
        deliveries = _deliveries(net)[pinger["name"]]
        assert len(deliveries) == count  # each once, before and after the move
        assert len({record.transaction_id for record in deliveries}) == count


def test_every_message_arrives_once_through_ten_percent_loss_of_raetlike_chaos() -> None:
    """Minion, chaos relay and main on three hosts; chaos loses 10 % of the datagrams
    each way.  Every echo comes back and main delivers each message exactly once."""
    count = 300
    with lab("main", "relay", "minion") as net:
        main = _main(net)
        chaos = net.spawn("relay", "chaos", "chaos", "--listen", f"{net.address('relay')}:{PORT}",
                          "--forward", f"{net.address('main')}:{PORT}", "--loss", "0.1",
                          "--seed", "17")
        chaos.first_line("chaos listening on ", START)
        ping = _ping(net, "minion", f"{net.address('relay')}:{PORT}", "--count", str(count),
                     "--window", "8", "--timeout", "90")
        result = _result(ping, 100.0)
        assert result["echoed"] == count
        assert chaos.stop() == 0
        counters = json.loads(chaos.stdout().strip().splitlines()[-1])
        for direction in counters.values():  # about a tenth lost each way, none refused
            assert direction["lost"] > direction["received"] / 20, counters
            assert direction["send_errors"] == 0, counters
        pinger = _pinger(_last_stats(main))
        assert main.stop() == 0
        assert len(_deliveries(net)[pinger["name"]]) == count  # each once


def _fail_inside_a_lab(made: list[str], bases: list[Path], procs: list[Proc]) -> None:
    """Make a lab, start an estate in it, and fail."""
    with lab("a", "b") as net:
        made.extend(net.made)
        bases.append(net.base)
        procs.append(net.spawn("a", "estate-a", "estate", "a", "--host", net.address("a"),
                               "--port", "0", "--keep", str(net.base / "keep")))
        procs[0].first_line("estate a listening on ", START)
        raise RuntimeError("a failure inside the lab")


def test_the_lab_leaves_nothing_behind() -> None:
    """After a lab closes (here after a failure inside it) no namespace of this run, no
    process in it and no 10.231 address or route is left, in the root namespace or
    anywhere, and its files are gone."""
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
    for what in (["address"], ["route"]):
        shown = subprocess.run(["ip", *what], capture_output=True, text=True, check=True).stdout
        assert "10.231." not in shown
    assert not bases[0].exists()
