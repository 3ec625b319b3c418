"""Helpers for the road protocol tests: a main and a minion on a simulated link.

Everything runs on :class:`tests.simlink.SimNet`'s virtual clock, so the tests
are deterministic and never sleep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raetlike.wire.head import Head
from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.simlink import Address, Impairment, SimNet

MAIN: Address = ("127.0.0.1", 7530)
MINION: Address = ("127.0.0.1", 7531)
OTHER: Address = ("127.0.0.1", 7532)


@dataclass
class Sent:
    """One datagram the link saw, with its parsed head and the virtual time."""

    at: float
    head: Head
    data: bytes
    source: Address
    destination: Address


class FilterNet(SimNet):
    """A SimNet that can also lose chosen datagrams (``drop`` sees the parsed packet)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.drop: Callable[[Sent], bool] | None = None

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        if self.drop is not None:
            try:
                head = parse_packet(data).head
            except Exception:  # noqa: BLE001 - only parsed packets can be chosen
                head = None
            if head is not None and self.drop(Sent(self.now, head, data, source, destination)):
                if self.tap is not None:
                    self.tap(data, source, destination)
                self.counters.sent += 1
                self.counters.dropped += 1
                return
        super()._transmit(data, source, destination)


@dataclass
class Pair:
    """A main estate and a minion on one simulated network, with a wire log."""

    net: FilterNet
    main: RoadStack
    minion: RoadStack
    wire: list[Sent] = field(default_factory=list)

    def stack(self, address: Address) -> RoadStack:
        stack = self.net.stacks[address]
        assert isinstance(stack, RoadStack)
        return stack

    def events(self, address: Address, kind: type) -> list[Any]:
        return self.net.of_type(address, kind)

    def run_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        assert self.net.run_until(condition, timeout=timeout), (
            f"condition not met by t={self.net.now:.3f}"
        )

    def join(self, timeout: float = 30.0) -> None:
        """Minion joins main (vacuously); both see Joined."""
        self.minion.join(MAIN, now=self.net.now)
        self.run_until(lambda: bool(self.events(MINION, events.Joined))
                       and bool(self.events(MAIN, events.Joined)), timeout)

    def allow(self, timeout: float = 30.0) -> None:
        """Join and allow; both sides see Allowed."""
        self.minion.join(MAIN, now=self.net.now)
        self.run_until(lambda: bool(self.events(MINION, events.Allowed))
                       and bool(self.events(MAIN, events.Allowed)), timeout)

    def sent(self, transaction: TransactionKind | None = None,
             packet: PacketKind | None = None, source: Address | None = None) -> list[Sent]:
        """The datagrams put on the wire so far, filtered by kinds and sender."""
        return [
            s for s in self.wire
            if (transaction is None or s.head.transaction_kind == transaction)
            and (packet is None or s.head.packet_kind == packet)
            and (source is None or s.source == source)
        ]


def make_pair(
    *,
    seed: int = 0,
    impairment: Impairment | None = None,
    main_config: RoadConfig | None = None,
    minion_config: RoadConfig | None = None,
    main_keep: MemoryKeep | None = None,
    minion_keep: MemoryKeep | None = None,
    main_estate: LocalEstate | None = None,
    minion_estate: LocalEstate | None = None,
) -> Pair:
    """A main estate at MAIN and a minion at MINION, neither joined yet."""
    net = FilterNet(seed=seed, impairment=impairment or Impairment())
    # Without a config a pair speaks RAET mode: these are RAET protocol tests.
    main = RoadStack(main_estate or LocalEstate("main", main=True),
                     main_config or RoadConfig(fast=False), main_keep)
    minion = RoadStack(minion_estate or LocalEstate("minion"),
                       minion_config or RoadConfig(fast=False), minion_keep)
    net.add(MAIN, main)
    net.add(MINION, minion)
    pair = Pair(net, main, minion)

    def tap(data: bytes, source: Address, destination: Address) -> None:
        try:
            head = parse_packet(data).head
        except Exception:  # noqa: BLE001 - the tap logs only what parses
            return
        pair.wire.append(Sent(net.now, head, data, source, destination))

    net.tap = tap
    return pair


def allowed_pair(**kwargs: Any) -> Pair:
    """A pair already joined and allowed, with the link as given."""
    pair = make_pair(**kwargs)
    pair.allow()
    return pair


def numbered(count: int, size: int = 0) -> list[dict[str, Any]]:
    """Message bodies carrying a sequence number (and optional padding)."""
    return [{"seq": n, "pad": "x" * size} for n in range(count)]


def received_seqs(pair: Pair, address: Address) -> list[int]:
    """Sequence numbers of the messages a stack received, in delivery order."""
    return [e.body["seq"] for e in pair.events(address, events.MessageReceived)]
