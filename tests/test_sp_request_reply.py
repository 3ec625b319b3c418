"""REQ/REP end to end and through devices, on in-memory channels with a virtual clock."""

from __future__ import annotations

import random

import pytest

from raetlike.errors import LocalProtocolError
from raetlike.sp import (
    Device,
    Framing,
    MemoryNetwork,
    RawReply,
    Rep,
    Reply,
    Req,
    Request,
)
from raetlike.wire import tags as tag_codec
from raetlike.wire.tags import REQUEST_BIT


def rng(seed: int) -> random.Random:
    return random.Random(seed)


def chain(
    devices: int, framing: Framing = Framing.BYTES
) -> tuple[MemoryNetwork, Req, Rep, list[Device]]:
    """client REQ -> device 1 -> ... -> device n -> server REP."""
    network = MemoryNetwork()
    client = Req(name="client", framing=framing, rng=rng(1))
    server = Rep(name="server", framing=framing, rng=rng(2))
    chain_devices = []
    upstream: Req = client
    for index in range(devices):
        front = Rep(name=f"front{index}", raw=True, framing=framing, rng=rng(10 + index))
        back = Req(name=f"back{index}", raw=True, framing=framing, rng=rng(20 + index))
        network.connect(upstream, front)
        chain_devices.append(Device(front, back))
        upstream = back
    network.connect(upstream, server)
    return network, client, server, chain_devices


def serve_all(server: Rep) -> list[Request]:
    """Answer every waiting request with its body reversed."""
    served = []
    while (request := server.next_event()) is not None:
        served.append(request)
        server.reply(request, request.body[::-1])
    return served


@pytest.mark.parametrize("framing", list(Framing))
@pytest.mark.parametrize("hops", [0, 1, 3])
def test_a_reply_finds_its_way_back_through_any_number_of_devices(
    hops: int, framing: Framing
) -> None:
    network, client, server, devices = chain(hops, framing)
    body: object = b"ping" if framing is Framing.BYTES else "ping"
    request_id = client.request(body, now=0.0)
    network.run(0.0, devices)
    (request,) = serve_all(server)
    assert request.backtrace.request_id == request_id
    assert request.backtrace.hops == hops + 1
    network.run(0.0, devices)
    assert client.next_event() == Reply(request_id, body[::-1])  # type: ignore[index]
    assert client.next_event() is None
    assert client.in_flight() == []
    for device in devices:
        assert device.front.outstanding() == 0
        assert device.front.pending() == 0
        assert device.front.stats.received == device.front.stats.sent == 1


def test_each_device_pushes_the_channel_id_it_heard_the_request_on() -> None:
    network = MemoryNetwork()
    client = Req(name="client", rng=rng(1))
    server = Rep(name="server", rng=rng(2))
    fronts = [Rep(name=f"front{index}", raw=True, rng=rng(10 + index)) for index in range(3)]
    backs = [Req(name=f"back{index}", raw=True, rng=rng(20 + index)) for index in range(3)]
    heard_on = []
    for upstream, front in zip([client, *backs], fronts, strict=False):
        _, inbound = network.connect(upstream, front)
        heard_on.append(front.channel_id(inbound))
    _, inbound = network.connect(backs[-1], server)
    heard_on.append(server.channel_id(inbound))
    devices = [Device(front, back) for front, back in zip(fronts, backs, strict=True)]
    request_id = client.request(b"x", now=0.0)
    network.run(0.0, devices)
    (request,) = serve_all(server)
    assert request.backtrace.tags == [*reversed(heard_on), request_id]
    assert len(set(heard_on)) == 4


def test_replies_pop_one_tag_per_hop_on_the_wire() -> None:
    network, client, server, devices = chain(2)
    request_id = client.request(b"q", now=0.0)
    network.run(0.0, devices)
    serve_all(server)
    seen: list[list[int]] = []
    # Walk the reply hop by hop and read the stack each payload carries.
    for _ in range(10):
        network.flush(0.0)
        for device in devices:
            device.pump(0.0)
        network.flush(0.0)
        busy = [channel for channel in network.channels() if channel.queue]
        if not busy:
            break
        for channel in busy:
            payload = channel.queue[0]
            assert isinstance(payload, bytes)
            stack, body = tag_codec.split(payload)
            assert body == b"q"
            seen.append(stack)
            network.deliver(channel, 0.0)
    assert [len(stack) for stack in seen] == [3, 2, 1]
    assert all(stack[-1] == request_id for stack in seen)
    assert isinstance(client.next_event(), Reply)


def test_devices_are_two_raw_endpoints_and_nothing_else() -> None:
    assert Device.__slots__ == ("back", "front")
    with pytest.raises(LocalProtocolError):
        Device(Rep(name="a"), Req(name="b", raw=True))
    with pytest.raises(LocalProtocolError):
        Req(name="raw", raw=True).request(b"x", 0.0)


def test_first_request_ids_are_random_per_start_and_have_the_top_bit_set() -> None:
    firsts = set()
    for seed in range(20):
        network = MemoryNetwork()
        client = Req(name="c", rng=rng(seed))
        network.connect(client, Rep(name="s"))
        firsts.add(client.request(b"", 0.0))
    assert len(firsts) == 20
    assert all(value & REQUEST_BIT for value in firsts)
    unseeded = []
    for _ in range(2):
        client = Req(name="c")
        MemoryNetwork().connect(client, Rep(name="s"))
        unseeded.append(client.request(b"", 0.0))
    assert unseeded[0] != unseeded[1]


def test_request_ids_count_up_and_wrap_within_the_top_bit_space() -> None:
    class Edge(random.Random):
        def getrandbits(self, k: int, /) -> int:
            return (1 << k) - 2

    client = Req(name="c", rng=Edge())
    MemoryNetwork().connect(client, Rep(name="s"))
    ids = [client.request(b"", 0.0) for _ in range(3)]
    assert ids == [0xFFFF_FFFE, 0xFFFF_FFFF, 0x8000_0000]


def test_first_channel_ids_are_random_per_start() -> None:
    ids = set()
    for seed in range(10):
        server = Rep(name="s", rng=rng(seed))
        _, backward = MemoryNetwork().connect(Req(name="c"), server)
        channel_id = server.channel_id(backward)
        assert channel_id is not None
        assert channel_id < REQUEST_BIT
        ids.add(channel_id)
    assert len(ids) == 10


def test_a_request_is_resent_after_the_timeout_until_a_reply_comes() -> None:
    network = MemoryNetwork()
    client = Req(name="c", resend_interval=5.0, rng=rng(3))
    server = Rep(name="s", rng=rng(4))
    network.connect(client, server)
    request_id = client.request(b"hello", now=100.0)
    assert client.get_timer() == 105.0
    client.handle_timer(104.9)
    assert client.stats.resent == 0
    client.handle_timer(105.0)
    assert client.stats.resent == 1
    assert client.get_timer() == 110.0
    client.handle_timer(110.0)
    network.run(110.0)
    requests = []
    while (request := server.next_event()) is not None:
        requests.append(request)
    assert [request.body for request in requests] == [b"hello"] * 3
    for request in requests:
        server.reply(request, b"ok")
    network.run(110.0)
    assert client.next_event() == Reply(request_id, b"ok")
    assert client.next_event() is None
    assert client.stats.duplicate == 2
    assert client.get_timer() is None


def test_the_default_resend_interval_is_sixty_seconds() -> None:
    client = Req(name="c")
    MemoryNetwork().connect(client, Rep(name="s"))
    client.request(b"", now=7.0)
    assert client.get_timer() == 67.0


def test_replies_to_unknown_or_cancelled_requests_are_stray() -> None:
    network = MemoryNetwork()
    client = Req(name="c", rng=rng(5))
    server = Rep(name="s", rng=rng(6))
    to_server, _ = network.connect(client, server)
    request_id = client.request(b"a", 0.0)
    network.run(0.0)
    request = server.next_event()
    assert request is not None
    assert client.cancel(request_id)
    assert not client.cancel(request_id)
    assert client.get_timer() is None
    server.reply(request, b"late")
    network.run(0.0)
    client.receive(to_server, tag_codec.join([request_id ^ 1], b"made up"), 0.0)
    assert client.next_event() is None
    assert client.stats.stray == 2
    assert client.stats.duplicate == 0
    assert client.stats.cancelled == 1


def test_garbage_replies_are_dropped_and_counted() -> None:
    network = MemoryNetwork()
    client = Req(name="c", rng=rng(5))
    to_server, _ = network.connect(client, Rep(name="s"))
    client.request(b"a", 0.0)
    client.receive(to_server, b"\x00\x00", 0.0)
    client.receive(to_server, tag_codec.join([1, REQUEST_BIT], b""), 0.0)
    client.receive(to_server, {"sp": [REQUEST_BIT], "body": b""}, 0.0)
    assert client.stats.malformed == 3
    assert client.next_event() is None


def test_rep_ignores_malformed_stacks_and_unknown_channels() -> None:
    network = MemoryNetwork()
    server = Rep(name="s", rng=rng(7))
    _, backward = network.connect(Req(name="c"), server)
    server.receive(backward, b"\x00\x00\x00\x01", 0.0)
    server.receive(backward, b"\x00" * 40, 0.0)
    other = type(backward)("stranger")
    server.receive(other, tag_codec.join([REQUEST_BIT], b""), 0.0)
    assert server.next_event() is None
    assert (server.stats.malformed, server.stats.ttl_exceeded) == (1, 1)
    assert server.stats.unknown_channel == 1


def test_replies_to_a_vanished_channel_are_dropped_and_counted() -> None:
    network = MemoryNetwork()
    server = Rep(name="s", rng=rng(8))
    _, backward = network.connect(Req(name="c", rng=rng(9)), server)
    server.receive(backward, tag_codec.join([REQUEST_BIT | 5], b"q"), 0.0)
    request = server.next_event()
    assert request is not None
    server.remove_channel(backward)
    server.reply(request, b"a")
    assert server.messages_to_send() == []
    assert server.stats.vanished_channel == 1


def test_a_cooked_rep_answers_each_request_once_or_cancels_it() -> None:
    network = MemoryNetwork()
    server = Rep(name="s", rng=rng(8))
    _, backward = network.connect(Req(name="c"), server)
    server.receive(backward, tag_codec.join([REQUEST_BIT | 5], b"q"), 0.0)
    server.receive(backward, tag_codec.join([REQUEST_BIT | 6], b"r"), 0.0)
    first, second = server.next_event(), server.next_event()
    assert first is not None
    assert second is not None
    assert server.outstanding() == 2
    server.reply(first, b"a")
    with pytest.raises(LocalProtocolError):
        server.reply(first, b"again")
    assert server.cancel_request(second)
    assert not server.cancel_request(second)
    with pytest.raises(LocalProtocolError):
        server.reply(second, b"too late")
    assert server.outstanding() == 0
    assert server.stats.cancelled == 1


def test_rep_serves_channels_round_robin_however_many_each_sent() -> None:
    network = MemoryNetwork()
    server = Rep(name="s", rng=rng(10))
    clients = [Req(name=f"c{index}", rng=rng(index)) for index in range(3)]
    for client in clients:
        network.connect(client, server)
    for _ in range(10):
        clients[0].request(b"flood", 0.0)
    clients[1].request(b"one", 0.0)
    clients[2].request(b"two", 0.0)
    clients[2].request(b"three", 0.0)
    network.run(0.0)
    order = []
    while (request := server.next_event()) is not None:
        order.append(request.channel_name)
    assert order[:6] == ["c0", "c1", "c2", "c0", "c2", "c0"]
    assert order[6:] == ["c0"] * 7


def test_a_flooding_channel_overflows_only_its_own_queue() -> None:
    network = MemoryNetwork()
    server = Rep(name="s", max_queued=4, rng=rng(10))
    flooder, polite = Req(name="f", rng=rng(1)), Req(name="p", rng=rng(2))
    network.connect(flooder, server)
    network.connect(polite, server)
    for _ in range(10):
        flooder.request(b"x", 0.0)
    polite.request(b"y", 0.0)
    network.run(0.0)
    names = []
    while (request := server.next_event()) is not None:
        names.append(request.channel_name)
    assert names.count("p") == 1
    assert names.count("f") == 4
    assert server.stats.overflow == 6


def test_a_raw_req_hands_up_replies_with_the_rest_of_their_stack() -> None:
    network = MemoryNetwork()
    back = Req(name="back", raw=True, rng=rng(1))
    to_server, _ = network.connect(back, Rep(name="s"))
    back.receive(to_server, tag_codec.join([7, REQUEST_BIT | 9], b"r"), 0.0)
    event = back.next_event()
    assert isinstance(event, RawReply)
    assert event.backtrace.tags == [7, REQUEST_BIT | 9]
    back.receive(to_server, tag_codec.join([REQUEST_BIT | 9], b"r"), 0.0)
    assert back.next_event() is None
    assert back.stats.malformed == 1
