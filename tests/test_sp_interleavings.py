"""Hypothesis: any interleaving of sends, deliveries, losses, duplicates and timeouts.

Two clients reach two servers directly and through a device.  Whatever order
payloads move in, whichever get lost or duplicated, each request is answered
at most once and with its own answer, and once the faults stop every request
still wanted gets its reply.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.sp import Device, MemoryNetwork, Rep, Reply, Req, RequestBlocked, flush

RESEND = 5.0

actions = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.integers(0, 1)),
        st.tuples(st.just("cancel"), st.integers(0, 1)),
        st.tuples(st.just("deliver"), st.integers(0, 20), st.integers(0, 3)),
        st.tuples(st.just("drop"), st.integers(0, 20)),
        st.tuples(st.just("duplicate"), st.integers(0, 20)),
        st.tuples(st.just("serve"), st.integers(0, 1)),
        st.tuples(st.just("pump")),
        st.tuples(st.just("tick"), st.floats(0.0, 2 * RESEND)),
    ),
    max_size=60,
)


class World:
    """Clients, a device, servers, and what each client expects back."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.network = MemoryNetwork()
        self.clients = [
            Req(name=f"client{index}", resend_interval=RESEND, rng=random.Random(rng.random()))
            for index in range(2)
        ]
        self.servers = [
            Rep(name=f"server{index}", rng=random.Random(rng.random())) for index in range(2)
        ]
        self.device = Device(
            Rep(name="front", raw=True, rng=random.Random(rng.random())),
            Req(name="back", raw=True, rng=random.Random(rng.random())),
        )
        for client in self.clients:
            self.network.connect(client, self.device.front)
            self.network.connect(client, self.servers[0], priority=1)
        for server in self.servers:
            self.network.connect(self.device.back, server)
        self.now = 0.0
        self.wanted: list[dict[int, bytes]] = [{}, {}]
        self.answered: list[dict[int, bytes]] = [{}, {}]
        self.made = 0

    def step(self, action: tuple[object, ...]) -> None:
        kind = action[0]
        channels = [channel for channel in self.network.channels() if channel.queue]
        if kind == "request":
            index = int(action[1])  # type: ignore[call-overload]
            self.made += 1
            body = f"{index}/{self.made}".encode()
            request_id = self.clients[index].request(body, self.now)
            self.wanted[index][request_id] = body
        elif kind == "cancel":
            index = int(action[1])  # type: ignore[call-overload]
            in_flight = self.clients[index].in_flight()
            if in_flight:
                assert self.clients[index].cancel(in_flight[0])
                del self.wanted[index][in_flight[0]]
        elif kind in {"deliver", "drop", "duplicate"} and channels:
            channel = channels[int(action[1]) % len(channels)]  # type: ignore[call-overload]
            if kind == "deliver":
                position = int(action[2]) % len(channel.queue)  # type: ignore[call-overload]
                self.network.deliver(channel, self.now, position)
            elif kind == "drop":
                channel.queue.popleft()
            else:
                channel.queue.append(channel.queue[0])
        elif kind == "serve":
            self.serve(self.servers[int(action[1])])  # type: ignore[call-overload]
        elif kind == "pump":
            self.network.flush(self.now)
            self.device.pump(self.now)
            self.network.flush(self.now)
        elif kind == "tick":
            self.now += float(action[1])  # type: ignore[arg-type]
            for client in self.clients:
                client.handle_timer(self.now)
        self.collect()

    def serve(self, server: Rep) -> None:
        request = server.next_event()
        if request is not None:
            server.reply(request, b"re:" + request.body)

    def collect(self) -> None:
        for index, client in enumerate(self.clients):
            while (event := client.next_event()) is not None:
                if isinstance(event, RequestBlocked):
                    continue
                assert isinstance(event, Reply)
                assert event.request_id not in self.answered[index], "answered twice"
                assert event.body == b"re:" + self.wanted[index][event.request_id]
                self.answered[index][event.request_id] = event.body

    def heal(self) -> None:
        """No more faults: deliver everything, serve everyone, let resends run."""
        for _ in range(10):
            for _ in range(4):
                self.network.run(self.now, [self.device])
                for server in self.servers:
                    while server.pending():
                        self.serve(server)
            self.collect()
            if all(
                set(want) == set(got) for want, got in zip(self.wanted, self.answered, strict=True)
            ):
                return
            self.now += RESEND
            for client in self.clients:
                client.handle_timer(self.now)
                flush(client, self.now)


@settings(max_examples=150)
@given(st.integers(0, 2**32), actions)
def test_every_request_is_answered_once_with_its_own_reply(
    seed: int, steps: list[tuple[object, ...]]
) -> None:
    world = World(seed)
    for action in steps:
        world.step(action)
    world.heal()
    for want, got in zip(world.wanted, world.answered, strict=True):
        assert set(got) == set(want)
    for client in world.clients:
        assert client.in_flight() == []
        assert client.get_timer() is None
    assert world.device.front.outstanding() == 0
    assert world.device.front.pending() == 0
    assert all(server.outstanding() == 0 for server in world.servers)
