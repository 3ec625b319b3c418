"""Fuzzing the stacks' ``receive_datagram`` in every state: never an exception, drops counted.

Road stacks (a main and a minion on the simulated link of tests/simlink.py,
virtual clock) are brought to a state — fresh, joining, joined, allowed, or
in the middle of a segmented message — and then fed arbitrary bytes, verbatim
replays of their own earlier traffic, and mutations of it, from either
estate's address or a stranger's.  Lane stacks get the same with pages.  After
the garbage, the timers keep running and the pair must still carry a message
exactly once.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lane import LaneStack
from lane import events as lane_events
from lane.coalesce import read_batch_head, read_grant
from lane.stats import Drop as LaneDrop
from raetlike.errors import PacketError
from raetlike.wire import parse_packet
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import paginate, parse_page
from road import events
from road._fast_wire import is_fast
from road.stack import RoadStack
from road.stats import Drop
from tests.lanekit import LaneNet
from tests.roadkit import MAIN, MINION, OTHER, Pair, make_pair, numbered
from tests.simlink import Address
from tests.test_fuzz_wire import mutated

EXAMPLES = int(os.environ.get("RAETLIKE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ROAD_STATES = ("fresh", "joining", "joined", "allowed", "messaging")
FAST_LOOKALIKE = bytes.fromhex("b20298") + b"\x98" * 24
"""27 bytes with the fast-mode prefix: atheris found the oracle taking it for a packet."""
ADDRESSES = (MAIN, MINION, OTHER)


def road_pair(state: str) -> Pair:
    """A main and a minion brought to ``state`` on a clean simulated link."""
    pair = make_pair()
    if state == "joining":
        pair.minion.join(MAIN, now=pair.net.now)
        pair.net.step()
    elif state == "joined":
        pair.join()
    elif state in {"allowed", "messaging"}:
        pair.allow()
        for body in numbered(3, size=50):
            pair.minion.transmit(body, to="main", now=pair.net.now)
        pair.minion.transmit({"seq": 3, "pad": "y" * 5000}, to="main", now=pair.net.now)
        pair.main.transmit({"seq": 0, "pad": "z" * 3000}, to="minion", now=pair.net.now)
        if state == "allowed":
            pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 4
                           and len(pair.events(MINION, events.MessageReceived)) == 1)
        else:
            for _ in range(3):
                pair.net.step()
    return pair


def feed_road(stack: RoadStack, data: bytes, source: Address, now: float) -> None:
    """One datagram into ``stack``: no exception, counted, a non-packet counted as malformed.

    Fast-mode frames (raetlike peers) have their own layout; they are only
    held to "no exception, at most one drop".
    """
    received = stack.stats.datagrams_received
    malformed = stack.stats.dropped[Drop.MALFORMED]
    dropped = stack.stats.dropped_total
    stack.receive_datagram(data, source, now)
    assert stack.stats.datagrams_received == received + 1
    assert stack.stats.dropped_total - dropped in {0, 1}
    if is_fast(data):  # a fast-mode frame (its own layout): dropped for any reason, or taken
        return
    try:
        parse_packet(data)
    except PacketError:
        assert stack.stats.dropped[Drop.MALFORMED] == malformed + 1


@st.composite
def road_garbage(draw: st.DrawFn, wire: list[bytes]) -> bytes:
    """Arbitrary bytes, a replay of a datagram on the wire, or a mutation of one."""
    if not wire:
        return draw(st.binary(max_size=400))
    known = st.sampled_from(wire)
    return draw(st.one_of(st.binary(max_size=400), known, mutated(known)))


def _delivered_once(pair: Pair, address: Address) -> None:
    bodies = [repr(e.body) for e in pair.events(address, events.MessageReceived)]
    assert len(bodies) == len(set(bodies)), "a message was delivered twice"


@FUZZ
@given(state=st.sampled_from(ROAD_STATES), data=st.data())
def test_road_stacks_survive_any_datagram_in_any_state(state: str, data: st.DataObject) -> None:
    pair = road_pair(state)
    wire = [sent.data for sent in pair.wire]
    for _ in range(data.draw(st.integers(1, 5), label="datagrams")):
        target = data.draw(st.sampled_from([MAIN, MINION]), label="target")
        source = data.draw(st.sampled_from(ADDRESSES), label="source")
        garbage = data.draw(road_garbage(wire), label="datagram")
        feed_road(pair.stack(target), garbage, source, pair.net.now)
    pair.net.run_for(5.0)  # timers, resends and answers to the garbage: nothing may raise
    _delivered_once(pair, MAIN)
    _delivered_once(pair, MINION)


def test_an_allowed_pair_still_carries_messages_exactly_once_after_a_flood_of_garbage() -> None:
    pair = road_pair("allowed")
    wire = [sent.data for sent in pair.wire]
    strategy = road_garbage(wire)
    fed = 0

    @settings(max_examples=200, database=None, deadline=None)
    @given(garbage=strategy, target=st.sampled_from([MAIN, MINION]),
           source=st.sampled_from(ADDRESSES))
    def flood(garbage: bytes, target: Address, source: Address) -> None:
        nonlocal fed
        feed_road(pair.stack(target), garbage, source, pair.net.now)
        fed += 1

    flood()
    assert fed >= 50
    assert pair.main.stats.dropped_total + pair.minion.stats.dropped_total > 0
    before = len(pair.events(MAIN, events.MessageReceived))
    pair.minion.transmit({"seq": 99, "after": "garbage"}, to="main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) > before, 60.0)
    pair.net.run_for(5.0)
    received = pair.events(MAIN, events.MessageReceived)
    assert [e.body for e in received[before:]] == [{"seq": 99, "after": "garbage"}]
    _delivered_once(pair, MAIN)
    _delivered_once(pair, MINION)


def test_a_short_datagram_with_the_fast_prefix_is_dropped_and_counted_once() -> None:
    pair = road_pair("allowed")
    for stack in (pair.main, pair.minion):
        for source in ADDRESSES:
            feed_road(stack, FAST_LOOKALIKE, source, pair.net.now)
    assert is_fast(FAST_LOOKALIKE)
    assert pair.main.stats.dropped_total + pair.minion.stats.dropped_total == 6


# -- lanes ---------------------------------------------------------------------------


def lane_yards() -> tuple[LaneNet, LaneStack, LaneStack, LaneStack, list[bytes]]:
    """A lane with a main yard and two others that exchanged a few (multi-page) messages.

    Every yard knows the others' paths: a yard learns an unknown yard's path from
    the first page it sends (as RAET does), and the kernel vouches for that path.
    """
    net = LaneNet()
    main = net.yard("manor", main=True)
    alpha = net.yard("alpha")
    beta = net.yard("beta")
    alpha.transmit({"hello": "manor"}, to="manor", now=net.now)
    main.transmit({"hello": "alpha", "pad": "x" * 70_000}, to="alpha", now=net.now)
    alpha.transmit({"hello": "beta"}, to="beta", now=net.now)
    beta.transmit({"hello": "alpha"}, to="alpha", now=net.now)
    net.settle()
    assert len(net.received(alpha)) == 2
    assert len(net.received(beta)) == 1
    wire = [data for data, _, _ in net.wire]
    wire += paginate("alpha", "beta", alpha.local.yard_session, 77,
                     {"pad": "q" * 70_000}, PageKind.MSGPACK)
    return net, main, alpha, beta, wire


def feed_lane(stack: LaneStack, data: bytes, source: str | None, now: float) -> None:
    """One page into ``stack``: no exception, counted; a non-page that is no well-formed
    grant or batch (coalescing) counted as malformed, a well-formed one taken or dropped."""
    stats = stack.stats
    received = stats.datagrams_received
    malformed = stats.dropped[LaneDrop.MALFORMED]
    before = (stats.dropped_total, stats.grants_received, stats.batches_received)
    stack.receive_datagram(data, source, now)
    assert stats.datagrams_received == received + 1
    try:
        parse_page(data)
    except PacketError:
        if read_grant(data) is None and read_batch_head(data) is None:
            assert stats.dropped[LaneDrop.MALFORMED] == malformed + 1
        else:
            assert (stats.dropped_total, stats.grants_received, stats.batches_received) \
                != before, "a grant or batch neither taken nor dropped"
    assert stack.binder.open_books <= stack.binder.max_open_books
    assert stack.binder.buffered_bytes <= stack.binder.max_buffered_bytes


@FUZZ
@given(data=st.data())
def test_lane_stacks_survive_any_page(data: st.DataObject) -> None:
    net, main, alpha, beta, wire = lane_yards()
    stacks = [main, alpha, beta]
    known = st.sampled_from(wire)
    for _ in range(data.draw(st.integers(1, 5), label="pages")):
        target = data.draw(st.sampled_from(stacks), label="target")
        source = data.draw(st.sampled_from([s.path for s in stacks if s is not target]
                                           + ["/elsewhere", None]), label="source")
        page = data.draw(st.one_of(st.binary(max_size=400), known, mutated(known)),
                         label="page")
        feed_lane(target, page, source, net.now)
    for _ in range(20):
        net.step(0.05)
    beta.transmit({"after": "garbage"}, to="alpha", now=net.now)
    net.run_until(lambda: any(e.body == {"after": "garbage"}
                              for e in net.received(alpha)), timeout=5.0)
    assert net.of_type(alpha, lane_events.MessageReceived)
