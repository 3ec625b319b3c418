"""Live RAET 0.6.8 and raetlike estates join, allow and exchange messages both ways."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.wire.kinds import TransactionKind
from road import events
from road.stack import RoadConfig
from tests.road_interop_kit import MEGABYTE_TEXT, InteropRoad
from tests.test_road_amplification import forged_join

pytestmark = pytest.mark.interop


@pytest.fixture
def road(tmp_path: Path) -> Iterator[InteropRoad]:
    interop = InteropRoad(tmp_path)
    yield interop
    interop.close()


def test_a_raet_estate_joins_our_main_allows_and_messages_flow_both_ways(
    road: InteropRoad,
) -> None:
    ours = road.ours("alpha", main=True)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: peer.has("joined", remote="alpha")
                      and bool(road.seen("alpha", events.Joined, remote="beta")), 10)
    joined = road.seen("alpha", events.Joined, remote="beta")[0]
    assert joined.initiator is False
    peer.do("allow", name="alpha")
    assert road.until(lambda: peer.has("allowed", remote="alpha")
                      and bool(road.seen("alpha", events.Allowed, remote="beta")), 10)

    peer.do("send", to="alpha", body={"greeting": "hello from raet"})
    ours.transmit({"greeting": "hello from raetlike"}, to="beta", now=road.now())
    assert road.until(lambda: bool(road.received("alpha")) and bool(peer.messages()), 10)
    assert road.received("alpha", "beta") == [{"greeting": "hello from raet"}]
    assert peer.messages("alpha") == [{"greeting": "hello from raetlike"}]

    peer.do("send", to="alpha", body={"blob": MEGABYTE_TEXT})
    ours.transmit({"blob": MEGABYTE_TEXT}, to="beta", now=road.now())
    assert road.until(lambda: len(road.received("alpha")) == 2
                      and len(peer.messages()) == 2, 30)
    assert road.received("alpha")[1] == {"blob": MEGABYTE_TEXT}
    assert peer.messages()[1] == {"blob": MEGABYTE_TEXT}
    big = road.seen("alpha", events.MessageReceived)[1]
    assert big.segments > 1000
    assert road.seen("alpha", events.MessageSent, remote="beta")
    assert peer.errors() == []


def test_our_estate_joins_a_raet_main_allows_and_messages_flow_both_ways(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True)
    ours = road.ours("beta")
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.Joined, remote="alpha"))
                      and peer.has("joined", remote="beta"), 10)
    joined = road.seen("beta", events.Joined, remote="alpha")[0]
    assert joined.initiator is True
    assert joined.main is True
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha"))
                      and peer.has("allowed", remote="beta"), 10)

    ours.transmit({"greeting": "hello from raetlike"}, to="alpha", now=road.now())
    peer.do("send", to="beta", body={"greeting": "hello from raet"})
    assert road.until(lambda: bool(road.received("beta")) and bool(peer.messages()), 10)
    assert road.received("beta", "alpha") == [{"greeting": "hello from raet"}]
    assert peer.messages("beta") == [{"greeting": "hello from raetlike"}]

    ours.transmit({"blob": MEGABYTE_TEXT}, to="alpha", now=road.now())
    peer.do("send", to="beta", body={"blob": MEGABYTE_TEXT})
    assert road.until(lambda: len(road.received("beta")) == 2
                      and len(peer.messages()) == 2, 30)
    assert road.received("beta")[1] == {"blob": MEGABYTE_TEXT}
    assert peer.messages()[1] == {"blob": MEGABYTE_TEXT}
    assert road.seen("beta", events.MessageReceived)[1].segments > 1000
    remote = road.raet_remote(peer, "beta")
    assert remote is not None
    assert remote["joined"]
    assert remote["allowed"]
    assert peer.errors() == []


def test_many_small_messages_arrive_in_full_both_ways(road: InteropRoad) -> None:
    ours = road.ours("alpha", main=True)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: peer.has("joined", remote="alpha"), 10)
    peer.do("allow", name="alpha")
    assert road.until(lambda: peer.has("allowed", remote="alpha")
                      and bool(road.seen("alpha", events.Allowed)), 10)
    count = 100
    for number in range(count):
        peer.do("send", to="alpha", body={"n": number})
        ours.transmit({"n": number}, to="beta", now=road.now())
    assert road.until(lambda: len(road.received("alpha")) == count
                      and len(peer.messages()) == count, 30)
    assert sorted(m["n"] for m in road.received("alpha")) == list(range(count))
    assert sorted(m["n"] for m in peer.messages()) == list(range(count))


def test_a_raet_estate_joins_our_main_whose_join_places_spoofed_joins_hold(
    road: InteropRoad,
) -> None:
    """Both join places held by joins from addresses that never answer (sockets on
    127.0.0.2 and .3 that read nothing): RAET's first request takes the place of the older
    one once it has been unproven ``handshake_grace``, and it joins and allows at once.
    Before, it was shed until those joins timed out (5 s)."""
    ours = road.ours("alpha", main=True, config=RoadConfig(max_open_handshakes=2))
    spoofers = []
    for host in ("127.0.0.2", "127.0.0.3"):
        spoofer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        spoofer.bind((host, 0))
        spoofers.append(spoofer)
        request, _ = forged_join(f"spoof-{host}")
        spoofer.sendto(request, road.address("alpha"))
    try:
        places = ours._handshakes[TransactionKind.JOIN]
        assert road.until(lambda: len(places) == 2, 5)
        road.until(lambda: False, ours.config.handshake_grace + 0.1)
        peer = road.raet("beta")
        peer.do("join", to=road.address_text("alpha"))
        assert road.until(lambda: peer.has("joined", remote="alpha")
                          and bool(road.seen("alpha", events.Joined, remote="beta")), 2.5)
        assert ours.stats.handshakes_evicted == 1
        peer.do("allow", name="alpha")
        assert road.until(lambda: peer.has("allowed", remote="alpha")
                          and bool(road.seen("alpha", events.Allowed, remote="beta")), 10)
        assert peer.errors() == []
    finally:
        for spoofer in spoofers:
            spoofer.close()
