"""The bus over a lane: a main yard's node with yards below it, on the simulated lane."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lane import LaneConfig, LaneStack
from raetlike.bus import ANY, BusAttachment, BusMessage, BusNode, Call, Errno, Reply, Request
from raetlike.channels import LaneChannel
from tests.buskit import FAST
from tests.lanekit import LaneNet


@dataclass
class LaneBus:
    """Yards on one simulated lane, each with a bus node; ``manor`` is the main yard."""

    lanes: LaneNet
    stacks: dict[str, LaneStack]
    nodes: dict[str, BusNode]
    attachments: dict[str, BusAttachment] = field(default_factory=dict)

    def step(self, dt: float = 0.01) -> None:
        """Deliver everything in flight, then move time to the next timer (at most ``dt``)."""
        lanes = self.lanes
        for _ in range(20):
            lanes.flush()
            moved = False
            for name, stack in self.stacks.items():
                queue = lanes.queues.get(stack.path)
                while queue:
                    data, source = queue.popleft()
                    stack.receive_datagram(data, source, lanes.now)
                    moved = True
                while (event := stack.next_event()) is not None:
                    self.attachments[name].handle_event(event, lanes.now)
                    moved = True
            if not moved:
                break
        timers = [t for name, stack in self.stacks.items()
                  for t in (stack.get_timer(), self.nodes[name].get_timer()) if t is not None]
        lanes.now = max(lanes.now, min(min(timers, default=lanes.now + dt), lanes.now + dt))
        for name, stack in self.stacks.items():
            for timed in (stack, self.nodes[name]):
                timer = timed.get_timer()
                if timer is not None and timer <= lanes.now:
                    timed.handle_timer(lanes.now)

    def run_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        end = self.lanes.now + timeout
        while not condition():
            assert self.lanes.now < end, f"not by t={self.lanes.now:.3f}"
            self.step()

    def rpc(self, origin: str, target: str, topic: str, payload: object = None) -> Reply:
        got: list[Reply] = []
        self.nodes[origin].send(target, Call(topic, payload), got.append, now=self.lanes.now)
        self.run_until(lambda: bool(got))
        self.lanes.settle()
        assert len(got) == 1
        return got[0]


def lane_bus(yards: tuple[str, ...] = ("kv", "client")) -> LaneBus:
    """The main yard ``manor`` and ``yards`` below it, linked both ways."""
    lanes = LaneNet()
    bus = LaneBus(lanes, {}, {})
    for name in ("manor", *yards):
        main = name == "manor"
        stack = lanes.yard(name, main=main,
                           config=None if main else LaneConfig(main_yard="manor"))
        node = BusNode(name, config=FAST)
        bus.stacks[name], bus.nodes[name] = stack, node
        bus.attachments[name] = BusAttachment(node)
    for name in yards:
        bus.nodes["manor"].add_link(LaneChannel(bus.stacks["manor"], name))
        bus.nodes[name].add_link(LaneChannel(bus.stacks[name], "manor"), upstream=True)
    return bus


def test_a_yard_calls_a_service_on_another_yard_through_the_main_yard() -> None:
    bus = lane_bus()
    bus.nodes["kv"].serve("kvs.", lambda request: {"key": request.payload, "by": request.userid})
    reply = bus.rpc("client", "kv", "kvs.get", "a")
    assert (reply.errno, reply.payload, reply.userid) == (
        Errno.OK, {"key": "a", "by": "client"}, "kv")
    assert bus.nodes["manor"].stats.handled == 0


def test_any_is_handled_by_the_first_node_up_the_tree_that_serves_the_topic() -> None:
    bus = lane_bus()
    bus.nodes["manor"].serve("time.", lambda _request: "manor time")
    bus.nodes["kv"].serve("time.", lambda _request: "kv time")
    assert bus.rpc("client", ANY, "time.now").payload == "manor time"
    assert bus.rpc("kv", ANY, "time.now").payload == "kv time"
    assert bus.rpc("client", ANY, "nothing.here").errno is Errno.ENOSYS


def test_a_lane_yards_userid_is_stamped_from_the_lane_not_taken_from_the_body() -> None:
    bus = lane_bus()
    seen: list[Request] = []
    bus.nodes["manor"].serve("who.", seen.append)
    assert bus.rpc("client", "manor", "who.am_i").ok
    assert [(r.userid, r.role) for r in seen] == [("client", "client")]


def test_events_from_a_yard_reach_yards_subscribed_by_prefix_through_the_main_yard() -> None:
    bus = lane_bus(("kv", "client", "other"))
    got: dict[str, list[BusMessage]] = {"client": [], "other": [], "kv": []}
    bus.nodes["client"].subscribe("kvs.", got["client"].append, now=bus.lanes.now)
    bus.nodes["other"].subscribe("jobs.", got["other"].append, now=bus.lanes.now)
    bus.nodes["kv"].subscribe("kvs.changed", got["kv"].append, now=bus.lanes.now)
    bus.run_until(lambda: bus.nodes["manor"].stats.received >= 3)  # the subscriptions are up
    bus.nodes["kv"].publish("kvs.changed", {"key": "a"}, now=bus.lanes.now)
    bus.run_until(lambda: bool(got["client"]) and bool(got["kv"]))
    later = bus.lanes.now + 2.0
    bus.run_until(lambda: bus.lanes.now >= later, timeout=5)  # no second delivery comes
    assert [(e.topic, e.payload, e.userid) for e in got["client"]] == [
        ("kvs.changed", {"key": "a"}, "kv")]
    assert len(got["kv"]) == 1
    assert got["other"] == []


def test_a_request_to_a_yard_that_is_gone_fails_with_113() -> None:
    bus = lane_bus()
    bus.nodes["kv"].serve("kvs.", lambda _request: 1)
    assert bus.rpc("client", "kv", "kvs.get").ok
    bus.lanes.kill(bus.stacks.pop("kv"))
    reply = bus.rpc("client", "kv", "kvs.get")
    assert reply.errno is Errno.EHOSTUNREACH
