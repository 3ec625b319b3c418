"""LaneStack through a simulated lane: pairs, routing through main, acceptance, garbage."""

from __future__ import annotations

import pytest

from lane import Drop, LaneConfig, LaneStack, events
from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import parse_page
from tests.lanekit import LaneNet


@pytest.mark.parametrize("kind", [PageKind.JSON, PageKind.MSGPACK])
def test_a_message_travels_between_a_pair_of_yards_both_ways(kind: PageKind) -> None:
    net = LaneNet()
    config = LaneConfig(page_kind=kind)
    a, b = net.yard("a", config=config), net.yard("b", config=config)
    a.transmit({"route": "x", "body": "hello"}, to="b", now=net.now)
    net.settle()
    b.transmit({"reply": [1, 2, 3]}, to="a", now=net.now)
    net.settle()
    [got] = net.received(b)
    assert (got.yard, got.body, got.pages) == ("a", {"route": "x", "body": "hello"}, 1)
    assert got.yard_session == a.local.yard_session
    [back] = net.received(a)
    assert back.body == {"reply": [1, 2, 3]}
    head, _ = parse_page(net.wire[0][0])
    assert head.kind is kind
    assert (a.stats.messages_sent, b.stats.messages_received) == (1, 1)


def test_an_unknown_yard_is_added_when_it_first_sends_to_an_accepting_lane() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"n": 1}, to="b")
    net.settle()
    [added] = net.of_type(b, events.YardAdded)
    assert (added.yard, added.path) == ("a", a.path)
    assert b.yards["a"].path == a.path


def test_traffic_from_an_unknown_yard_is_refused_and_counted_when_the_lane_refuses() -> None:
    net = LaneNet()
    a = net.yard("a")
    b = net.yard("b", config=LaneConfig(accept=False))
    a.transmit({"n": 1}, to="b")
    a.transmit({"n": 2}, to="b")
    net.settle()
    assert net.received(b) == []
    assert b.stats.dropped[Drop.REFUSED] == 2
    assert "a" not in b.yards
    b.add_yard("a")
    a.transmit({"n": 3}, to="b")
    net.settle()
    assert [m.body for m in net.received(b)] == [{"n": 3}]


def lane_of_yards(net: LaneNet, names: list[str],
                  main_config: LaneConfig | None = None) -> list[LaneStack]:
    main = net.yard("main", main=True, config=main_config)
    return [main] + [net.yard(name, config=LaneConfig(main_yard="main")) for name in names]


def test_the_main_yard_routes_pages_between_the_yards_of_its_lane() -> None:
    net = LaneNet()
    main, a, b, c = lane_of_yards(net, ["a", "b", "c"])
    big = {"blob": "z" * 200_000}
    a.transmit({"to": "b"}, to="b")
    a.transmit(big, to="c")
    net.settle()
    assert [m.body for m in net.received(b)] == [{"to": "b"}]
    [got] = net.received(c)
    assert (got.yard, got.body, got.pages) == ("a", big, 4)
    # a only ever wrote to main's socket; main wrote on to b and c
    assert {address for _, source, address in net.wire if source == a.path} == {main.path}
    assert {address for _, source, address in net.wire if source == main.path} == {b.path, c.path}
    assert main.stats.pages_forwarded == 5
    assert net.received(main) == []
    # the reply finds its way back through main too
    c.transmit({"re": "big"}, to="a")
    b.transmit({"re": "to"}, to="a")
    net.settle()
    assert sorted((m.yard, m.body["re"]) for m in net.received(a)) == [("b", "to"), ("c", "big")]
    assert c.yards["a"].via == "main"


def test_the_main_yard_routes_only_between_yards_on_its_allow_list() -> None:
    net = LaneNet()
    main, a, b, c = lane_of_yards(net, ["a", "b", "c"],
                                  LaneConfig(allow=frozenset({"a", "b"})))
    a.transmit({"n": 1}, to="b")
    c.transmit({"n": 2}, to="b")
    a.transmit({"n": 3}, to="d")
    a.transmit({"n": 4}, to="main")
    net.settle()
    assert [m.body for m in net.received(b)] == [{"n": 1}]
    assert [m.body for m in net.received(main)] == [{"n": 4}]
    assert main.stats.dropped[Drop.REFUSED] == 1
    assert main.stats.dropped[Drop.UNKNOWN_DESTINATION] == 1
    assert "c" not in main.yards


def test_a_page_for_another_yard_is_dropped_by_a_yard_that_is_not_main() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.add_yard("c", path=b.path)  # misdirected: c's pages land on b's socket
    a.transmit({"n": 1}, to="c")
    net.settle()
    assert net.received(b) == []
    assert b.stats.dropped[Drop.WRONG_DESTINATION] == 1


def test_garbage_is_dropped_and_counted_never_raised() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    b.receive_datagram(b"\x00garbage", a.path, net.now)
    b.receive_datagram(b"ri RAET\nvn 0\n\nnope", a.path, net.now)
    header = "ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi " + a.local.yard_session
    b.receive_datagram((header + "\nbi 1\npn 0000\npc 0001\n\n[1,2]").encode(), a.path, net.now)
    b.receive_datagram((header + "\nbi 2\npn 0000\npc 0001\n\n{bad").encode(), a.path, net.now)
    b.receive_datagram(b"ri RAET\nvn 0\npk 0\nsn b\ndn b\nsi " + b"0" * 18
                       + b"\nbi 1\npn 0000\npc 0001\n\n", a.path, net.now)
    a.transmit({"n": 1}, to="b")
    net.settle()
    # a page naming a but sent from some other socket
    b.receive_datagram(net.wire[-1][0], "/elsewhere/lane.x.uxd", net.now)
    assert b.stats.dropped[Drop.MALFORMED] == 2
    assert b.stats.dropped[Drop.BAD_BODY] == 2
    assert b.stats.dropped[Drop.OWN_NAME] == 1
    assert b.stats.dropped[Drop.ADDRESS_MISMATCH] == 1
    assert [m.body for m in net.received(b)] == [{"n": 1}]


def test_commands_that_break_the_rules_raise_local_protocol_errors() -> None:
    net = LaneNet()
    a = net.yard("a")
    with pytest.raises(LocalProtocolError):
        a.transmit({"n": object()}, to="b")
    with pytest.raises(LocalProtocolError):
        a.transmit([1, 2], to="b")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        a.add_yard("a")
    with pytest.raises(LocalProtocolError):
        a.add_yard("has space")
    with pytest.raises(LocalProtocolError):
        net.yard("x", lane="dotted.lane")


def test_a_page_naming_no_possible_yard_is_dropped_not_raised() -> None:
    net = LaneNet()
    main = net.yard("main", main=True)
    for source, destination in (("", ""), ("x/y", "main"), ("a", ""), ("a", "p/q")):
        page = (b"ri RAET\nvn 0\npk 0\nsn " + source.encode() + b"\ndn "
                + destination.encode() + b"\nsi " + b"0" * 18 + b"\nbi 1\npn 0000\npc 0001\n\n")
        main.receive_datagram(page, "/lanes/lane.a.uxd", net.now)
    assert main.stats.dropped[Drop.MALFORMED] == 2
    assert main.stats.dropped[Drop.UNKNOWN_DESTINATION] == 2
    assert set(main.yards) == {"a"}


def test_repeated_messages_between_known_yards_arrive_whole_and_in_order() -> None:
    net = LaneNet()
    a, b = net.yard("a", config=LaneConfig(coalesce=False)), net.yard("b")
    for number in range(50):
        a.transmit({"n": number, "text": "é" * number}, to="b", now=net.now)
        net.settle()
    got = net.received(b)
    assert [event.body for event in got] == [{"n": n, "text": "é" * n} for n in range(50)]
    assert b.binder.stats.messages == b.stats.messages_received == 50
