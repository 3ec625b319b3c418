"""Loop avoidance: a request that has passed the depth limit of hops is dropped."""

from __future__ import annotations

import random

import pytest

from raetlike.sp import Device, MemoryNetwork, Rep, Req, Respondent, Surveyor
from raetlike.wire import tags as tag_codec
from raetlike.wire.tags import REQUEST_BIT


def device_loop(max_hops: int | None = None) -> tuple[MemoryNetwork, Req, list[Device]]:
    """A client feeding device A, whose back feeds device B, whose back feeds A."""
    options = {} if max_hops is None else {"max_hops": max_hops}
    network = MemoryNetwork()
    devices = [
        Device(
            Rep(name=f"front{side}", raw=True, rng=random.Random(side), **options),
            Req(name=f"back{side}", raw=True, rng=random.Random(side + "5"), **options),
        )
        for side in ("a", "b")
    ]
    first, second = devices
    network.connect(first.back, second.front)
    network.connect(second.back, first.front)
    client = Req(name="client", rng=random.Random(9))
    network.connect(client, first.front)
    return network, client, devices


@pytest.mark.parametrize("max_hops", [None, 3, 12])
def test_a_device_loop_drops_the_request_once_it_is_too_deep(max_hops: int | None) -> None:
    network, client, devices = device_loop(max_hops)
    client.request(b"round and round", 0.0)
    network.run(0.0, devices)
    limit = 8 if max_hops is None else max_hops
    taken_in = sum(device.front.stats.received for device in devices)
    forwarded = sum(device.back.stats.sent for device in devices)
    assert taken_in == limit
    assert forwarded == limit - 1
    assert sum(device.back.stats.ttl_exceeded for device in devices) == 1
    assert all(not channel.queue for channel in network.channels())


def test_a_rep_refuses_a_stack_deeper_than_its_limit() -> None:
    network = MemoryNetwork()
    server = Rep(name="server", rng=random.Random(1))
    _, inbound = network.connect(Req(name="client"), server)
    server.receive(inbound, tag_codec.join([*range(7), REQUEST_BIT], b"ok"), 0.0)
    server.receive(inbound, tag_codec.join([*range(8), REQUEST_BIT], b"deep"), 0.0)
    request = server.next_event()
    assert request is not None
    assert request.body == b"ok"
    assert server.next_event() is None
    assert server.stats.ttl_exceeded == 1


def test_a_survey_loop_of_devices_ends_at_the_limit_too() -> None:
    network = MemoryNetwork()
    devices = [
        Device(
            Respondent(name=f"front{side}", raw=True, rng=random.Random(side)),
            Surveyor(name=f"back{side}", raw=True, rng=random.Random(side + "5")),
        )
        for side in ("a", "b")
    ]
    network.connect(devices[0].back, devices[1].front)
    network.connect(devices[1].back, devices[0].front)
    surveyor = Surveyor(name="surveyor", rng=random.Random(3))
    network.connect(surveyor, devices[0].front)
    surveyor.survey(b"anyone?", 0.0)
    network.run(0.0, devices)
    assert sum(device.front.stats.received for device in devices) == 8
    assert sum(device.back.stats.ttl_exceeded for device in devices) == 1
