"""How REQ spreads requests over channels: round robin, priorities, backpressure."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from raetlike.errors import BackpressureError
from raetlike.sp import MemoryChannel, MemoryNetwork, Rep, Req, RequestBlocked, flush


def make_client() -> Req:
    return Req(name="client", rng=random.Random(1))


def servers_hit(network: MemoryNetwork, servers: list[Rep]) -> list[str]:
    """Deliver everything; the server names in the order their requests arrived."""
    network.run(0.0)
    hits: list[str] = []
    for server in servers:
        while server.next_event() is not None:
            hits.append(server.name)
    return hits


def send_and_see(client: Req, network: MemoryNetwork, count: int) -> list[str]:
    """Make (and then cancel) ``count`` requests; the channel each went out on, in order."""
    names = []
    for _ in range(count):
        request_id = client.request(b"r", 0.0)
        (outgoing,) = client.messages_to_send()
        assert outgoing.channel.send(outgoing.payload)
        names.append(outgoing.channel.name)
        client.cancel(request_id)
    network.run(0.0)
    return names


def test_requests_go_round_robin_over_channels_of_equal_priority() -> None:
    network = MemoryNetwork()
    client = make_client()
    servers = [Rep(name=f"s{index}") for index in range(3)]
    for server in servers:
        network.connect(client, server)
    assert send_and_see(client, network, 7) == ["s0", "s1", "s2", "s0", "s1", "s2", "s0"]


def test_round_robin_stays_fair_when_channels_join_and_leave() -> None:
    network = MemoryNetwork()
    client = make_client()
    servers = {name: Rep(name=name) for name in ("a", "b", "c")}
    channels = {name: network.connect(client, server)[0] for name, server in servers.items()}
    assert send_and_see(client, network, 2) == ["a", "b"]
    client.remove_channel(channels["b"], 0.0)
    assert send_and_see(client, network, 3) == ["c", "a", "c"]
    network.connect(client, Rep(name="d"))
    assert send_and_see(client, network, 4) == ["d", "a", "c", "d"]
    client.remove_channel(channels["a"], 0.0)
    counts = Counter(send_and_see(client, network, 100))
    assert counts == {"c": 50, "d": 50}


def test_a_dead_channel_is_skipped_until_it_comes_back() -> None:
    network = MemoryNetwork()
    client = make_client()
    first, _ = network.connect(client, Rep(name="a"))
    network.connect(client, Rep(name="b"))
    first.alive = False
    assert send_and_see(client, network, 3) == ["b", "b", "b"]
    first.alive = True
    assert send_and_see(client, network, 2) == ["a", "b"]


def test_lower_priority_numbers_are_used_first() -> None:
    network = MemoryNetwork()
    client = make_client()
    backup, _ = network.connect(client, Rep(name="backup"), priority=5)
    primaries = [network.connect(client, Rep(name=f"p{index}"), priority=1)[0] for index in (1, 2)]
    assert send_and_see(client, network, 4) == ["p1", "p2", "p1", "p2"]
    for primary in primaries:
        primary.alive = False
    assert send_and_see(client, network, 2) == ["backup", "backup"]
    primaries[1].alive = True
    assert send_and_see(client, network, 1) == ["p2"]
    assert backup.priority == 5


def test_a_full_channel_passes_the_request_to_the_next_one() -> None:
    network = MemoryNetwork()
    client = make_client()
    full, _ = network.connect(client, Rep(name="full"), priority=0)
    full.capacity = 0
    network.connect(client, Rep(name="spare"), priority=3)
    client.request(b"r", 0.0)
    assert flush(client, 0.0) == 1
    assert client.stats.refused == 1
    assert servers_hit(network, []) == []
    assert [channel.name for channel in network.channels() if channel.queue] == []
    assert client.next_event() is None


def test_backpressure_is_reported_when_no_channel_takes_the_request() -> None:
    client = Req(name="client", resend_interval=10.0, rng=random.Random(2))
    with pytest.raises(BackpressureError):
        client.request(b"r", 0.0)
    network = MemoryNetwork()
    server = Rep(name="s")
    channel, _ = network.connect(client, server)
    channel.capacity = 0
    request_id = client.request(b"r", 0.0)
    flush(client, 0.0)
    assert client.next_event() == RequestBlocked(request_id)
    assert client.stats.blocked == 2
    assert client.in_flight() == [request_id]
    channel.capacity = None
    client.handle_timer(10.0)
    network.run(10.0)
    request = server.next_event()
    assert request is not None
    assert request.backtrace.request_id == request_id


def test_losing_a_channel_resends_its_requests_on_another_at_once() -> None:
    network = MemoryNetwork()
    client = make_client()
    to_a, _ = network.connect(client, Rep(name="a"))
    b = Rep(name="b")
    network.connect(client, b)
    request_id = client.request(b"r", 0.0)
    flush(client, 0.0)
    assert len(to_a.queue) == 1
    client.remove_channel(to_a, 1.0)
    assert client.get_timer() == 61.0
    network.run(1.0)
    request = b.next_event()
    assert request is not None
    assert request.backtrace.request_id == request_id
    assert client.stats.resent == 1


def test_replies_on_channels_the_client_no_longer_has_are_dropped() -> None:
    network = MemoryNetwork()
    client = make_client()
    to_a, _ = network.connect(client, Rep(name="a"))
    client.remove_channel(to_a, 0.0)
    stranger = MemoryChannel("a")
    client.receive(stranger, b"\x80\x00\x00\x01", 0.0)
    client.receive(to_a, b"\x80\x00\x00\x01", 0.0)
    assert client.stats.unknown_channel == 2
