"""A device whose front and back frame differently: a body the other side cannot carry is a
peer's choice, so it is dropped and counted (``stats.malformed``), never raised."""

from __future__ import annotations

import random

import pytest

from raetlike.errors import LocalProtocolError
from raetlike.sp import (
    Device,
    Framing,
    MemoryNetwork,
    Rep,
    Reply,
    Req,
    Respondent,
    SurveyDone,
    Surveyor,
    SurveyResponse,
    flush,
)
from raetlike.sp._memory import MemoryChannel

RID = 0x8000_0001


def test_a_request_body_the_back_cannot_carry_is_dropped_and_the_others_go_through() -> None:
    # front: RAET-mode peers (any body); back: the bytes framing (bytes bodies only)
    front = Rep(name="front", raw=True, framing=Framing.MAPPING, rng=random.Random(1))
    back = Req(name="back", raw=True, framing=Framing.BYTES, rng=random.Random(2))
    server = Rep(name="server", framing=Framing.BYTES, rng=random.Random(3))
    network = MemoryNetwork()
    network.connect(back, server)
    honest, hostile = MemoryChannel("honest"), MemoryChannel("hostile")
    front.add_channel(honest)
    front.add_channel(hostile)
    device = Device(front, back)

    front.receive(honest, {"sp": [RID], "body": b"one"}, 0.0)
    for body in ("a str", {"a": "map"}, [1, 2], 7, None):
        front.receive(hostile, {"sp": [RID + 1], "body": body}, 0.0)
    front.receive(honest, {"sp": [RID + 2], "body": b"two"}, 0.0)
    network.run(0.0, [device])  # used to raise LocalProtocolError out of Device.pump

    assert back.stats.malformed == 5
    assert back.stats.sent == 2
    got = []
    while (request := server.next_event()) is not None:
        got.append(request.body)
        server.reply(request, b"re:" + request.body)
    assert got == [b"one", b"two"]
    network.run(0.0, [device])
    flush(front, 0.0)
    assert [payload["body"] for payload in honest.queue] == [b"re:one", b"re:two"]
    assert not hostile.queue


def test_a_reply_body_the_front_cannot_carry_is_dropped_and_counted() -> None:
    # front: the bytes framing; back: RAET-mode servers, one of them hostile
    front = Rep(name="front", raw=True, framing=Framing.BYTES, rng=random.Random(1))
    back = Req(name="back", raw=True, framing=Framing.MAPPING, rng=random.Random(2))
    client = Req(name="client", framing=Framing.BYTES, rng=random.Random(3))
    network = MemoryNetwork()
    network.connect(client, front)
    server = MemoryChannel("hostile-server")
    back.add_channel(server)
    device = Device(front, back)

    first = client.request(b"ping", 0.0)
    second = client.request(b"ping", 0.0)
    network.run(0.0, [device])
    flush(back, 0.0)
    stacks = [payload["sp"] for payload in server.queue]
    assert len(stacks) == 2
    back.receive(server, {"sp": stacks[0], "body": {"not": "bytes"}}, 0.0)
    back.receive(server, {"sp": stacks[1], "body": b"pong"}, 0.0)
    network.run(0.0, [device])  # used to raise LocalProtocolError out of Device.pump

    assert front.stats.malformed == 1
    replies = []
    while (event := client.next_event()) is not None:
        replies.append(event)
    assert replies == [Reply(second, b"pong")]
    assert client.in_flight() == [first]  # resent at its timer, as after any loss


def test_survey_devices_drop_bodies_the_other_side_cannot_carry_both_ways() -> None:
    front = Respondent(name="front", raw=True, framing=Framing.MAPPING, rng=random.Random(1))
    back = Surveyor(name="back", raw=True, framing=Framing.BYTES, rng=random.Random(2))
    device = Device(front, back)
    respondent_channel = MemoryChannel("respondent")
    back.add_channel(respondent_channel)
    asker = MemoryChannel("asker")
    front.add_channel(asker)

    front.receive(asker, {"sp": [RID], "body": "a str"}, 0.0)
    front.receive(asker, {"sp": [RID + 1], "body": b"q"}, 0.0)
    device.pump(0.0)
    assert back.stats.malformed == 1
    assert len(back.messages_to_send()) == 1

    # the other way round: a bytes front behind a RAET-mode back
    front2 = Respondent(name="front2", raw=True, framing=Framing.BYTES, rng=random.Random(3))
    back2 = Surveyor(name="back2", raw=True, framing=Framing.MAPPING, rng=random.Random(4))
    device2 = Device(front2, back2)
    surveyor = Surveyor(name="surveyor", framing=Framing.BYTES, rng=random.Random(5))
    network = MemoryNetwork()
    network.connect(surveyor, front2)
    hostile = MemoryChannel("hostile-respondent")
    back2.add_channel(hostile)
    survey_id = surveyor.survey(b"q", 0.0, survey_time=5.0)
    network.run(0.0, [device2])
    flush(back2, 0.0)
    (payload,) = hostile.queue
    back2.receive(hostile, {"sp": payload["sp"], "body": ["not", "bytes"]}, 1.0)
    back2.receive(hostile, {"sp": payload["sp"], "body": b"yes"}, 1.0)
    network.run(1.0, [device2])
    assert front2.stats.malformed == 1
    surveyor.handle_timer(5.0)
    events = []
    while (event := surveyor.next_event()) is not None:
        events.append(event)
    assert events == [SurveyResponse(survey_id, b"yes", "front2"), SurveyDone(survey_id, 1)]


def test_a_cooked_answer_its_framing_cannot_carry_raises_and_leaves_the_request_open() -> None:
    network = MemoryNetwork()
    client = Req(name="client", rng=random.Random(1))
    server = Rep(name="server", rng=random.Random(2))
    network.connect(client, server)
    client.request(b"ping", 0.0)
    network.run(0.0)
    request = server.next_event()
    assert request is not None
    with pytest.raises(LocalProtocolError):
        server.reply(request, "a str")
    assert server.outstanding() == 1
    server.reply(request, b"pong")
    assert server.outstanding() == 0


_TAGS = [0, 1, 5, 0x7FFF_FFFF, 0x8000_0000, RID, 0xFFFF_FFFF, -1, 1 << 32, True, 1.5, "1", None]
_BODIES = [b"x", "s", {"a": 1}, [1], 7, None, bytearray(b"y"), {"sp": [1]}, 1.5]


def _hostile(rng: random.Random, channel_ids: list[int]) -> object:
    """A payload a hostile peer might send: either framing, well formed or not."""
    if rng.random() < 0.5:
        data = b"".join(tag.to_bytes(4, "big") for tag in rng.choices(_TAGS, k=rng.randint(0, 9))
                        if type(tag) is int and 0 <= tag < 1 << 32)
        return data + rng.choice([b"", b"x"])
    tags: object = rng.choices(_TAGS, k=rng.randint(0, 9))
    if rng.random() < 0.3:
        tags = [rng.choice([*channel_ids, 12345]), RID]  # a reply routed to a real channel
    elif rng.random() < 0.1:
        tags = rng.choice([None, "x", 5, {}])
    payload = {"sp": tags, "body": rng.choice(_BODIES)}
    if rng.random() < 0.1:
        payload["extra"] = 1
    return payload


@pytest.mark.parametrize("seed", range(4))
def test_nothing_a_peer_sends_raises_out_of_any_endpoint_or_device(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        front_framing, back_framing = rng.choice(list(Framing)), rng.choice(list(Framing))
        device = Device(
            Rep(name="f", raw=True, framing=front_framing, rng=rng), Req(
                name="b", raw=True, framing=back_framing, rng=rng)
        ) if rng.random() < 0.5 else Device(
            Respondent(name="f", raw=True, framing=front_framing, rng=rng),
            Surveyor(name="b", raw=True, framing=back_framing, rng=rng))
        clients = [MemoryChannel(f"c{i}") for i in range(2)]
        servers = [MemoryChannel(f"s{i}") for i in range(2)]
        channel_ids = [device.front.add_channel(channel) for channel in clients]
        for channel in servers:
            device.back.add_channel(channel)
        peer = MemoryChannel("peer")
        cooked = [Rep(name="r", framing=front_framing), Respondent(name="p", framing=front_framing),
                  Req(name="q", framing=back_framing), Surveyor(name="v", framing=back_framing)]
        for endpoint in cooked:
            endpoint.add_channel(peer)
        for _ in range(20):
            device.front.receive(rng.choice(clients), _hostile(rng, channel_ids), 0.0)  # type: ignore[arg-type]
            device.back.receive(rng.choice(servers), _hostile(rng, channel_ids), 0.0)  # type: ignore[arg-type]
            device.pump(0.0)
            flush(device.front, 0.0)
            flush(device.back, 0.0)
            for endpoint in cooked:
                endpoint.receive(peer, _hostile(rng, channel_ids), 0.0)  # type: ignore[arg-type]
                while endpoint.next_event() is not None:
                    pass
                flush(endpoint, 0.0)
