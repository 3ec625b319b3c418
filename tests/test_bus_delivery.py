"""Bus delivery: dedup of repeated requests, stamping from the authenticated remote, timeouts,
keepalives, and exactly-once handlers and callbacks on a lossy, duplicating link."""

from __future__ import annotations

from collections import Counter

import pytest

from raetlike.bus import (
    ANY,
    BusMessage,
    Call,
    Errno,
    MessageType,
    PeerAlive,
    PeerLost,
    Reply,
    Request,
    Rolemask,
    encode,
)
from raetlike.channels import RoadChannel
from raetlike.sp import Payload
from tests.buskit import make_bus
from tests.simlink import Impairment


class DoublingLink(RoadChannel):
    """A real road channel that puts every message on the road twice (a duplicate)."""

    __slots__ = ()

    def send(self, payload: Payload) -> bool:
        return super().send(payload) and super().send(payload)


def test_a_request_that_arrives_twice_runs_its_handler_once_and_its_callback_once() -> None:
    bus = make_bus()
    calls: list[Request] = []

    def count(request: Request) -> int:
        calls.append(request)
        return len(calls)

    bus.nodes["main"].register_service("kvs", count)
    alpha = bus.nodes["alpha"]
    alpha.remove_link("main")
    alpha.add_link(DoublingLink(bus.stacks["alpha"], "main", ttl=5.0), upstream=True)
    got = bus.call("alpha", ANY, "kvs.get")
    bus.run_until(lambda: bus.nodes["alpha"].stats.stray_responses >= 1)
    bus.net.run_for(2.0)
    assert [reply.payload for reply in got] == [1]
    assert len(calls) == 1
    assert bus.nodes["main"].stats.duplicates == 1
    # the duplicate was answered again from the remembered response, not by the handler
    assert bus.nodes["alpha"].stats.stray_responses == 1


def test_a_forged_userid_in_the_body_is_overwritten_by_the_receiving_stack() -> None:
    bus = make_bus()
    seen: list[Request] = []

    def who(request: Request) -> str:
        seen.append(request)
        return request.userid

    bus.nodes["main"].register_service("who", who)
    bus.nodes["beta"].register_service("who", who)
    for target in ("main", "beta"):
        forged = BusMessage(MessageType.REQUEST, "who.am_i", matchtag=99, sequence=1 + len(seen),
                            target=target, userid="main", role="main", rolemask=Rolemask.OWNER)
        bus.stacks["alpha"].transmit(encode(forged), to="main", now=bus.net.now)
        wanted = len(seen) + 1
        bus.run_until(lambda: len(seen) >= wanted)  # noqa: B023 - run at once, in this turn
    assert [(r.userid, r.role, r.rolemask) for r in seen] == [
        ("alpha", "alpha", Rolemask.USER), ("alpha", "alpha", Rolemask.USER)]
    assert bus.nodes["main"].stats.restamped == 2


def test_a_request_without_any_response_times_out_once() -> None:
    bus = make_bus()
    bus.nodes["main"].register_service("kvs", lambda _request: 1)
    bus.net.blocked.add(bus.addresses["main"])
    got = bus.call("alpha", ANY, "kvs.get", timeout=3.0)
    bus.net.run_for(20.0)
    assert len(got) == 1
    assert got[0].errno is Errno.ETIMEDOUT
    assert bus.nodes["alpha"].stats.retries >= 1


def test_keepalives_detect_a_silent_node_and_its_return() -> None:
    bus = make_bus()
    main = bus.nodes["main"]
    bus.net.run_for(5.0)
    assert main.next_event() is None
    bus.net.blocked.add(bus.addresses["beta"])
    silenced = bus.net.now
    bus.run_until(lambda: main.is_lost("beta"))
    lost = main.next_event()
    assert isinstance(lost, PeerLost)
    assert lost.name == "beta"
    assert lost.silent_for == pytest.approx(main.config.keepalive_timeout)
    assert main.next_event() is None
    assert bus.net.now - silenced <= main.config.keepalive_timeout + main.config.keepalive_interval
    assert main.is_lost("beta")
    assert not main.is_lost("alpha")
    # requests to a lost node fail at once
    assert bus.rpc("alpha", "beta", "kvs.get").errno is Errno.EHOSTUNREACH
    bus.net.blocked.discard(bus.addresses["beta"])
    bus.run_until(lambda: not main.is_lost("beta"), timeout=60)
    assert PeerAlive("beta") in [main.next_event(), main.next_event()]


def test_at_twenty_percent_loss_with_duplication_every_handler_and_callback_runs_once() -> None:
    bus = make_bus(("alpha", "beta", "gamma"), seed=11,
                   impairment=Impairment(loss=0.2, duplicate=0.2, jitter=0.003), link_ttl=60.0)
    handled: Counter[tuple[str, int]] = Counter()

    def record(request: Request) -> int:
        payload = request.payload
        assert isinstance(payload, int)
        handled[(request.userid, payload)] += 1
        return payload * 2

    bus.nodes["main"].register_service("kvs", record)
    bus.nodes["gamma"].register_service("kvs", record)
    replies: dict[str, list[Reply]] = {"alpha": [], "beta": []}
    for n in range(25):
        for origin, target in (("alpha", ANY), ("beta", "gamma")):
            bus.nodes[origin].send(target, Call("kvs.put", n),
                                   replies[origin].append, now=bus.net.now)
    bus.run_until(lambda: all(len(r) >= 25 for r in replies.values()), timeout=120)
    bus.net.run_for(10.0)
    for got in replies.values():
        assert sorted(reply.payload for reply in got) == [2 * n for n in range(25)]
        assert all(reply.ok for reply in got)
    assert set(handled.values()) == {1}
    assert len(handled) == 50
