"""SP over real road stacks on the simulated link: device chains, device loops, fairness."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from raetlike.channels import DevicePump, Hosted, RoadChannel, SpLink
from raetlike.sp import Device, Framing, Rep, Reply, Req, Request
from road import events
from road.stack import LocalEstate, RoadStack
from tests.roadkit import FilterNet
from tests.simlink import Address, Impairment


def address(index: int) -> Address:
    return ("127.0.0.1", 7700 + index)


def estates(names: list[str]) -> dict[str, RoadStack]:
    """Main estates (any may be joined) at consecutive addresses."""
    return {name: RoadStack(LocalEstate(name, main=True)) for name in names}


def join(net: FilterNet, stacks: dict[str, RoadStack], pairs: list[tuple[str, str]]) -> None:
    """Each ``(joiner, joinee)`` joins and is allowed."""
    where = {name: address(index) for index, name in enumerate(stacks)}
    for joiner, joinee in pairs:
        stacks[joiner].join(where[joinee], now=net.now)
    assert net.run_until(lambda: all(
        any(isinstance(e, events.Allowed) and e.remote == joinee
            for e in net.events[where[joiner]]) for joiner, joinee in pairs), timeout=60)


def device(stack: RoadStack, front: list[str], back: list[str], seed: int) -> list[Any]:
    """Attachments of a device on ``stack``: a raw REP from ``front``, a raw REQ to ``back``."""
    rep = Rep(name=f"{stack.name}.front", raw=True, framing=Framing.MAPPING,
              rng=random.Random(seed))
    req = Req(name=f"{stack.name}.back", raw=True, framing=Framing.MAPPING,
              rng=random.Random(seed + 100))
    return [SpLink(rep, [RoadChannel(stack, name) for name in front]),
            SpLink(req, [RoadChannel(stack, name) for name in back]),
            DevicePump(Device(rep, req))]


def echo_server(stack: RoadStack, clients: list[str]) -> tuple[Rep, SpLink]:
    rep = Rep(name=stack.name, framing=Framing.MAPPING, rng=random.Random(77))

    def answer(request: Any) -> None:
        assert isinstance(request, Request)
        rep.reply(request, {"echo": request.body, "served": stack.name})
    return rep, SpLink(rep, [RoadChannel(stack, name) for name in clients], on_event=answer)


def test_a_chain_of_three_devices_routes_every_reply_back_to_its_client() -> None:
    net = FilterNet(seed=11, impairment=Impairment(loss=0.1, duplicate=0.05, jitter=0.002))
    names = ["client", "d1", "d2", "d3", "server"]
    stacks = estates(names)
    replies: list[Reply] = []
    req = Req(name="client", framing=Framing.MAPPING, resend_interval=3.0,
              rng=random.Random(5))
    rep, server_link = echo_server(stacks["server"], ["d3"])
    attachments = {
        "client": [SpLink(req, [RoadChannel(stacks["client"], "d1")], on_event=replies.append)],
        "d1": device(stacks["d1"], ["client"], ["d2"], 1),
        "d2": device(stacks["d2"], ["d1"], ["d3"], 2),
        "d3": device(stacks["d3"], ["d2"], ["server"], 3),
        "server": [server_link],
    }
    for index, name in enumerate(names):
        net.add(address(index), Hosted(stacks[name], attachments[name]))
    join(net, stacks, [("client", "d1"), ("d1", "d2"), ("d2", "d3"), ("d3", "server")])

    ids = {req.request(n, net.now): n for n in range(30)}
    assert net.run_until(lambda: len(replies) == 30, timeout=120)
    assert {r.request_id: r.body for r in replies} == {
        i: {"echo": n, "served": "server"} for i, n in ids.items()}
    assert req.in_flight() == []
    assert rep.stats.received >= 30


def test_a_loop_of_devices_on_the_road_drops_the_request_at_the_depth_limit() -> None:
    net = FilterNet(seed=12)
    names = ["client", "d1", "d2", "d3"]
    stacks = estates(names)
    req = Req(name="client", framing=Framing.MAPPING, resend_interval=1000.0,
              rng=random.Random(6))
    replies: list[Reply] = []
    loop_devices = {
        "d1": device(stacks["d1"], ["client", "d3"], ["d2"], 1),
        "d2": device(stacks["d2"], ["d1"], ["d3"], 2),
        "d3": device(stacks["d3"], ["d2"], ["d1"], 3),
    }
    attachments = {"client": [SpLink(req, [RoadChannel(stacks["client"], "d1")],
                                     on_event=replies.append)], **loop_devices}
    for index, name in enumerate(names):
        net.add(address(index), Hosted(stacks[name], attachments[name]))
    join(net, stacks, [("client", "d1"), ("d1", "d2"), ("d2", "d3"), ("d3", "d1")])

    req.request("round and round", net.now)
    net.run_for(5.0)
    fronts = [links[0].endpoint for links in loop_devices.values()]
    backs = [links[1].endpoint for links in loop_devices.values()]
    # eight hops taken in (the default depth), seven passed on, the eighth dropped
    assert sum(front.stats.received for front in fronts) == 8
    assert sum(back.stats.sent for back in backs) == 7
    assert sum(back.stats.ttl_exceeded for back in backs) == 1
    assert replies == []
    sent_before = net.counters.sent
    net.run_for(5.0)
    assert sum(front.stats.received for front in fronts) == 8  # nothing circulates any more
    assert net.counters.sent - sent_before < 50  # only the stacks' own chatter


def test_one_flooding_client_does_not_starve_the_others() -> None:
    net = FilterNet(seed=13)
    clients = ["flood", "c1", "c2", "c3"]
    stacks = {"server": RoadStack(LocalEstate("server", main=True)),
              **{name: RoadStack(LocalEstate(name)) for name in clients}}
    rep = Rep(name="server", framing=Framing.MAPPING, rng=random.Random(1))
    requesters = {name: Req(name=name, framing=Framing.MAPPING, resend_interval=1000.0,
                            rng=random.Random(index)) for index, name in enumerate(clients)}
    replies: dict[str, list[Reply]] = {name: [] for name in clients}
    net.add(address(0), Hosted(stacks["server"],
                               [SpLink(rep, [RoadChannel(stacks["server"], c) for c in clients])]))
    for index, name in enumerate(clients, start=1):
        net.add(address(index), Hosted(stacks[name], [SpLink(
            requesters[name], [RoadChannel(stacks[name], "server")],
            on_event=replies[name].append)]))
    join(net, stacks, [(name, "server") for name in clients])

    for n in range(100):
        requesters["flood"].request(n, net.now)
    for name in clients[1:]:
        for n in range(10):
            requesters[name].request(n, net.now)
    assert net.run_until(lambda: rep.stats.received == 130, timeout=30)

    # the server takes 40 requests, one at a time: each client gets its quarter
    served: Counter[str] = Counter()
    for _ in range(40):
        request = rep.next_event()
        assert isinstance(request, Request)
        served[request.channel_name] += 1
        rep.reply(request, request.body)
        net.run_for(0.001)
    assert served == {"flood": 10, "c1": 10, "c2": 10, "c3": 10}
    assert net.run_until(lambda: all(len(replies[name]) == 10 for name in clients[1:]),
                         timeout=10)
    assert len(replies["flood"]) == 10
