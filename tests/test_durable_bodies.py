"""A message the durable store cannot pack is refused by ``DurableRoad.transmit`` with
LocalProtocolError, nothing stored, as a body that is neither a mapping nor bytes is.

Before, msgpack's error (UnicodeEncodeError for a lone surrogate, OverflowError, TypeError,
ValueError) left ``transmit`` as it was: nothing that drives a road takes those, so a
joined peer whose road sends JSON bodies (which carry ``"\\ud800"`` as a str) could end a
``raetlike estate --durable`` with one message whose answer held it (the bus's echo, the
manor's error reply)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from raetlike.bus import BusNode
from raetlike.durable import DurableMessageReceived
from raetlike.errors import LocalProtocolError
from raetlike.hosting import ECHO_PREFIX, EstateBus, echo
from raetlike.manor import Manor, Problem
from road import events
from tests.simlink import SimNet
from tests.test_durable_sim import MAIN, MINION, _pair


def _nested(depth: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for _ in range(depth):
        body = {"x": body}
    return body


def _itself() -> dict[str, Any]:
    body: dict[str, Any] = {}
    body["me"] = body
    return body


UNPACKABLE = {
    "surrogate": lambda: {"text": "\ud800"},
    "surrogate-key": lambda: {"\udcff": 1},
    "past-64-bits": lambda: {"n": 1 << 70},
    "no-msgpack-form": lambda: {"what": object()},
    "too-deep": lambda: _nested(2000),
    "holds-itself": _itself,
}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "raet"])
@pytest.mark.parametrize("kind", list(UNPACKABLE))
def test_a_body_the_store_cannot_pack_is_refused_and_nothing_is_stored(
        tmp_path: Path, kind: str, fast: bool) -> None:
    net = SimNet(seed=1)
    _, minion = _pair(tmp_path, net, fast=fast)
    road = minion.road
    assert road is not None
    held, next_id, seq = len(road.outbox), road.next_id, road.outbox.last_seq("main")
    with pytest.raises(LocalProtocolError, match="durable store cannot keep"):
        road.transmit(UNPACKABLE[kind](), to="main")
    assert (len(road.outbox), road.next_id, road.outbox.last_seq("main")) == (
        held, next_id, seq)
    road.transmit({"after": kind}, to="main")  # the store (and its packer) goes on
    assert net.run_until(lambda: len(road.outbox) == 0, timeout=30)
    [got] = [e for e in net.events[MAIN] if isinstance(e, DurableMessageReceived)]
    assert got.body == {"after": kind}
    assert got.durable_seq == seq + 1  # no number went to the refused one: no gap
    minion.crash()  # and the store holds nothing of it
    assert minion.start().outbox.pending() == []


class _NoLane:
    """The little of a lane the manor asks for here."""

    name = "manor"
    yards: ClassVar[dict[str, Any]] = {}
    local = SimpleNamespace(lane="maple")

    def next_event(self) -> None:
        return None

    def transmit(self, *_: Any, **__: Any) -> None:
        raise AssertionError("not reached")


def test_a_manor_error_reply_the_store_cannot_pack_is_undelivered(tmp_path: Path) -> None:
    """A routed message from a joined peer naming a yard that is not there and a share
    holding a lone surrogate: the manor's error reply goes back over the DurableRoad.
    Before, UnicodeEncodeError left Manor.handle_road_event (``raetlike estate --durable
    --lane`` ended)."""
    net = SimNet(seed=1)
    main, minion = _pair(tmp_path, net, fast=True)
    assert main.road is not None
    assert minion.road is not None
    manor = Manor(main.road, _NoLane())  # type: ignore[arg-type]
    minion.road.stack.transmit({"route": {"src": [None, "app", "\ud800"],
                                          "dst": [None, "nosuchyard", None]}}, to="main")
    for _ in range(100):
        net.run_for(0.01)
        for event in net.events[MAIN]:
            manor.handle_road_event(event, net.now)
        net.events[MAIN].clear()
    assert manor.stats.problems[Problem.UNKNOWN_YARD] == 1
    assert manor.stats.problems[Problem.UNDELIVERABLE] == 1  # its reply could not go
    assert manor.stats.undelivered == 1
    assert len(main.road.outbox) == 0


def test_a_bus_echo_answer_the_store_cannot_pack_does_not_end_the_estate(
        tmp_path: Path) -> None:
    """``raetlike estate --durable --bus``: a request whose topic holds a lone surrogate;
    the echo's answer goes back over the DurableRoad.  Before, UnicodeEncodeError left
    EstateBus.handle_road_event."""
    net = SimNet(seed=1)
    main, minion = _pair(tmp_path, net, fast=True)
    assert main.road is not None
    assert minion.road is not None
    node = BusNode("main", now=net.now)
    node.serve(ECHO_PREFIX, echo)
    bus = EstateBus(node, main.road)
    minion.road.stack.transmit({"bus": {"ty": "request", "to": ECHO_PREFIX + "x\ud800",
                                        "ta": "main", "mt": 1, "sq": 1, "ep": 5}}, to="main")
    received = 0
    for _ in range(100):
        net.run_for(0.01)
        for event in net.events[MAIN]:
            received += isinstance(event, events.MessageReceived)
            bus.handle_road_event(event, net.now)
        net.events[MAIN].clear()
    assert received == 1
    assert len(main.road.outbox) == 0
    assert not any(isinstance(e, events.MessageReceived) for e in net.events[MINION])
