"""The Messenger shape: serve(prefix, handler) and send(destination, message, on_reply)."""

from __future__ import annotations

import pytest

from raetlike.bus import ANY, BusConfig, BusNode, Call, Errno, Reply, Request
from raetlike.channels import Hosted
from raetlike.errors import LocalProtocolError
from tests.buskit import make_bus


def test_a_prefix_handler_takes_every_topic_under_its_prefix() -> None:
    bus = make_bus()
    bus.nodes["main"].serve("kvs.", lambda request: f"{request.topic}={request.payload}")
    assert bus.rpc("alpha", ANY, "kvs.get", "a").payload == "kvs.get=a"
    assert bus.rpc("alpha", ANY, "kvs.put.many", "b").payload == "kvs.put.many=b"
    assert bus.rpc("alpha", ANY, "kvsx.get").errno is Errno.ENOSYS


def test_the_longest_prefix_wins_and_a_mapping_is_keyed_by_the_rest_of_the_topic() -> None:
    bus = make_bus()
    main = bus.nodes["main"]
    main.serve("kvs.", lambda _request: "general")
    main.serve("kvs.admin.", {"drop": lambda _request: "dropped", "list": lambda _r: ["a"]})
    assert bus.rpc("alpha", "main", "kvs.get").payload == "general"
    assert bus.rpc("alpha", "main", "kvs.admin.drop").payload == "dropped"
    assert bus.rpc("alpha", "main", "kvs.admin.list").payload == ["a"]
    assert bus.rpc("alpha", "main", "kvs.admin.nothing").errno is Errno.ENOSYS
    main.unserve("kvs.admin.")
    assert bus.rpc("alpha", "main", "kvs.admin.drop").payload == "general"


def test_register_service_is_serve_with_the_name_and_a_dot() -> None:
    node = BusNode("solo")
    node.register_service("kvs", lambda _request: 1)
    assert node.provides("kvs.get")
    assert not node.provides("kvsx.get")
    node.unregister_service("kvs")
    assert not node.provides("kvs.get")
    with pytest.raises(LocalProtocolError):
        node.register_service("kvs.get", lambda _request: 1)


def test_a_served_prefix_can_require_a_role() -> None:
    bus = make_bus()
    bus.nodes["main"].serve("admin.", lambda _request: "ok", roles=frozenset({"beta"}))
    assert bus.rpc("alpha", "main", "admin.reboot").errno is Errno.EPERM
    assert bus.rpc("beta", "main", "admin.reboot").payload == "ok"


def test_send_runs_the_callback_once_with_the_reply_at_the_nodes_own_time() -> None:
    bus = make_bus()
    seen: list[Request] = []

    def handler(request: Request) -> int:
        seen.append(request)
        return 42

    bus.nodes["beta"].serve("answer.", handler)
    got: list[Reply] = []
    bus.nodes["alpha"].send("beta", Call("answer.get"), got.append)  # no now: the node's clock
    bus.run_until(lambda: bool(got))
    bus.net.run_for(10.0)
    assert [(r.errno, r.payload, r.userid) for r in got] == [(Errno.OK, 42, "beta")]
    assert len(seen) == 1


def test_send_runs_the_callback_once_with_a_timeout_error_when_nobody_answers() -> None:
    patient = BusConfig(retry_interval=1.0, keepalive_interval=1.0, keepalive_timeout=60.0)
    bus = make_bus(config=patient)  # beta is not given up for lost before the timeout
    beta = bus.net.stacks[bus.addresses["beta"]]
    assert isinstance(beta, Hosted)
    beta.attachments.clear()  # beta's estate is up, but no bus node answers there
    got = bus.call("alpha", "beta", "answer.get", timeout=5.0)
    bus.net.run_for(20.0)
    assert len(got) == 1
    assert got[0].errno is Errno.ETIMEDOUT
    assert bus.nodes["alpha"].stats.retries >= 3
    assert bus.nodes["alpha"].get_timer() is not None  # keepalives only: nothing pending
    assert not bus.nodes["alpha"].cancel(got[0].matchtag)
