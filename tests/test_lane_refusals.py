"""A busy yard refusing pages mid-round: every message still arrives once and in order,
and the sender's counters say exactly what the kernel took."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lane import LaneConfig, events
from tests.lanekit import LaneNet

CONFIG = LaneConfig(busy_retry=0.002, max_retry=0.01, unreachable_after=60.0,
                    outbox_limit=64, pages_per_round=32)
SIZES = st.lists(st.sampled_from([10, 100, 1_000, 70_000, 150_000]), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(SIZES, st.integers(1, 12))
def test_refused_pages_are_resent_and_the_counters_match_what_was_taken(
        sizes: list[int], capacity: int) -> None:
    net = LaneNet()
    sender, receiver = net.yard("sender", config=CONFIG), net.yard("receiver")
    net.capacity[receiver.path] = capacity
    for number, size in enumerate(sizes):
        sender.transmit({"n": number, "pad": "x" * size}, to="receiver", now=net.now)
    net.run_until(lambda: len(net.received(receiver)) == len(sizes))
    net.settle()
    got = net.received(receiver)
    assert [event.body["n"] for event in got] == list(range(len(sizes)))
    assert all(isinstance(event, events.MessageReceived) for event in got)
    taken = [data for data, source, _ in net.wire if source == sender.path]
    assert sender.stats.datagrams_sent == len(taken)
    assert sender.stats.bytes_sent == sum(len(data) for data in taken)
    assert sender.stats.messages_sent == len(sizes)
    assert sender.get_timer() is None
    assert sender.datagrams_to_send(net.now) == []


def test_a_refusal_in_the_middle_of_a_round_of_one_page_books_keeps_their_order() -> None:
    net = LaneNet()
    sender, receiver = net.yard("sender", config=CONFIG), net.yard("receiver")
    net.capacity[receiver.path] = 5
    for number in range(40):
        sender.transmit({"n": number}, to="receiver", now=net.now)
    net.flush()
    assert sender.stats.send_failures == 1  # later refusals this round count with the first
    assert sender.stats.datagrams_sent == 5
    net.run_until(lambda: len(net.received(receiver)) == 40)
    assert [event.body["n"] for event in net.received(receiver)] == list(range(40))
