"""Hostile input to a bus node from joined (authenticated) peers: nothing is raised out of
the node, garbage is dropped and counted, every table is bounded (docs/bus.md)."""

from __future__ import annotations

from typing import Any

from raetlike.bus import BusNode, Call, Errno, Reply
from raetlike.bus._message import BusMessage, MessageType, decode, encode
from raetlike.channels import LaneChannel
from raetlike.errors import LocalProtocolError, RaetError
from raetlike.sp import flush
from raetlike.sp._channel import Outgoing
from raetlike.wire.tags import Backtrace
from tests.test_bus_lane import lane_bus


class StandIn:
    """A link to a peer: what the node sends is kept in ``sent`` (decoded)."""

    def __init__(self, name: str, role: str = "") -> None:
        self.name = name
        self.alive = True
        self.userid = name
        self.role = role or name
        self.sent: list[BusMessage] = []

    def send(self, payload: Any) -> bool:
        self.sent.append(decode(payload))
        return True

    def responses(self) -> list[BusMessage]:
        return [m for m in self.sent if m.type is MessageType.RESPONSE]


class Raising(StandIn):
    """A link whose stack raises on every message (as a lane did on a body it cannot write)."""

    def send(self, payload: Any) -> bool:  # noqa: ARG002
        raise LocalProtocolError("message does not serialize as JSON")


def request(topic: str = "echo.x", payload: Any = None, *, matchtag: int = 1, sequence: int = 1,
            epoch: int = 9, target: str = "*any*", **fields: Any) -> dict[str, Any]:
    return encode(BusMessage(MessageType.REQUEST, topic, payload, matchtag=matchtag,
                             sequence=sequence, epoch=epoch, target=target, **fields))


# == HIGH 1: a message a link cannot carry never escapes the node =========================

def test_a_lane_channel_refuses_bytes_on_a_json_lane_instead_of_raising() -> None:
    bus = lane_bus(("kv",))
    channel = LaneChannel(bus.stacks["manor"], "kv")
    assert channel.send(request(payload=b"\x00raw")) is False
    assert channel.unsendable == 1


def test_bytes_from_a_joined_peer_to_a_yard_fail_the_request_and_the_manor_goes_on() -> None:
    # what a msgpack road delivers from a hostile estate: a bin item as bytes (revb
    # bus_bytes_kills_manor.py: the estate exited); the request fails 113 back to it
    bus = lane_bus(("kv", "client"))
    manor = bus.nodes["manor"]
    bus.nodes["kv"].register_service("echo", lambda r: r.payload)
    mallory = StandIn("mallory")
    manor.add_link(mallory, now=bus.lanes.now)
    manor.receive("mallory", request(payload=b"\x00raw", target="kv"), bus.lanes.now)
    [answer] = mallory.responses()
    assert answer.errno is Errno.EHOSTUNREACH
    assert answer.matchtag == 1
    assert manor.stats.undeliverable == 1
    assert bus.rpc("client", "kv", "echo.x", "still up").payload == "still up"


def test_a_link_raising_fails_the_request_with_113_not_out_of_the_node() -> None:
    node = BusNode("main")
    node.add_link(Raising("broken"), now=0.0)
    mallory = StandIn("mallory")
    node.add_link(mallory, now=0.0)
    node.receive("mallory", request(target="broken"), 1.0)
    [answer] = mallory.responses()
    assert answer.errno is Errno.EHOSTUNREACH
    got: list[Reply] = []
    node.send("broken", Call("echo.x"), got.append, now=1.0)  # ours, too
    assert [r.errno for r in got] == [Errno.EHOSTUNREACH]
    assert node.stats.undeliverable == 2


def test_sp_flush_reports_a_channel_that_raises_as_refused() -> None:
    class Endpoint:
        def __init__(self) -> None:
            payload = {"sp": [1], "body": b""}
            self.queue = [Outgoing(Raising("broken"), payload, Backtrace((), 1 << 31))]
            self.refusals: list[Outgoing] = []

        def messages_to_send(self) -> list[Outgoing]:
            batch, self.queue = self.queue, []
            return batch

        def refused(self, outgoing: Outgoing, now: float) -> None:  # noqa: ARG002
            self.refusals.append(outgoing)

    endpoint = Endpoint()
    assert flush(endpoint, 0.0) == 0
    assert len(endpoint.refusals) == 1
    assert issubclass(LocalProtocolError, RaetError)
