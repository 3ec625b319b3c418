"""The stack's timer heaps stay bounded by what is pending, not by the traffic (review r
LOW 10: each received segment pushed one entry on each heap, kept until due 30 s later)."""

from __future__ import annotations

from road import events
from road.config import RoadConfig
from road.stats import Drop
from tests.roadkit import MAIN, allowed_pair


def test_timer_heaps_hold_entries_per_pending_timer_not_per_segment() -> None:
    """Before: 100 messages of 70 segments (7,000 segments) left 7,089 entries on the
    transactions' heap and 7,004 on the remotes'."""
    pair = allowed_pair()
    net, main = pair.net, pair.main
    count = 100
    for _ in range(count):
        pair.minion.transmit(b"x" * 60_000, "main", now=net.now)
    peak_transactions = peak_remotes = 0
    while len(pair.events(MAIN, events.MessageReceived)) < count:
        assert net.now < 600
        net.step()
        peak_transactions = max(peak_transactions, len(main._transaction_timers))
        peak_remotes = max(peak_remotes, len(main._remote_timers))
    assert main.stats.segments_received >= 7000
    assert peak_transactions <= 2 * RoadConfig().max_messages_in_flight + 64
    assert peak_remotes <= 2 + 64


def test_timeouts_and_redos_still_fire_when_moved_later() -> None:
    """A deadline moved later is not pushed: the early wake pushes it then.  A partial
    message whose tail never comes is still freed after reassembly_timeout, though every
    segment moved its timeout later and its redos came in between (a guard of the change,
    passing on the old code too)."""
    pair = allowed_pair()
    net, main = pair.net, pair.main
    pair.minion.transmit(b"y" * 60_000, "main", now=net.now)
    net.drop = lambda sent: sent.head.segment_number > 20  # the tail never comes
    pair.run_until(lambda: main._partials.count == 1)
    net.run_for(main.config.reassembly_timeout + 1)  # (its sender reopens it later)
    assert main.stats.dropped[Drop.REASSEMBLY_TIMEOUT] == 1
    net.drop = None
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 1, timeout=120)
