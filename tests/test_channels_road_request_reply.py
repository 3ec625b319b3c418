"""SP request/reply over road remotes as channels, on the simulated link (virtual time)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from raetlike.channels import DevicePump, Hosted, LaneChannel, RoadChannel, SpLink, is_sp_payload
from raetlike.errors import LocalProtocolError
from raetlike.sp import Device, Framing, Rep, Reply, Req, Request
from road import events
from road.stack import LocalEstate, RoadStack
from tests.lanekit import LaneNet
from tests.roadkit import MAIN, MINION, OTHER, FilterNet
from tests.simlink import Address, Impairment


def echo_server(rep: Rep, prefix: str = "echo:") -> SpLink:
    """A cooked REP that answers every request with its body, prefixed."""
    def answer(request: Any) -> None:
        assert isinstance(request, Request)
        rep.reply(request, prefix + str(request.body))
    return SpLink(rep, on_event=answer)


def joined(net: FilterNet, minions: list[Address]) -> None:
    """Every minion joins (and is allowed by) the main at MAIN."""
    for address in minions:
        hosted = net.stacks[address]
        assert isinstance(hosted, Hosted)
        stack = hosted.stack
        assert isinstance(stack, RoadStack)
        stack.join(MAIN, now=net.now)
    assert net.run_until(lambda: all(
        any(isinstance(e, events.Allowed) for e in net.events[address]) for address in minions))


def test_a_request_crosses_two_road_stacks_and_its_reply_comes_back() -> None:
    net = FilterNet(seed=1)
    server = RoadStack(LocalEstate("server", main=True))
    client = RoadStack(LocalEstate("client"))
    rep = Rep(name="server", framing=Framing.MAPPING)
    req = Req(name="client", framing=Framing.MAPPING, resend_interval=5.0,
              rng=random.Random(3))
    replies: list[Reply] = []
    server_link = echo_server(rep)
    server_link.add_channel(RoadChannel(server, "client"))
    net.add(MAIN, Hosted(server, [server_link]))
    net.add(MINION, Hosted(client, [SpLink(req, [RoadChannel(client, "server")],
                                           on_event=replies.append)]))
    joined(net, [MINION])

    request_id = req.request({"n": 1}, net.now)
    assert net.run_until(lambda: bool(replies), timeout=10)
    assert replies == [Reply(request_id, "echo:{'n': 1}")]
    assert rep.stats.received == 1
    # the SP payloads never surface as plain stack events
    assert not [e for e in net.events[MAIN] + net.events[MINION]
                if isinstance(e, events.MessageReceived)]


def device_chain(impairment: Impairment | None = None, seed: int = 2) -> tuple[
        FilterNet, Req, list[Reply], Rep]:
    """client -> device (main estate: raw REP front, raw REQ back) -> server, all on the road."""
    net = FilterNet(seed=seed, impairment=impairment or Impairment())
    device = RoadStack(LocalEstate("device", main=True))
    client = RoadStack(LocalEstate("client"))
    server = RoadStack(LocalEstate("server"))
    front = Rep(name="front", raw=True, framing=Framing.MAPPING)
    back = Req(name="back", raw=True, framing=Framing.MAPPING)
    net.add(MAIN, Hosted(device, [SpLink(front, [RoadChannel(device, "client")]),
                                  SpLink(back, [RoadChannel(device, "server")]),
                                  DevicePump(Device(front, back))]))
    req = Req(name="client", framing=Framing.MAPPING, resend_interval=5.0,
              rng=random.Random(4))
    replies: list[Reply] = []
    net.add(MINION, Hosted(client, [SpLink(req, [RoadChannel(client, "device")],
                                           on_event=replies.append)]))
    rep = Rep(name="server", framing=Framing.MAPPING)
    net.add(OTHER, Hosted(server, [_server_link(rep, server)]))
    joined(net, [MINION, OTHER])
    return net, req, replies, rep


def _server_link(rep: Rep, server: RoadStack) -> SpLink:
    link = echo_server(rep)
    link.add_channel(RoadChannel(server, "device"))
    return link


def test_a_request_goes_through_a_device_and_the_reply_pops_its_way_back() -> None:
    net, req, replies, rep = device_chain()
    ids = [req.request(n, net.now) for n in range(5)]
    assert net.run_until(lambda: len(replies) == 5, timeout=10)
    assert sorted(replies, key=lambda r: r.body) == [Reply(i, f"echo:{n}") for n, i in
                                                     enumerate(ids)]
    assert rep.stats.received == 5
    assert req.stats.resent == 0


def test_requests_through_a_device_survive_a_lossy_duplicating_link() -> None:
    net, req, replies, _rep = device_chain(Impairment(loss=0.2, duplicate=0.1, jitter=0.002),
                                           seed=7)
    ids = {req.request(n, net.now): n for n in range(20)}
    assert net.run_until(lambda: len(replies) == 20, timeout=120)
    assert {reply.request_id: reply.body for reply in replies} == {
        i: f"echo:{n}" for i, n in ids.items()}
    assert req.in_flight() == []


def test_other_messages_pass_the_attachments_and_come_out_as_stack_events() -> None:
    net, _req, _replies, _rep = device_chain()
    client_hosted = net.stacks[MINION]
    assert isinstance(client_hosted, Hosted)
    stack = client_hosted.stack
    assert isinstance(stack, RoadStack)
    stack.transmit({"plain": True}, to="device", now=net.now)
    assert net.run_until(lambda: bool(net.of_type(MAIN, events.MessageReceived)), timeout=10)
    assert net.of_type(MAIN, events.MessageReceived)[0].body == {"plain": True}


def test_sp_payloads_are_told_apart_by_exactly_their_two_keys() -> None:
    assert is_sp_payload({"sp": [0x80000001], "body": 1})
    assert not is_sp_payload({"sp": [0x80000001], "body": 1, "extra": 2})
    assert not is_sp_payload({"body": 1})
    assert not is_sp_payload(b"\x80\x00\x00\x01")


def test_a_road_channel_refuses_an_unknown_remote_and_reads_liveness_from_the_stack() -> None:
    stack = RoadStack(LocalEstate("lonely"))
    channel = RoadChannel(stack, "nobody")
    assert channel.alive is False
    assert channel.send({"sp": [0x80000001], "body": 1}) is False
    stack.add_remote(("127.0.0.1", 9), name="somebody")
    known = RoadChannel(stack, "somebody")
    assert known.alive is True
    assert known.send({"sp": [0x80000001], "body": 1}) is True
    stack.remote("somebody").alive = False
    assert known.alive is False


def test_a_request_crosses_a_lane_between_two_yards() -> None:
    lanes = LaneNet()
    server = lanes.yard("server", main=True)
    client = lanes.yard("client")
    rep = Rep(name="server", framing=Framing.MAPPING)
    req = Req(name="client", framing=Framing.MAPPING, rng=random.Random(5))
    replies: list[Reply] = []
    server_side = Hosted(server, [_lane_server(rep, server)])
    client_side = Hosted(client, [SpLink(req, [LaneChannel(client, "server")],
                                         on_event=replies.append)])
    request_id = req.request("ping", lanes.now)
    for _ in range(10):
        for hosted in (server_side, client_side):
            hosted.settle(lanes.now)
        lanes.flush()
        for path, queue in lanes.queues.items():
            hosted = server_side if path == server.path else client_side
            while queue:
                data, source = queue.popleft()
                hosted.receive_datagram(data, source, lanes.now)
    assert replies == [Reply(request_id, "echo:ping")]


def _lane_server(rep: Rep, server: Any) -> SpLink:
    link = echo_server(rep)
    link.add_channel(LaneChannel(server, "client"))
    return link


def test_a_lane_channel_carries_mappings_only() -> None:
    lanes = LaneNet()
    yard = lanes.yard("alone")
    with pytest.raises(LocalProtocolError):
        LaneChannel(yard, "other").send(b"\x80\x00\x00\x01")
