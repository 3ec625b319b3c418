"""Coalescing under review (an adversarial review of cc9f043 wrote these; each failed there,
on both builds): refused grants, a refusal after one, pages made from the bodies as they
were serialized, Latin-1 yard names, batches that fit a default-capped send buffer, and a
late page from an old session."""
from __future__ import annotations

import errno
import select
import socket
from pathlib import Path

from lane import LaneConfig, LaneStack, LocalYard, events
from lane.coalesce import grant
from raetlike.uxd import UxdDriver
from raetlike.wire.page import paginate
from tests.lanekit import LaneNet

# -- 1. a refusal after a refused grant is ignored: the message vanishes ---------------

def test_a_message_refused_after_a_refused_grant_is_not_lost() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    b.transmit({"hello": 0}, to="a", now=net.now)
    net.flush()            # b's page waits in a's queue
    net.kill(b)            # b dies before a reads it
    net.drain()            # a reads it and grants b
    net.flush()            # a's round holds only the grant: refused (ECONNREFUSED)
    assert net.refusals == [(b.path, errno.ECONNREFUSED)]
    mid = a.transmit({"n": 1}, to="b", now=net.now)
    net.flush()            # refused as well, but send_failed returns early
    assert len(net.refusals) == 2
    net.run_until(lambda: bool(net.of_type(a, events.YardUnreachable)), timeout=60)
    [gone] = net.of_type(a, events.YardUnreachable)
    assert gone.message_ids == (mid,)


def test_a_busy_refusal_after_a_refused_grant_keeps_the_message() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    b.transmit({"hello": 0}, to="a", now=0.0)
    [(page, _)] = b.datagrams_to_send(0.0)
    a.receive_datagram(page, b.path, 0.0)
    assert a.next_event() is not None
    [(grant_, to)] = a.datagrams_to_send(0.0)
    a.send_failed(to, grant_, errno.EAGAIN, 0.0)  # b's queue is full
    a.transmit({"n": 1}, to="b", now=0.0)
    [(data, to)] = a.datagrams_to_send(0.0)
    a.send_failed(to, data, errno.EAGAIN, 0.0)    # still full: keep it, retry
    a.handle_timer(1.0)
    assert a.yards["b"].queued == 1
    assert a.datagrams_to_send(1.0) == [(data, to)]


# -- 2. a refused grant is never sent again ---------------------------------------------

def test_a_refused_grant_is_granted_again_on_the_next_page() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    net.capacity[a.path] = 0  # a's queue is full: b's grant to a is refused (EAGAIN)
    a.transmit({"n": 0}, to="b", now=net.now)
    for _ in range(5):
        net.step()
    assert b.stats.grants_sent == 1
    assert (a.path, errno.EAGAIN) in net.refusals
    del net.capacity[a.path]
    for n in range(1, 50):
        a.transmit({"n": n}, to="b", now=net.now)
        net.step()
    net.settle()
    assert [e.body["n"] for e in net.received(b)] == list(range(50))
    assert b.stats.grants_sent == 2
    assert a.yards["b"].batch_limit > 0


def test_the_loop_order_keeps_the_refused_grant_known() -> None:
    # Loop/UxdDriver.service: receive, get_timer (due: a grant waits), handle_timer, send
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"n": 0}, to="b", now=0.0)
    [(page, _)] = a.datagrams_to_send(0.0)
    b.receive_datagram(page, a.path, 0.0)
    assert b.get_timer() == b.now
    b.handle_timer(b.now)
    [(grant_, to)] = b.datagrams_to_send(0.0)
    b.send_failed(to, grant_, errno.EAGAIN, 0.0)
    assert b.yards["a"].granted is None


# -- 3. _unbatch serializes the messages again ------------------------------------------

def _granted_pair() -> tuple[LaneNet, LaneStack, LaneStack]:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("b")
    a.transmit({"n": -1}, to="b", now=net.now)
    net.step()
    net.settle()
    assert a.yards["b"].batch_limit > 0
    return net, a, b


def test_a_reused_mapping_is_delivered_as_it_was_at_transmit_after_a_restart() -> None:
    net, a, b = _granted_pair()
    net.kill(b)
    message = {"n": 0}
    for n in range(5):  # one dict, changed after each transmit (with pages: 0..4 arrive)
        message["n"] = n
        a.transmit(message, to="b", now=net.now)
    net.step()  # ECONNREFUSED: the batch turns back into pages
    b2 = net.yard("b")
    net.run_until(lambda: len(net.received(b2)) >= 5)
    assert [e.body["n"] for e in net.received(b2)] == [0, 1, 2, 3, 4]


def test_unbatching_never_raises_out_of_receive_datagram() -> None:
    net, a, b = _granted_pair()
    message: dict[str, object] = {"n": 1}
    a.transmit(message, to="b", now=net.now)
    message["oops"] = {1, 2}  # the caller reuses its dict
    net.kill(b)
    b2 = net.yard("b")
    b2.transmit({"hello": 1}, to="a", now=net.now)
    [(page, _)] = b2.datagrams_to_send(net.now)
    a.receive_datagram(page, b2.path, net.now)  # LocalProtocolError from _unbatch
    assert any(isinstance(e, events.YardRestarted) for e in iter(a.next_event, None))


# -- 4. Latin-1 yard names ---------------------------------------------------------------

def test_a_page_from_a_latin1_named_yard_does_not_raise_out_of_receive() -> None:
    net = LaneNet()
    cafe, b = net.yard("café"), net.yard("b")
    cafe.transmit({"n": 0}, to="b", now=net.now)
    [(page, _)] = cafe.datagrams_to_send(net.now)
    b.receive_datagram(page, cafe.path, net.now)  # UnicodeEncodeError in coalesce.grant
    assert b.next_event() is not None


def test_latin1_named_yards_exchange_messages_with_coalescing_on() -> None:
    net = LaneNet()
    a, b = net.yard("a"), net.yard("bé")
    for n in range(20):
        a.transmit({"n": n}, to="bé", now=net.now)
        net.step()
    net.settle()
    assert [e.body["n"] for e in net.received(b)] == list(range(20))


# -- 5. 64 KB batches exhaust a default-capped SO_SNDBUF: the waiter spins ------------

def test_a_busy_batched_yard_does_not_wake_the_sender_at_once(tmp_path: Path) -> None:
    directory = tmp_path / "lane"
    a = LaneStack(LocalYard("a", "lane", str(directory)))
    driver = UxdDriver(a)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        # what SO_SNDBUF 4 MB becomes under Linux's default net.core.wmem_max
        driver.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 212992)
        b_path = str(directory / "lane.b.uxd")
        slow.bind(b_path)  # yard b: there, not reading for now
        a.add_yard("b")
        a.receive_datagram(grant("b", "a", "01" + "0" * 16, 65535), b_path, 0.0)
        for n in range(1000):
            a.transmit({"n": n, "pad": "x" * 500}, to="b")
        while driver.send_errors == 0:
            driver.send(0.0)
        wakeups = 0
        for _ in range(20):  # loop rounds while b still does not read
            if not select.select([driver.fileno()], [], [], 0)[0]:
                break
            wakeups += 1
            driver.receive(0.0)
            a.handle_timer(0.0)
            driver.send(0.0)
        assert wakeups == 0  # 20: every round wakes at once and is refused again
    finally:
        slow.close()
        driver.close()


# -- 6. a late page from an old session does not end batching ----------------------

def test_a_straggler_from_an_old_session_does_not_end_batching() -> None:
    net = LaneNet()
    m = net.yard("m", main=True)
    a = net.yard("a", config=LaneConfig(main_yard="m"))
    a.add_yard("b")
    b = net.yard("b")
    old = b.local.yard_session
    a.transmit({"n": 0}, to="b", now=net.now)
    for _ in range(3):
        net.step()
    net.settle()
    net.kill(b)
    b2 = net.yard("b")
    b2.transmit({"hi": 1}, to="a", now=net.now)  # b2 talks to a directly: a grants b2 ...
    a.transmit({"n": 1}, to="b", now=net.now)    # ... and b2 grants a
    for _ in range(3):
        net.step()
    net.settle()
    assert a.yards["b"].batch_limit > 0
    # a page b's old process sent through main reaches a only now
    straggler = paginate("b", "a", old, 99, {"late": True})[0]
    a.receive_datagram(straggler, m.path, net.now)
    for n in range(2, 40):
        a.transmit({"n": n}, to="b", now=net.now)
        b2.transmit({"hi": n}, to="a", now=net.now)
        net.step()
    net.settle()
    assert a.yards["b"].batch_limit > 0
