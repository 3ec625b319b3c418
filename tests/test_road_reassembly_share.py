"""One remote's share of the reassembly room (review r MEDIUM 7): no allowed remote holds
more than ``max_reassembly_share`` of ``max_reassembly_bytes``, in either mode, and when the
totals are full a newcomer's message takes the place of the oldest RAET-mode partial message
of the remote holding the most, instead of being refused (docs/security.md)."""

from __future__ import annotations

import dataclasses

import pytest

from raetlike.errors import LocalProtocolError
from raetlike.wire.kinds import PacketKind
from raetlike.wire.packet import pack_packet, parse_packet
from road import events
from road.config import RoadConfig
from road.stack import LocalEstate, RoadStack
from road.stats import Drop
from tests.roadkit import MAIN, MINION, OTHER, Pair, Sent, allowed_pair, make_pair
from tests.simlink import Address
from tests.test_road_fast_hostile import _feed as _feed_fast
from tests.test_road_fast_hostile import _flows, _frame, _sealed

FOURTH: Address = ("127.0.0.1", 7533)


def _estate(pair: Pair, address: Address, name: str) -> RoadStack:
    """One more RAET-mode estate at ``address``, joined and allowed by main."""
    stack = RoadStack(LocalEstate(name), RoadConfig(fast=False))
    pair.net.add(address, stack)
    stack.join(MAIN, now=pair.net.now)
    pair.run_until(lambda: bool(pair.events(address, events.Allowed)))
    return stack


def _hog(pair: Pair, stack: RoadStack, address: Address, first_tid: int, messages: int, *,
         segments: int = 9) -> None:
    """``stack`` (allowed, signing with its own key) sends the first ``segments`` segments of
    ``messages`` messages of 60 segments each, whose tails never come."""
    start = len(pair.wire)
    stack.transmit(b"t" * 5000, "main", now=pair.net.now)
    pair.net.run_for(1)
    template = next(s for s in pair.wire[start:] if s.source == address
                    and s.head.packet_kind == PacketKind.MESSAGE and s.head.segment_count > 1)
    chunk = parse_packet(template.data).coat
    for k in range(messages):
        for n in range(segments):
            head = dataclasses.replace(
                template.head, transaction_id=first_tid + k, segment_number=n, segment_count=60,
                message_length=60 * len(chunk), flags=template.head.flags & ~4)  # no wait
            pair.net.inject(pack_packet(head, chunk, stack.local.signing_key), address, MAIN)
    pair.net.run_for(0.5)


def _delivered_from(pair: Pair, name: str) -> bool:
    return any(e.remote == name for e in pair.events(MAIN, events.MessageReceived))


def test_one_remote_holds_at_most_its_share_and_others_messages_get_through() -> None:
    """Before: the hog held 299,461 of 300,000 bytes and good's 20 kB message was refused
    (hundreds of REASSEMBLY_FULL drops), not delivered in 10 s."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_reassembly_bytes=300_000))
    pair.allow()
    good = _estate(pair, OTHER, "good")
    _hog(pair, pair.minion, MINION, 5000, 40)
    partials = pair.main._partials
    assert partials.bytes <= 75_000  # the hog's share (before: 299,461)
    assert partials.held[pair.main.remote("minion").uid] == partials.bytes
    good.transmit(b"g" * 20_000, "main", now=pair.net.now)
    pair.net.run_for(10)
    assert _delivered_from(pair, "good")


def test_when_the_bytes_are_full_the_largest_holders_oldest_partial_is_evicted() -> None:
    """Two hogs, each within a half share, fill the total: a third remote's message takes
    the place of the largest holder's oldest partial.  Before: refused, never delivered."""
    config = RoadConfig(fast=False, max_reassembly_bytes=300_000, max_reassembly_share=0.5)
    pair = make_pair(main_config=config)
    pair.allow()
    second = _estate(pair, OTHER, "second")
    good = _estate(pair, FOURTH, "good")
    _hog(pair, pair.minion, MINION, 5000, 40)
    _hog(pair, second, OTHER, 5000, 40)
    partials = pair.main._partials
    assert partials.bytes > 300_000 - 2 * 1000  # full, each hog at its half
    good.transmit(b"g" * 20_000, "main", now=pair.net.now)
    pair.net.run_for(10)
    assert _delivered_from(pair, "good")
    assert all(held <= 150_000 for held in partials.held.values())
    assert pair.main.stats.dropped[Drop.REASSEMBLY_EVICTED] > 0
    assert partials.bytes <= 300_000
    pair.net.run_for(config.reassembly_timeout + 1)  # the hogs' partials time out
    assert (partials.count, partials.bytes, partials.held, partials.evictable) == (0, 0, {}, {})


def test_when_the_open_messages_are_full_the_largest_holders_oldest_is_evicted() -> None:
    """``max_open_messages_total`` is full of one remote's partials (8 here, 8 remotes of
    1,024 by default): a newcomer's message evicts one.  Before: refused, never delivered."""
    config = RoadConfig(fast=False, max_open_messages_total=8)
    pair = make_pair(main_config=config)
    pair.allow()
    good = _estate(pair, OTHER, "good")
    _hog(pair, pair.minion, MINION, 5000, 8, segments=2)
    partials = pair.main._partials
    assert partials.count == 8
    good.transmit(b"g" * 20_000, "main", now=pair.net.now)
    pair.net.run_for(10)
    assert _delivered_from(pair, "good")
    assert pair.main.stats.dropped[Drop.REASSEMBLY_EVICTED] > 0
    assert partials.count <= 8


def test_an_evicted_honest_message_is_still_delivered() -> None:
    """The largest holder's message, evicted mid-way for a newcomer's, still arrives: its
    sender's next packets are answered (a stale nack, then sent again) and it completes."""
    config = RoadConfig(fast=False, max_reassembly_bytes=170_000, max_reassembly_share=0.75)
    pair = make_pair(main_config=config)
    pair.allow()
    good = _estate(pair, OTHER, "good")
    partials = pair.main._partials
    minion = pair.main.remote("minion").uid
    blocked = [False]

    def last_or_blocked(sent: Sent) -> bool:  # its tail held back while good sends
        if sent.source != MINION or sent.head.packet_kind != PacketKind.MESSAGE:
            return False
        if sent.head.segment_number == sent.head.segment_count - 1 and not blocked[0]:
            blocked[0] = True  # from the first try of its last segment on, until released
        return blocked[0]

    pair.net.drop = last_or_blocked
    pair.minion.transmit(b"m" * 120_000, "main", now=pair.net.now)
    pair.run_until(lambda: blocked[0] and partials.held.get(minion, 0) > 110_000)
    good.transmit(b"g" * 60_000, "main", now=pair.net.now)
    pair.run_until(lambda: _delivered_from(pair, "good"), timeout=10)
    assert pair.main.stats.dropped[Drop.REASSEMBLY_EVICTED] > 0
    assert partials.held.get(minion, 0) == 0  # its partial went to good
    pair.net.drop = None
    pair.run_until(lambda: _delivered_from(pair, "minion"), timeout=60)
    pair.net.run_for(config.reassembly_timeout + 1)
    assert (partials.count, partials.bytes, partials.by_remote, partials.held,
            partials.evictable) == (0, 0, {}, {}, {})


def test_a_fast_mode_remote_holds_at_most_its_share() -> None:
    """Fast mode's chunks are charged to the same per-remote share.  Before: one remote's
    never-finished chunks held the whole max_reassembly_bytes."""
    limit = 1 << 20
    pair = allowed_pair(main_config=RoadConfig(fast=True, max_reassembly_bytes=limit),
                        minion_config=RoadConfig(fast=True))
    _flows(pair, 5)
    total = 4 * limit
    chunks = -(-total // 1000)
    refused, number, index = 0, 10**6, 0
    while refused < 5:
        full = pair.main.stats.dropped[Drop.REASSEMBLY_FULL]
        _feed_fast(pair, _sealed(pair, _frame(number, total, index, chunks, b"z" * 1000)))
        index += 1
        if pair.main.stats.dropped[Drop.REASSEMBLY_FULL] > full:
            refused += 1
    partials = pair.main._partials
    assert partials.bytes <= limit // 4  # its share (before: the whole limit)
    assert partials.held[pair.main.remote("minion").uid] == partials.bytes
    assert partials.share() == limit // 4
    _flows(pair)


@pytest.mark.parametrize("share", [0, 0.0, -0.5, 1.5, float("nan")])
def test_the_share_must_be_above_0_and_at_most_1(share: float) -> None:
    with pytest.raises(LocalProtocolError):
        RoadConfig(max_reassembly_share=share)


def test_a_partial_refused_its_first_bytes_is_freed_after_the_reassembly_timeout() -> None:
    """A message opened whose first segment found no room held its place among the open
    messages for ever (its timeout was armed by new bytes only): found here, and reached
    at will once a remote's share is full."""
    pair = make_pair(main_config=RoadConfig(fast=False, max_reassembly_bytes=40_000))
    pair.allow()
    _hog(pair, pair.minion, MINION, 5000, 40, segments=2)  # 66 kB, past the bound
    partials = pair.main._partials
    assert partials.count == 40
    pair.net.run_for(pair.main.config.reassembly_timeout + 1)
    assert (partials.count, partials.bytes, partials.by_remote) == (0, 0, {})
    assert pair.main.stats.dropped[Drop.REASSEMBLY_TIMEOUT] == 40
