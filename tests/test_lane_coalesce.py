"""Coalescing between raetlike yards: negotiated by grant, many messages per datagram, the
lane's delivery and backpressure rules kept; RAET yards only ever get pages (issue 16)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lane import Drop, LaneConfig, LaneStack, LocalYard, events
from lane.coalesce import (
    BATCH_MAGIC,
    COALESCING_MARK,
    GRANT_MAGIC,
    batch_head,
    bodies,
    grant,
    read_batch_head,
    read_grant,
)
from raetlike.errors import BackpressureError
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from tests.lanekit import DIRECTORY, LaneNet

RAET_SESSION = "65b1c2d3e4f5a6b7c8"  # as RAET writes one: the hex microsecond clock first


def _is_page(data: bytes) -> bool:
    return data.startswith(b"ri RAET\n")


def _from(net: LaneNet, stack: LaneStack) -> list[bytes]:
    return [data for data, source, _ in net.wire if source == stack.path]


def _stream(net: LaneNet, a: LaneStack, b: LaneStack, count: int) -> list[int]:
    before = len(net.received(b))
    for n in range(count):
        if a.yards.get(b.name) and a.yards[b.name].queued >= 1000:
            net.step()
        a.transmit({"n": n}, to=b.name, now=net.now)
    net.run_until(lambda: len(net.received(b)) >= before + count)
    net.settle()  # and the grant it may have sent lands
    return [event.body["n"] for event in net.received(b)]


def test_a_raetlike_session_id_carries_the_mark_and_a_raet_one_never_does() -> None:
    assert LocalYard("a").yard_session.startswith(COALESCING_MARK)
    assert len(LocalYard("a").yard_session) == 18
    # RAET: "{0:0x}".format(int(time.time() * 1000000)) then random digits: no leading zero
    assert not RAET_SESSION.startswith("0")


def test_after_the_grant_messages_go_many_to_a_datagram_in_order_once() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    assert _stream(net, a, b, 1) == [0]
    assert _stream(net, a, b, 2000) == [0, *range(2000)]
    sent = _from(net, a)
    assert _is_page(sent[0])  # before b granted: a page, as to any yard
    assert all(data.startswith(BATCH_MAGIC) for data in sent[1:])
    assert len(sent) < 2000 / 20
    assert all(len(data) <= MAX_PAGE_SIZE for data in sent)
    assert [data[:6] for data in _from(net, b)] == [GRANT_MAGIC]
    assert (a.stats.grants_received, b.stats.grants_sent) == (1, 1)
    assert a.stats.batches_sent == b.stats.batches_received == len(sent) - 1
    assert a.stats.messages_sent == b.stats.messages_received == 2001
    assert a.yards["b"].queued == 0


@pytest.mark.parametrize("side", ["sender", "receiver"])
def test_either_side_can_keep_to_pages(side: str) -> None:
    net = LaneNet()
    off = LaneConfig(coalesce=False)
    a = net.yard("a", config=off if side == "sender" else None)
    b = net.yard("b", config=off if side == "receiver" else None)
    assert _stream(net, a, b, 300) == list(range(300))
    assert all(_is_page(data) for data in _from(net, a))
    assert a.stats.batches_sent == 0


def test_a_raet_yard_is_never_granted_nor_sent_batches() -> None:
    net = LaneNet()
    raet = net.yard("old", yard_session=RAET_SESSION)
    ours = net.yard("ours")
    assert _stream(net, raet, ours, 50) == list(range(50))
    assert _from(net, ours) == []  # no grant to an unmarked session
    # and the way back: our yard sends it pages, whatever the lane did before
    for n in range(50):
        ours.transmit({"n": n}, to="old", now=net.now)
    net.run_until(lambda: len(net.received(raet)) >= 50)
    assert all(_is_page(data) for data in _from(net, ours))


def test_a_busy_receiver_refuses_whole_batches_and_gets_them_again_in_order() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    _stream(net, a, b, 1)
    net.capacity[b.path] = 2
    for n in range(1, 20_000):
        if a.yards["b"].queued >= 1000:
            net.step()
        a.transmit({"n": n, "pad": "p" * 400}, to="b", now=net.now)
    net.run_until(lambda: len(net.received(b)) >= 20_000)
    assert [event.body["n"] for event in net.received(b)] == list(range(20_000))
    assert net.refusals  # the queue did fill
    assert a.stats.messages_sent == 20_000


def test_a_restarted_receiver_gets_pages_until_it_grants_again() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    _stream(net, a, b, 10)
    net.kill(b)
    for n in range(10, 20):
        a.transmit({"n": n}, to="b", now=net.now)
    net.step()  # refused: the yard is gone; its batch becomes pages again
    assert a.yards["b"].batch_limit == 0
    b2 = net.yard("b")
    net.run_until(lambda: len(net.received(b2)) >= 10)
    assert [event.body["n"] for event in net.received(b2)] == list(range(10, 20))
    first_after = [data for data, source, to in net.wire if source == a.path][-10:]
    assert all(_is_page(data) for data in first_after)
    # the new yard grants anew, and batches resume
    assert _stream(net, a, b2, 30)[-30:] == list(range(30))
    assert a.yards["b"].batch_limit > 0


def test_a_yard_that_stays_gone_hands_back_every_message_of_its_batches() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    _stream(net, a, b, 1)
    net.kill(b)
    ids = [a.transmit({"n": n}, to="b", now=net.now) for n in range(100)]
    net.run_until(lambda: bool(net.of_type(a, events.YardUnreachable)), timeout=60)
    [gone] = net.of_type(a, events.YardUnreachable)
    assert list(gone.message_ids) == ids
    assert [m["n"] for m in gone.messages] == list(range(100))
    assert a.yards["b"].queued == 0


def test_the_outbox_limit_counts_messages_not_batches() -> None:
    net = LaneNet()
    a, b = net.yard("a", config=LaneConfig(outbox_limit=50)), net.yard("b")
    _stream(net, a, b, 1)
    for n in range(50):
        a.transmit({"n": n}, to="b")
    assert len(a.yards["b"].outbox) == 1  # one batch holds them all
    with pytest.raises(BackpressureError):
        a.transmit({"n": 50}, to="b")


def test_a_message_too_large_for_a_batch_goes_as_pages_in_its_place() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    _stream(net, a, b, 1)
    a.transmit({"n": 1}, to="b")
    a.transmit({"n": 2, "big": "x" * 200_000}, to="b")
    a.transmit({"n": 3}, to="b")
    net.run_until(lambda: len(net.received(b)) >= 4)
    assert [event.body["n"] for event in net.received(b)] == [0, 1, 2, 3]
    assert [event.pages for event in net.received(b)][2] > 1


def test_grants_count_only_from_the_grantors_own_socket() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"n": 0}, to="b")
    forged = grant("b", "a", b.local.yard_session, MAX_PAGE_SIZE)
    a.receive_datagram(forged, "/lanes/lane.mallory.uxd", net.now)
    a.receive_datagram(grant("b", "other", b.local.yard_session, 10), b.path, net.now)
    assert a.yards["b"].batch_limit == 0
    assert a.stats.dropped[Drop.ADDRESS_MISMATCH] == 2
    a.receive_datagram(grant("b", "a", b.local.yard_session, 1000), b.path, net.now)
    assert a.yards["b"].batch_limit == 1000


def test_hostile_batches_are_dropped_and_counted() -> None:
    net = LaneNet()
    b = net.yard("b")
    head = batch_head("a", "b", COALESCING_MARK + "0" * 16, PageKind.JSON)
    whole = b'{"n":1}'
    cut = head + len(whole).to_bytes(4, "big") + whole + (100).to_bytes(4, "big") + b"{}"
    b.receive_datagram(cut, "/lanes/lane.a.uxd", net.now)
    assert [event.body for event in net.received(b)] == [{"n": 1}]
    assert b.stats.dropped[Drop.MALFORMED] == 1
    b.receive_datagram(batch_head("a", "c", "s", PageKind.JSON), "/lanes/lane.a.uxd", net.now)
    assert b.stats.dropped[Drop.WRONG_DESTINATION] == 1
    bad = head + (3).to_bytes(4, "big") + b"[1]"
    b.receive_datagram(bad, "/lanes/lane.a.uxd", net.now)
    assert b.stats.dropped[Drop.BAD_BODY] == 1
    b.receive_datagram(BATCH_MAGIC + b"a\nb\n", "/lanes/lane.a.uxd", net.now)
    b.receive_datagram(GRANT_MAGIC + b"a\nb\ns\n99999999\n\n", "/lanes/lane.a.uxd", net.now)
    assert b.stats.dropped[Drop.MALFORMED] == 3


def test_a_batch_larger_than_we_granted_is_dropped_whole() -> None:
    net = LaneNet()
    b = net.yard("b", config=LaneConfig(coalesce_limit=1000))
    head = batch_head("a", "b", COALESCING_MARK + "0" * 16, PageKind.JSON)
    body = b"{}"
    framed = len(body).to_bytes(4, "big") + body
    fits = head + framed * ((1000 - len(head)) // len(framed))
    b.receive_datagram(fits, "/lanes/lane.a.uxd", net.now)
    assert len(net.received(b)) == (1000 - len(head)) // len(framed)
    b.receive_datagram(fits + framed, "/lanes/lane.a.uxd", net.now)  # one message too many
    assert b.stats.dropped[Drop.BATCH_TOO_LARGE] == 1
    assert len(net.received(b)) == (1000 - len(head)) // len(framed)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([BATCH_MAGIC, GRANT_MAGIC, b"rl", b""]))
def test_any_bytes_after_either_magic_never_raise(tail: bytes, magic: bytes) -> None:
    stack = LaneStack(LocalYard("b", "lane", DIRECTORY))
    stack.receive_datagram(magic + tail, "/lanes/lane.a.uxd", 0.0)
    stack.receive_datagram(batch_head("a", "b", "s", PageKind.MSGPACK) + tail,
                           "/lanes/lane.a.uxd", 0.0)
    while stack.next_event() is not None:
        pass
    stack.datagrams_to_send(0.0)


def test_the_codec_reads_what_it_writes() -> None:
    assert read_grant(grant("x", "y", "0123", 777)) == ("x", "y", "0123", 777)
    data = batch_head("x", "y", "s1", PageKind.MSGPACK)
    source, destination, session, kind, offset = read_batch_head(data) or ("", "", "", None, 0)
    assert (source, destination, session, kind) == ("x", "y", "s1", PageKind.MSGPACK)
    framed = data + b"".join(len(b).to_bytes(4, "big") + b for b in (b"a", b"", b"ccc"))
    assert list(bodies(framed, offset)) == [b"a", b"", b"ccc"]


def test_room_frees_as_soon_as_the_kernel_took_a_batch() -> None:
    # a sender that ran into backpressure waits in its loop for the stack's timer: the
    # taken batch must free the outbox at once (it waited up to the loop's max_wait)
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    _stream(net, a, b, 1)
    for n in range(50):
        a.transmit({"n": n}, to="b", now=net.now)
    assert len(a.datagrams_to_send(net.now)) == 1
    assert a.get_timer() == net.now
    a.handle_timer(net.now)
    assert a.yards["b"].queued == 0
    assert a.get_timer() is None
