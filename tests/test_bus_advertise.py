"""A bus node tells upstream what is subscribed at or below it, counted as links change.

A main of 2,000 estates walked every link on each keepalive (3.6 M calls in a
253 s run); the prefixes below are now counted as links come, go, change what
they subscribe to, or move above.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from raetlike.bus import BusConfig, BusMessage, BusNode, MessageType, encode
from tests.test_bus_upstreams import FakeLink

PREFIXES = ("ev.", "ev.a", "job.", "log.", "x")


def _keepalive(*subscriptions: str) -> dict[str, Any]:
    return encode(BusMessage(MessageType.KEEPALIVE, subscriptions=subscriptions))


def _told(up: FakeLink) -> list[tuple[str, ...]]:
    return [m.subscriptions for m in up.of(MessageType.KEEPALIVE)]


def test_what_upstream_is_told_matches_the_union_over_random_link_changes() -> None:
    chooser = random.Random(17)
    node = BusNode("relay")
    up = FakeLink("up")
    node.add_link(up, upstream=True)
    below: dict[str, frozenset[str]] = {}  # the model: links below and their prefixes
    own: set[str] = set()
    callbacks: dict[str, Any] = {}
    serial = 0
    expected: frozenset[str] = frozenset()
    for _ in range(3000):
        before = len(_told(up))
        action = chooser.random()
        if action < 0.2 or not below:
            serial += 1
            name = f"leaf{serial}"
            node.add_link(FakeLink(name))
            below[name] = frozenset()
        elif action < 0.3:
            name = chooser.choice(sorted(below))
            node.remove_link(name)
            del below[name]
        elif action < 0.35:
            name = chooser.choice(sorted(below))
            node.set_upstream(name, upstream=False)  # a standby main now: not below
            del below[name]
        elif action < 0.45:
            prefix = chooser.choice(PREFIXES)
            if prefix in own:
                node.unsubscribe(prefix, callbacks.pop(prefix))
                own.discard(prefix)
            else:
                callbacks[prefix] = lambda _event: None
                node.subscribe(prefix, callbacks[prefix])
                own.add(prefix)
        else:
            name = chooser.choice(sorted(below))
            wanted = frozenset(chooser.sample(PREFIXES, chooser.randint(0, 3)))
            node.receive(name, _keepalive(*wanted), 0.0)
            below[name] = wanted
        now_wanted = frozenset(own).union(*below.values())
        if now_wanted != expected:
            assert len(_told(up)) >= 1
            assert _told(up)[-1] == tuple(sorted(now_wanted))
            expected = now_wanted
        else:
            assert len(_told(up)) == before
    assert serial > 100


def test_a_keepalive_from_a_link_below_walks_no_other_link() -> None:
    node = BusNode("main")
    up = FakeLink("up")
    node.add_link(up, upstream=True)
    for index in range(2000):
        node.add_link(FakeLink(f"estate{index}"))

    class CountingLinks(dict[str, Any]):
        walks = 0

        def items(self) -> Any:
            CountingLinks.walks += 1
            return super().items()

        def values(self) -> Any:
            CountingLinks.walks += 1
            return super().values()

    node._links = CountingLinks(node._links)
    for index in range(2000):
        node.receive(f"estate{index}", _keepalive("ev."), 0.0)
    # one walk: the keepalive that tells upstream of the first estate's "ev."
    assert CountingLinks.walks <= 1
    assert _told(up)[-1] == ("ev.",)
    for index in range(1999):
        node.remove_link(f"estate{index}")
    assert _told(up)[-1] == ("ev.",)
    node.remove_link("estate1999")
    assert _told(up)[-1] == ()


def test_nodes_started_together_spread_their_keepalives_over_the_interval() -> None:
    sent_at: list[float] = []
    for index in range(200):
        node = BusNode(f"e{index}", now=0.0)
        up = FakeLink("up")
        node.add_link(up, upstream=True, now=0.0)
        first = node.get_timer()
        assert first is not None
        assert 5.0 * 0.5 <= first <= 5.0  # BusConfig's 5 s interval
        node.handle_timer(first)
        assert node.get_timer() == first + 5.0  # an interval apart from then on
        sent_at.append(first)
    assert sum(1 for at in sent_at if at < 3.75) > 60  # not all in one instant
    assert sum(1 for at in sent_at if at >= 3.75) > 60
    assert len(set(sent_at)) > 190


def test_a_main_of_many_links_spreads_its_keepalives_to_them_over_the_interval() -> None:
    # A main of 5,000 estates sent all its keepalives in one tick: 5,000 fast datagrams at
    # once to workers that then answered presence checks late (docs/relay.md).  Each link
    # now has its own round, an interval apart, the first fixed by the two names.
    node = BusNode("hota", now=0.0)
    links = [FakeLink(f"e{index}") for index in range(1000)]
    for link in links:
        node.add_link(link, now=0.0)
    counts: list[int] = []
    interval = node.config.keepalive_interval
    for step in range(1, 401):  # three intervals, in steps of 1/40 of an interval
        before = sum(len(link.of(MessageType.KEEPALIVE)) for link in links)
        node.handle_timer(step * interval / 40)
        counts.append(sum(len(link.of(MessageType.KEEPALIVE)) for link in links) - before)
    assert max(counts) < 100  # was 1,000 in one step; 1,000 / 20 = 50 expected
    # (every link one keepalive an interval, the first in the second half of the first)
    assert sum(counts[:20]) == 0
    for rounds in range(1, 10):
        done = sum(counts[: 20 + 40 * rounds])
        assert done == 1000 * rounds, (rounds, done)


def test_a_link_removed_and_added_again_gets_one_round_not_two() -> None:
    node = BusNode("main", now=0.0)
    link = FakeLink("e1")
    for _ in range(50):
        node.add_link(link, now=0.0)
        node.remove_link("e1")
    node.add_link(link, now=0.0)
    node.handle_timer(10 * node.config.keepalive_interval)
    assert len(link.of(MessageType.KEEPALIVE)) == 1  # (late: one, not one per stale entry)
    assert len(node._keepalive_heap) <= 2 * len(node._keepalive_due) + 16


def test_a_stalled_loop_does_not_bring_the_keepalives_into_step() -> None:
    """Nodes whose rounds all fell due during a 2 s stall keep their own phases after it
    (the round is kept on the node's grid, not restarted from the late visit)."""
    nodes = []
    for index in range(200):
        node = BusNode(f"e{index}", now=0.0)
        node.add_link(FakeLink("up"), upstream=True, now=0.0)
        nodes.append(node)
    phases = {node._keepalive_heap[0][0] for node in nodes}
    for node in nodes:  # every first round falls due in the stall; the loop comes back at 6 s
        node.handle_timer(6.0)
    after = [node._keepalive_heap[0][0] for node in nodes]
    assert len(set(after)) > 190  # not in step
    assert {at - 5.0 for at in after} == phases  # each on its grid, the missed round skipped
    for node in nodes:  # a stall of several intervals skips the rounds it missed
        node.handle_timer(23.0)
    later = [node._keepalive_heap[0][0] for node in nodes]  # (get_timer: silence checks too)
    assert all(23.0 < at <= 28.0 for at in later)
    assert {round(at % 5.0, 6) for at in later} == {round(at % 5.0, 6) for at in phases}


def test_a_keepalive_interval_of_zero_or_less_is_refused() -> None:
    """Set to 0 a round divided by zero; below 0 it looped forever (review of s10k)."""
    for value in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="keepalive_interval"):
            BusConfig(keepalive_interval=value)
    config = BusConfig()
    for name in ("request_timeout", "retry_interval", "keepalive_timeout"):
        for value in (0, -1.0, math.nan):
            with pytest.raises(ValueError, match=name):
                setattr(config, name, value)
        setattr(config, name, math.inf)  # never (a durable estate's bus does not resend)
    config.route_delay = 0  # (no delay is a delay)
