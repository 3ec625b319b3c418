"""Alive checks and restarts between live RAET 0.6.8 and raetlike estates.

A *frozen* estate keeps its socket but is not serviced (our stack taken off
the loop, the RAET process stopped with SIGSTOP): the other side's alive
checks must find it dead, then alive again once it thaws.  A *restarted*
estate comes back on the same port with the same keys: it rejoins, and the
messages queued for it meanwhile arrive.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.wire.kinds import AutoMode
from road import events
from road.stack import LocalEstate, RoadConfig
from tests.raetpeer.road import RaetRoadPeer
from tests.road_interop_kit import InteropRoad

pytestmark = pytest.mark.interop


@pytest.fixture
def road(tmp_path: Path) -> Iterator[InteropRoad]:
    interop = InteropRoad(tmp_path)
    yield interop
    interop.close()


def raet_joins_our_main(road: InteropRoad) -> RaetRoadPeer:
    road.ours("alpha", main=True)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: peer.has("joined", remote="alpha"), 10)
    peer.do("allow", name="alpha")
    assert road.until(lambda: peer.has("allowed", remote="alpha")
                      and bool(road.seen("alpha", events.Allowed, remote="beta")), 10)
    return peer


def test_raet_alive_checks_find_our_frozen_estate_dead_then_alive_again(
    road: InteropRoad,
) -> None:
    peer = raet_joins_our_main(road)
    assert road.until(lambda: peer.has("alived", remote="alpha"), 10)
    driver = road.drivers["alpha"]
    road.loop.remove(driver)  # frozen: the socket stays, nobody answers
    assert road.until(lambda: peer.has("dead", remote="alpha"), 10)
    road.loop.add(driver)
    assert road.until(lambda: len(peer.find("alived", remote="alpha")) == 2, 10)
    peer.do("send", to="alpha", body={"after": "thaw"})
    assert road.until(lambda: road.received("alpha") == [{"after": "thaw"}], 10)


def test_our_alive_checks_find_a_frozen_raet_estate_dead_then_alive_again(
    road: InteropRoad,
) -> None:
    peer = raet_joins_our_main(road)
    ours = road.stacks["alpha"]
    os.kill(peer.process.pid, signal.SIGSTOP)
    try:
        assert road.until(lambda: bool(road.seen("alpha", events.RemoteLost, remote="beta")), 10)
        assert ours.remote("beta").alive is False
    finally:
        os.kill(peer.process.pid, signal.SIGCONT)
    alive_before = len(road.seen("alpha", events.Alive, remote="beta"))
    assert road.until(
        lambda: len(road.seen("alpha", events.Alive, remote="beta")) > alive_before, 10)
    ours.transmit({"after": "thaw"}, to="beta", now=road.now())
    assert road.until(lambda: peer.messages() == [{"after": "thaw"}], 10)


def test_an_explicit_alive_from_either_side_is_answered(road: InteropRoad) -> None:
    peer = raet_joins_our_main(road)
    ours = road.stacks["alpha"]
    ours.alive("beta", now=road.now())
    failed = ours.stats.transactions_failed
    assert road.until(lambda: not ours.remote("beta").in_process(4), 5)
    assert ours.stats.transactions_failed == failed
    assert ours.remote("beta").alive is True
    before = road.status(peer)["stats"].get("alive_complete", 0)
    peer.do("alive", name="alpha")
    assert road.until(lambda: road.status(peer)["stats"].get("alive_complete", 0) > before, 5)
    remote = road.raet_remote(peer, "alpha")
    assert remote is not None
    assert remote["alived"] is True


def test_a_restarted_raet_estate_rejoins_and_gets_the_messages_queued_meanwhile(
    road: InteropRoad,
) -> None:
    peer = raet_joins_our_main(road)
    ours = road.stacks["alpha"]
    ours.transmit({"before": "restart"}, to="beta", now=road.now())
    assert road.until(lambda: peer.messages() == [{"before": "restart"}], 10)
    peer.stop()
    queued = [{"while": "down", "n": n} for n in range(3)]
    for message in queued:
        ours.transmit(message, to="beta", now=road.now())
    again = road.raet("beta")  # same keep, same port (RAET keeps its bound address)
    assert again.port == peer.port
    assert road.until(lambda: again.messages() == queued, 10)
    again.do("send", to="alpha", body={"after": "restart"})
    assert road.until(lambda: {"after": "restart"} in road.received("alpha"), 10)
    assert not road.seen("alpha", events.MessageExpired)


def test_a_restarted_raetlike_estate_rejoins_a_raet_main_and_gets_the_messages_queued_meanwhile(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True)
    local = LocalEstate("beta")
    ours = road.ours("beta", local=local)
    port = road.address("beta")[1]
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha"))
                      and peer.has("allowed", remote="beta"), 10)
    peer.do("send", to="beta", body={"before": "restart"})
    assert road.until(lambda: road.received("beta") == [{"before": "restart"}], 10)
    road.drop_ours("beta")
    queued = [{"while": "down", "n": n} for n in range(3)]
    for message in queued:
        peer.do("send", to="beta", body=message)
    assert road.until(lambda: peer.has("dead", remote="beta"), 10)
    ours = road.ours("beta", local=local, port=port)
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: road.received("beta") == queued, 10)
    ours.transmit({"after": "restart"}, to="alpha", now=road.now())
    assert road.until(lambda: {"after": "restart"} in peer.messages(), 10)


def test_a_send_taken_up_again_that_raet_refuses_goes_as_a_new_one_without_a_new_allow(
        road: InteropRoad) -> None:
    """Our messenger gives up on a silent RAET main (max_redos) and keeps the message;
    taken up again as the same transaction, RAET nacks it (it remembers every
    transaction it ended): it then goes as a new one in the same session, no new allow.
    (RAET delivers it again then: its dedup ends with the transaction, as in RAET.)"""
    peer = road.raet("alpha", main=True)
    ours = road.ours("beta", config=RoadConfig(auto=AutoMode.ONCE, max_redos=4))
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha"))
                      and peer.has("allowed", remote="beta"), 10)
    deaf = [True]
    hear = ours.receive_datagram

    def receive(data: bytes, source: tuple[str, int], now: float) -> None:
        if not deaf[0]:
            hear(data, source, now)

    ours.receive_datagram = receive  # type: ignore[method-assign]
    ours.transmit({"n": 1}, to="alpha", now=road.now())
    assert road.until(lambda: len(peer.messages()) == 1, 10)
    assert road.until(lambda: bool(road.seen("beta", events.RemoteLost)), 30)
    deaf[0] = False
    assert road.until(lambda: bool(road.seen("beta", events.MessageSent)), 20)
    assert len(road.seen("beta", events.Allowed)) == 1
