"""Bus requests on the simulated road: services on main and on named estates, errno 38/113."""

from __future__ import annotations

from raetlike.bus import ANY, UPSTREAM, BusError, BusNode, Errno, Request
from raetlike.bus._glue import BusAttachment
from raetlike.bus._message import BusMessage, MessageType, encode
from raetlike.channels import RoadChannel
from tests.buskit import make_bus


def kvs(request: Request) -> object:
    """A tiny service: echoes the method, payload and authenticated caller."""
    if request.method == "fail":
        raise BusError(Errno.EPERM, "no")
    return {"method": request.method, "payload": request.payload, "userid": request.userid}


def test_a_minion_calls_a_service_on_main() -> None:
    bus = make_bus()
    bus.nodes["main"].register_service("kvs", kvs)
    reply = bus.rpc("alpha", ANY, "kvs.get", {"key": "a"})
    assert reply.ok
    assert reply.payload == {"method": "get", "payload": {"key": "a"}, "userid": "alpha"}
    assert reply.userid == "main"


def test_a_minion_calls_a_service_on_another_named_estate_through_main() -> None:
    bus = make_bus()
    bus.nodes["beta"].register_service("kvs", kvs)
    reply = bus.rpc("alpha", "beta", "kvs.put", 5)
    assert reply.ok
    assert reply.payload == {"method": "put", "payload": 5, "userid": "alpha"}
    assert reply.userid == "beta"
    assert bus.nodes["beta"].stats.handled == 1


def test_any_is_served_by_the_first_node_toward_main_that_has_the_service() -> None:
    bus = make_bus()
    bus.nodes["alpha"].register_service("kvs", lambda _request: "alpha's")
    bus.nodes["main"].register_service("kvs", lambda _request: "main's")
    assert bus.rpc("alpha", ANY, "kvs.get").payload == "alpha's"
    assert bus.rpc("beta", ANY, "kvs.get").payload == "main's"
    assert bus.rpc("alpha", UPSTREAM, "kvs.get").payload == "main's"


def test_main_calls_a_named_minion_and_itself() -> None:
    bus = make_bus()
    bus.nodes["alpha"].register_service("kvs", kvs)
    bus.nodes["main"].register_service("kvs", kvs)
    assert bus.rpc("main", "alpha", "kvs.get").payload["userid"] == "main"
    assert bus.rpc("main", "main", "kvs.get").payload["userid"] == "main"


def test_an_unknown_method_or_service_answers_errno_38() -> None:
    bus = make_bus()
    bus.nodes["main"].register_service("kvs", {"get": lambda _request: 1})
    assert bus.rpc("alpha", ANY, "kvs.get").payload == 1
    unknown_method = bus.rpc("alpha", ANY, "kvs.frobnicate")
    assert unknown_method.errno is Errno.ENOSYS
    assert int(unknown_method.errno) == 38
    assert "kvs.frobnicate" in unknown_method.error
    assert bus.rpc("alpha", ANY, "nothing.here").errno == 38
    assert bus.rpc("alpha", "beta", "kvs.get").errno == 38


def test_a_handler_error_comes_back_as_its_errno() -> None:
    bus = make_bus()
    bus.nodes["main"].register_service("kvs", kvs)
    reply = bus.rpc("alpha", ANY, "kvs.fail")
    assert (reply.errno, reply.error, reply.payload) == (Errno.EPERM, "no", None)


def test_a_crashing_handler_answers_eio_and_the_node_lives_on() -> None:
    bus = make_bus()

    def broken(request: Request) -> object:
        raise ValueError(request.topic)

    bus.nodes["main"].register_service("broken", broken)
    bus.nodes["main"].register_service("kvs", kvs)
    assert bus.rpc("alpha", ANY, "broken.now").errno == Errno.EIO
    assert bus.rpc("alpha", ANY, "kvs.get").ok


def test_an_unknown_estate_answers_errno_113() -> None:
    bus = make_bus()
    reply = bus.rpc("alpha", "ghost", "kvs.get")
    assert reply.errno is Errno.EHOSTUNREACH
    assert int(reply.errno) == 113
    assert "ghost" in reply.error
    assert reply.userid == "main"


def test_main_has_no_upstream_so_upstream_requests_from_it_answer_113() -> None:
    bus = make_bus()
    assert bus.rpc("main", UPSTREAM, "kvs.get").errno == 113


def test_an_estate_that_stops_answering_makes_requests_to_it_fail_with_113() -> None:
    bus = make_bus(link_ttl=4.0)
    bus.nodes["beta"].register_service("kvs", kvs)
    assert bus.rpc("alpha", "beta", "kvs.get").ok
    bus.net.blocked.add(bus.addresses["beta"])
    started = bus.net.now
    reply = bus.rpc("alpha", "beta", "kvs.get")
    assert reply.errno == 113
    # the road gave the message back (MessageExpired) or the keepalives found beta silent
    assert bus.net.now - started < 10


def test_a_role_restricted_service_refuses_other_roles_with_eperm() -> None:
    bus = make_bus()
    bus.nodes["main"].register_service("admin", kvs, roles=frozenset({"alpha"}))
    assert bus.rpc("alpha", ANY, "admin.get").ok
    denied = bus.rpc("beta", ANY, "admin.get")
    assert denied.errno == Errno.EPERM
    assert "beta" in denied.error


def test_a_restarted_node_numbering_from_one_again_is_answered_afresh() -> None:
    """Regression: main took the new run's request 1 for the old run's and replayed the
    old answer (with the old payload) to the new caller."""
    bus = make_bus()
    calls: list[object] = []

    def count(request: Request) -> object:
        calls.append(request.payload)
        return request.payload

    bus.nodes["main"].register_service("count", count)
    assert bus.rpc("alpha", ANY, "count.it", "first run").payload == "first run"
    hosted = bus.net.stacks[bus.addresses["alpha"]]
    restarted = BusNode("alpha", config=bus.nodes["alpha"].config, now=bus.net.now)
    hosted.attachments[:] = [BusAttachment(restarted)]  # type: ignore[attr-defined]
    restarted.add_link(RoadChannel(bus.stacks["alpha"], "main", ttl=5.0), upstream=True,
                       now=bus.net.now)
    bus.nodes["alpha"] = restarted
    assert bus.rpc("alpha", ANY, "count.it", "second run").payload == "second run"
    assert calls == ["first run", "second run"]


def test_an_answer_to_a_run_before_a_restart_never_reaches_the_new_run_s_caller() -> None:
    """Regression: matchtags begin at 1 again after a restart, so a late answer to the old
    run's request 1 completed the new run's request 1 with the old payload."""
    bus = make_bus()
    old = bus.nodes["alpha"]
    restarted = BusNode("alpha", config=old.config, now=bus.net.now)
    hosted = bus.net.stacks[bus.addresses["alpha"]]
    hosted.attachments[:] = [BusAttachment(restarted)]  # type: ignore[attr-defined]
    restarted.add_link(RoadChannel(bus.stacks["alpha"], "main", ttl=5.0), upstream=True,
                       now=bus.net.now)
    bus.nodes["alpha"] = restarted
    bus.net.blocked.add(bus.addresses["main"])  # the new request waits
    got = bus.call("alpha", ANY, "count.it", "new run")
    [matchtag] = restarted._pending  # (random at each start now; 1 was the worst case)
    late = BusMessage(MessageType.RESPONSE, "count.it", "old run's answer", matchtag=matchtag,
                      sequence=1, epoch=old.epoch, userid="main", role="main")
    restarted.receive("main", encode(late), bus.net.now)
    assert got == []
    assert restarted.stats.stray_responses == 1
    same_run = BusMessage(MessageType.RESPONSE, "count.it", "its answer", matchtag=matchtag,
                          sequence=1, epoch=restarted.epoch, userid="main", role="main")
    restarted.receive("main", encode(same_run), bus.net.now)
    assert [reply.payload for reply in got] == ["its answer"]
