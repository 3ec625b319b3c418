"""Relay estates on the simulated road: a top main, relays (mains that joined it), leaves.

Requests go down by the names relays advertise in their keepalives and come back
along their route; events go up to the top and down to subscribers; a leaf that
claims to be a main, or to have others below it, is not believed; a loop of relays
is cut by the hop limit and counted.
"""

from __future__ import annotations

from typing import Any

from raetlike.bus import BusConfig, BusMessage, Errno, MessageType, Request, Rolemask, encode
from raetlike.hosting import EstateBus
from road import events as road_events
from tests.relaykit import make_tree, two_relays


def test_the_relay_takes_the_main_it_joined_as_upstream_and_the_top_trusts_it() -> None:
    tree = make_tree(two_relays())
    assert tree.node("r1").upstream == "top"
    assert tree.node("l1a").upstream == "r1"
    assert tree.node("top").upstream is None
    assert tree.stacks["top"].remote("r1").main  # a main, but it joined us: not upstream
    assert tree.node("top").route_to("l1a") == "r1"
    assert tree.node("top").route_to("l2a") == "r2"
    assert tree.node("r1").route_to("l2a") is None  # up, not down


def test_a_request_from_the_top_reaches_a_leaf_through_its_relay_and_the_answer_returns(
        ) -> None:
    tree = make_tree(two_relays())
    seen: list[Request] = []

    def record(request: Request) -> Any:
        seen.append(request)
        return {"leaf": "l2a", "got": request.payload}

    tree.node("l2a").serve("probe.", record)
    reply = tree.rpc("top", "l2a", "probe.ping", 7)
    assert reply.errno is Errno.OK
    assert reply.payload == {"leaf": "l2a", "got": 7}
    assert reply.userid == "l2a"  # the trusted relay kept the leaf's stamp
    assert [(r.userid, r.rolemask) for r in seen] == [("top", Rolemask.OWNER)]  # from above
    assert tree.node("r2").stats.sent >= 2  # the relay carried both ways


def test_a_leaf_reaches_a_leaf_under_another_relay_through_the_top() -> None:
    tree = make_tree(two_relays())
    reply = tree.rpc("l1a", "l2a", "echo.ping", "across")
    assert (reply.errno, reply.payload, reply.userid) == (Errno.OK, "across", "l2a")


def test_a_leaf_event_reaches_the_top_and_the_subscribed_leaves() -> None:
    tree = make_tree(two_relays())
    at_top: list[BusMessage] = []
    at_leaf: list[BusMessage] = []
    tree.node("top").subscribe("news.", at_top.append, now=tree.net.now)
    tree.node("l2a").subscribe("news.", at_leaf.append, now=tree.net.now)
    tree.net.run_for(3.0)  # the leaf's subscription climbs to the top (keepalives: 1 s)
    tree.node("l1a").publish("news.flash", {"n": 1}, now=tree.net.now)
    tree.run_until(lambda: bool(at_top) and bool(at_leaf))
    tree.net.run_for(3.0)
    assert [(e.topic, e.payload, e.userid) for e in at_top] == [("news.flash", {"n": 1}, "l1a")]
    assert [(e.topic, e.userid) for e in at_leaf] == [("news.flash", "l1a")]


def test_an_event_from_the_top_goes_down_to_leaves_that_subscribed_only() -> None:
    tree = make_tree(two_relays())
    got: dict[str, list[BusMessage]] = {name: [] for name in ("l1a", "l1b", "l2a")}
    for name in ("l1a", "l2a"):
        tree.node(name).subscribe("cfg.", got[name].append, now=tree.net.now)
    tree.net.run_for(3.0)
    tree.node("top").publish("cfg.reload", None, now=tree.net.now)
    tree.run_until(lambda: bool(got["l1a"]) and bool(got["l2a"]))
    tree.net.run_for(2.0)
    assert [len(got[name]) for name in ("l1a", "l1b", "l2a")] == [1, 0, 1]


def test_a_leaf_claiming_to_be_a_main_with_estates_below_is_not_believed() -> None:
    parents = {**two_relays(), "evil": "r1"}
    tree = make_tree(parents, mains=frozenset({"evil"}))
    relay = tree.node("r1")
    assert tree.stacks["r1"].remote("evil").main  # it said so in its join
    assert relay.upstream == "top"
    # it claims the other relay's leaf and the top as names below it
    claim = encode(BusMessage(MessageType.KEEPALIVE, below=("l2a", "top", "ghost")))
    tree.stacks["evil"].transmit(claim, to="r1", now=tree.net.now)
    forged = encode(BusMessage(MessageType.EVENT, "news.flash", "forged", sequence=1,
                               epoch=5, userid="top", role="top", rolemask=Rolemask.OWNER))
    at_top: list[BusMessage] = []
    tree.node("top").subscribe("news.", at_top.append, now=tree.net.now)
    tree.net.run_for(3.0)
    tree.stacks["evil"].transmit(forged, to="r1", now=tree.net.now)
    tree.run_until(lambda: bool(at_top))
    assert relay.stats.routes_refused >= 3
    assert relay.route_to("ghost") is None
    assert relay.route_to("l2a") is None
    assert relay.stats.restamped >= 1
    assert [(e.userid, e.rolemask) for e in at_top] == [("evil", Rolemask.USER)]
    reply = tree.rpc("top", "l2a", "echo.ping", 1)
    assert (reply.errno, reply.userid) == (Errno.OK, "l2a")


def test_an_untrusted_relay_speaks_as_itself_and_routes_nothing_down() -> None:
    tree = make_tree(two_relays(), trusted={"top": frozenset()}, link=False)
    tree.run_until(tree.linked)
    tree.net.run_for(3.0)
    top = tree.node("top")
    assert top.route_to("l1a") is None
    assert top.stats.routes_refused > 0
    assert tree.rpc("top", "l1a", "echo.ping").errno is Errno.EHOSTUNREACH
    served: list[Request] = []
    tree.node("top").serve("who.", served.append)
    assert tree.rpc("l1a", "top", "who.am").errno is Errno.OK
    assert [(r.userid, r.rolemask) for r in served] == [("r1", Rolemask.USER)]


def test_a_trusted_relay_never_speaks_as_the_top_owner() -> None:
    tree = make_tree(two_relays())
    served: list[Request] = []
    tree.node("top").serve("admin.", served.append,
                           roles=frozenset({"operator"}))
    reply = tree.rpc("r1", "top", "admin.stop")
    assert reply.errno is Errno.EPERM  # OWNER lowered to USER at the top: role checked
    assert served == []


def test_a_loop_of_relays_is_cut_by_the_hop_limit_and_counted() -> None:
    loop = {"a": "b", "b": "c", "c": "a"}  # each joined the next: three mains in a ring
    everyone = frozenset(loop)
    tree = make_tree({"top": None, **loop}, mains=everyone,
                     trusted=dict.fromkeys(loop, everyone), link=False)
    tree.run_until(lambda: all(tree.node(n).upstream == up for n, up in loop.items()))
    tree.net.run_for(3.0)
    reply = tree.rpc("a", "*any*", "nobody.home")
    assert reply.errno is Errno.EPROTO
    tree.node("a").publish("spin.round", None, now=tree.net.now)
    tree.net.run_for(5.0)
    cut = sum(tree.node(n).stats.too_many_hops for n in loop)
    assert cut >= 2  # the request and the event, each dropped once past 16 hops
    sent = tree.net.counters.sent
    tree.net.run_for(5.0)
    assert tree.net.counters.sent - sent < 200  # quiet again: keepalives and presence only
    assert all(isinstance(tree.buses[n], EstateBus) for n in loop)


def test_a_leaf_that_moved_to_another_relay_is_reached_through_it() -> None:
    tree = make_tree({**two_relays(), "mover": "r1"})
    top = tree.node("top")
    assert top.route_to("mover") == "r1"
    tree.net.blocked.add(tree.addresses["mover"])  # its host is gone from r1's side ...
    tree.run_until(lambda: top.route_to("mover") is None)  # r1 stops advertising a lost link
    assert tree.node("r1").route_to("mover") == "mover"  # (still a link there: lost)
    tree.add("mover", "r2")  # ... and comes back under r2, at a new address
    tree.run_until(lambda: top.route_to("mover") == "r2")
    reply = tree.rpc("top", "mover", "echo.ping", "here")
    assert (reply.errno, reply.payload, reply.userid) == (Errno.OK, "here", "mover")


def test_routes_below_a_lost_relay_move_to_the_relay_that_has_them_now() -> None:
    tree = make_tree({**two_relays(), "mover": "r1"})
    top = tree.node("top")
    tree.net.blocked.add(tree.addresses["r1"])  # the whole relay goes silent
    tree.run_until(lambda: top.is_lost("r1"))
    assert top.route_to("mover") == "r1"  # held, but through a lost link
    tree.add("mover", "r2")
    tree.run_until(lambda: top.route_to("mover") == "r2")
    assert tree.rpc("top", "mover", "echo.ping").errno is Errno.OK
    assert tree.rpc("top", "l1a", "echo.ping").errno is Errno.EHOSTUNREACH  # still via r1


def test_a_removed_remote_takes_its_link_and_routes_with_it() -> None:
    tree = make_tree(two_relays())
    removed = road_events.RemoteRemoved("r1", "an operator removed it")
    assert not tree.buses["top"].handle_road_event(removed, tree.net.now)
    top = tree.node("top")
    assert "r1" not in top.links
    assert top.route_to("l1a") is None
    assert top.route_to("l2a") == "r2"


def test_a_hot_leaf_under_two_relays_is_reached_through_either_and_heard_once() -> None:
    tree = make_tree(two_relays())
    top = tree.node("top")
    tree.add_hot("twin", ("r1", "r2"))
    tree.run_until(lambda: len(tree.node("twin").upstreams) == 2
                   and top.route_to("twin") is not None)
    holder = top.route_to("twin")
    assert tree.rpc("top", "twin", "echo.ping").errno is Errno.OK
    at_top: list[BusMessage] = []
    top.subscribe("news.", at_top.append, now=tree.net.now)
    tree.node("twin").publish("news.both", None, now=tree.net.now)  # up both relays
    tree.net.run_for(2.0)
    assert len(at_top) == 1
    assert top.stats.duplicates >= 1  # the copy through the other relay
    assert holder is not None
    tree.net.blocked.add(tree.addresses[holder])  # the relay holding the route goes silent
    other = "r2" if holder == "r1" else "r1"
    tree.run_until(lambda: top.route_to("twin") == other)
    reply = tree.rpc("top", "twin", "echo.ping", "again")
    assert (reply.errno, reply.payload) == (Errno.OK, "again")


def test_names_below_are_bounded_by_max_routes_and_the_rest_counted() -> None:
    small = BusConfig(request_timeout=30.0, retry_interval=2.0, keepalive_interval=1.0,
                      keepalive_timeout=3.0, max_routes=2)
    tree = make_tree(two_relays(), config=small, link=False)
    tree.run_until(tree.linked)
    tree.net.run_for(2.0)
    top = tree.node("top")
    assert len([n for n in ("l1a", "l1b", "l2a") if top.route_to(n) is not None]) == 2
    refused = top.stats.routes_refused
    assert refused >= 1
    flood = encode(BusMessage(MessageType.KEEPALIVE, below=tuple(f"x{i}" for i in range(5000))))
    tree.stacks["r1"].transmit(flood, to="top", now=tree.net.now)  # a trusted relay, bounded
    tree.net.run_for(0.5)  # (before r1's next keepalive puts its true names back)
    routed = [name for name in (*(f"x{i}" for i in range(5000)), "l1a", "l1b", "l2a")
              if top.route_to(name) is not None]
    assert len(routed) == 2  # its new list replaced its old one: still two routes in all
    assert top.stats.routes_refused >= refused + 4998
