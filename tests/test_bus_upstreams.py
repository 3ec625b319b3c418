"""A bus node with several links toward main: upstreams (hot) and standby ones (failover)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raetlike.bus import ANY, BusMessage, BusNode, Errno, MessageType, Reply, decode, encode
from raetlike.bus._api import Call
from raetlike.errors import BackpressureError


@dataclass
class FakeLink:
    """A link that records what the node sent through it."""

    name: str
    alive: bool = True
    sent: list[BusMessage] = field(default_factory=list)

    @property
    def userid(self) -> str:
        return self.name

    @property
    def role(self) -> str:
        return self.name

    def send(self, payload: Any) -> bool:
        self.sent.append(decode(payload))
        return True

    def of(self, kind: MessageType) -> list[BusMessage]:
        return [m for m in self.sent if m.type is kind]


def _node(*, standby: bool) -> tuple[BusNode, FakeLink, FakeLink, FakeLink]:
    node = BusNode("minion")
    alpha, beta, yard = FakeLink("alpha"), FakeLink("beta"), FakeLink("yard")
    node.add_link(alpha, upstream=True)
    node.add_link(beta, upstream=not standby, standby=standby)
    node.add_link(yard)
    return node, alpha, beta, yard


def _event(sequence: int, userid: str = "elsewhere") -> dict[str, Any]:
    return encode(BusMessage(MessageType.EVENT, "ev.x", sequence, sequence=sequence, epoch=7,
                             userid=userid, role=userid))


def test_events_go_to_every_upstream_and_requests_to_the_first_live_one() -> None:
    node, alpha, beta, _yard = _node(standby=False)
    node.publish("ev.x", 1, now=0.0)
    assert [m.payload for m in alpha.of(MessageType.EVENT)] == [1]
    assert [m.payload for m in beta.of(MessageType.EVENT)] == [1]
    node.send(ANY, Call("svc.m", None), lambda _r: None, now=0.0)
    assert len(alpha.of(MessageType.REQUEST)) == 1
    assert beta.of(MessageType.REQUEST) == []
    alpha.alive = False
    node.send(ANY, Call("svc.m", None), lambda _r: None, now=0.0)
    assert len(beta.of(MessageType.REQUEST)) == 1


def test_an_event_that_comes_down_from_two_mains_is_delivered_once() -> None:
    node, _alpha, _beta, yard = _node(standby=False)
    got: list[object] = []
    node.subscribe("ev.", lambda event: got.append(event.payload), now=0.0)
    node.receive("yard", encode(BusMessage(MessageType.KEEPALIVE, subscriptions=("ev.",))), 0.0)
    for link in ("alpha", "beta", "alpha"):
        node.receive(link, _event(1), 0.0)
    assert got == [1]
    assert [m.payload for m in yard.of(MessageType.EVENT)] == [1]
    assert node.stats.duplicates == 2


def test_a_standby_main_gets_nothing_sent_up_and_its_events_are_not_sent_up_either() -> None:
    node, alpha, beta, _yard = _node(standby=True)
    assert node.upstreams == ["alpha"]
    node.publish("ev.x", 1, now=0.0)
    assert beta.of(MessageType.EVENT) == []
    got: list[object] = []
    node.subscribe("ev.", lambda event: got.append(event.payload), now=0.0)
    node.receive("beta", _event(5), 0.0)  # from a standby main: ours to deliver, not to relay
    assert got == [5]
    assert [m.payload for m in alpha.of(MessageType.EVENT)] == [1]
    node.receive("beta", encode(BusMessage(MessageType.REQUEST, "svc.m", None, matchtag=1,
                                           sequence=1, epoch=3, target=ANY)), 0.0)
    assert alpha.of(MessageType.REQUEST) == []  # never bounced from one main to another
    assert [m.errno.value for m in beta.of(MessageType.RESPONSE)] == [38]


def test_promoting_a_standby_main_sends_it_our_subscriptions_and_the_old_one_none() -> None:
    node, alpha, beta, _yard = _node(standby=True)
    node.subscribe("ev.", lambda _event: None, now=0.0)
    node.set_upstream("beta", True)
    node.set_upstream("alpha", False)
    assert node.upstreams == ["beta"]
    assert beta.of(MessageType.KEEPALIVE)[-1].subscriptions == ("ev.",)
    node.handle_timer(node.config.keepalive_interval + 1.0)
    assert alpha.of(MessageType.KEEPALIVE)[-1].subscriptions == ()
    node.publish("ev.x", 2, now=20.0)
    assert [m.payload for m in beta.of(MessageType.EVENT)] == [2]
    assert [m.payload for m in alpha.of(MessageType.EVENT)] == []


@dataclass
class FullLink(FakeLink):
    """A link whose outbox is full."""

    def send(self, _payload: Any) -> bool:
        raise BackpressureError(f"{self.name}: outbox full")


def test_a_request_refused_by_our_own_full_outbox_fails_with_enobufs_not_unreachable() -> None:
    # A fan-out of 10,000 past the asker's lane outbox read as 9,537 estates unreachable
    # (docs/relay.md): a full outbox here is a busy asker, told apart from a lost target.
    node = BusNode("asker")
    node.add_link(FullLink("main"), upstream=True)
    got: list[Reply] = []
    node.send("e1", Call("echo.ping", None), got.append, now=0.0)
    assert [(r.errno, r.error) for r in got] == [(Errno.ENOBUFS, "the outbox to main is full")]
    # a request relayed through us that the next hop's full outbox refuses is answered 113
    # on the wire (older nodes know no 105)
    relay = BusNode("relay")
    relay.add_link(FullLink("e2"))
    below = FakeLink("yard")
    relay.add_link(below)
    relay.receive("yard", encode(BusMessage(MessageType.REQUEST, "echo.ping", None,
                                            matchtag=1, sequence=1, epoch=3, target="e2")), 0.0)
    assert [m.errno for m in below.of(MessageType.RESPONSE)] == [Errno.EHOSTUNREACH]
