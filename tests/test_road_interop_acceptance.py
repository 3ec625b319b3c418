"""Key acceptance between live RAET 0.6.8 and raetlike estates.

With auto mode *never* a joiner waits pending until an operator accepts its
role in the main estate's keep; a rejected estate, or one whose keys changed
under auto mode *once*, never gets a message through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from tests.road_interop_kit import InteropRoad

pytestmark = pytest.mark.interop

NEVER = 0  # RAET's auto mode values
ONCE = 1


@pytest.fixture
def road(tmp_path: Path) -> Iterator[InteropRoad]:
    interop = InteropRoad(tmp_path)
    yield interop
    interop.close()


def test_a_raet_joiner_waits_pending_at_our_never_main_until_the_operator_accepts(
    road: InteropRoad,
) -> None:
    keep = MemoryKeep(AutoMode.NEVER)
    ours = road.ours("alpha", main=True, auto=AutoMode.NEVER, keep=keep)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: bool(road.seen("alpha", events.JoinPending, role="beta")), 10)
    assert road.seen("alpha", events.JoinPending)[0].local is True
    assert not peer.has("joined")
    assert not road.seen("alpha", events.Joined)

    keep.accept("beta")
    assert road.until(lambda: peer.has("joined", remote="alpha")
                      and bool(road.seen("alpha", events.Joined, remote="beta")), 15)
    peer.do("allow", name="alpha")
    assert road.until(lambda: peer.has("allowed", remote="alpha"), 10)
    peer.do("send", to="alpha", body={"accepted": True})
    ours.transmit({"welcome": "beta"}, to="beta", now=road.now())
    assert road.until(lambda: road.received("alpha") == [{"accepted": True}]
                      and peer.messages() == [{"welcome": "beta"}], 10)


def test_our_joiner_waits_pending_at_a_raet_never_main_until_the_operator_accepts(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True, auto=NEVER)
    ours = road.ours("beta")
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.JoinPending, local=False)), 10)
    assert not road.seen("beta", events.Joined)
    remote = road.raet_remote(peer, "beta")
    assert remote is not None
    assert remote["acceptance"] == 0  # pending in RAET's keep
    assert not remote["joined"]

    peer.do("accept", role="beta")
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha"))
                      and peer.has("allowed", remote="beta"), 15)
    ours.transmit({"accepted": True}, to="alpha", now=road.now())
    peer.do("send", to="beta", body={"welcome": "beta"})
    assert road.until(lambda: peer.messages() == [{"accepted": True}]
                      and road.received("beta") == [{"welcome": "beta"}], 10)


def test_a_raet_estate_our_operator_rejects_never_gets_a_message_through(
    road: InteropRoad,
) -> None:
    keep = MemoryKeep(AutoMode.NEVER)
    road.ours("alpha", main=True, auto=AutoMode.NEVER, keep=keep)
    peer = road.raet("beta")
    peer.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: bool(road.seen("alpha", events.JoinPending, role="beta")), 10)
    keep.reject("beta")
    assert road.until(lambda: bool(road.seen("alpha", events.RemoteRemoved, remote="beta")), 10)
    peer.do("send", to="alpha", body={"let": "me in"})
    assert road.until(lambda: peer.has("removed"), 10)  # RAET drops the rejecting main
    assert not peer.has("joined")
    assert not peer.has("allowed")
    assert road.received("alpha") == []
    assert "beta" not in road.stacks["alpha"].names


def test_our_estate_a_raet_operator_rejects_never_gets_a_message_through(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True, auto=NEVER)
    ours = road.ours("beta")
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.JoinPending, local=False)), 10)
    peer.do("reject", role="beta")
    assert road.until(lambda: bool(road.seen("beta", events.JoinRejected)), 15)
    assert not road.seen("beta", events.Joined)
    assert not peer.has("joined")
    assert peer.messages() == []


def test_a_raet_estate_whose_keys_changed_is_rejected_by_our_once_main(
    road: InteropRoad,
) -> None:
    ours = road.ours("alpha", main=True, auto=AutoMode.ONCE)
    first = road.raet("beta")
    first.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: first.has("joined", remote="alpha"), 10)
    first.do("allow", name="alpha")
    assert road.until(lambda: first.has("allowed", remote="alpha"), 10)
    first.do("send", to="alpha", body={"from": "the first keys"})
    assert road.until(lambda: road.received("alpha") == [{"from": "the first keys"}], 10)
    first.stop()

    # same name, role and address, fresh keys: both RAET and we refuse the changed keys
    impostor = road.raet("beta", keep="beta-new-keys", port=first.port)
    impostor.do("join", to=road.address_text("alpha"))
    assert road.until(lambda: impostor.has("removed") or impostor.has("joined"), 10)
    assert not impostor.has("joined")
    impostor.do("send", to="alpha", body={"from": "the new keys"})
    assert road.received("alpha") == [{"from": "the first keys"}]
    assert ours.remote("beta").verify_key is not None


def test_our_estate_whose_keys_changed_is_rejected_by_a_raet_once_main(
    road: InteropRoad,
) -> None:
    peer = road.raet("alpha", main=True, auto=ONCE)
    ours = road.ours("beta")
    ours.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.Allowed, remote="alpha")), 10)
    ours.transmit({"from": "the first keys"}, to="alpha", now=road.now())
    assert road.until(lambda: peer.messages() == [{"from": "the first keys"}], 10)
    port = road.address("beta")[1]
    road.drop_ours("beta")

    impostor = road.ours("beta", port=port)  # same name, same address, fresh keys
    impostor.join(peer.address, now=road.now())
    assert road.until(lambda: bool(road.seen("beta", events.JoinRejected)), 10)
    assert not road.seen("beta", events.Joined)
    assert peer.messages() == [{"from": "the first keys"}]
