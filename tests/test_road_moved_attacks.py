"""Attacks on following a remote that moves (docs/road.md, "A remote that moves").

The attacker sees, copies, replays, delays and injects datagrams, with any source
address, but holds no keys.  Each test is one attack on the simulated link (virtual
clock, deterministic) and states what must hold however it goes: the remote's address
changes only when the remote itself speaks from there, what goes to an address that
never proved itself stays within 3x what came from it, and the session goes on.
"""

from __future__ import annotations

from raetlike.wire.kinds import Flag, PacketKind, TransactionKind
from raetlike.wire.packet import parse_packet
from road import events
from road.config import RoadConfig
from tests.roadkit import MAIN, MINION, FilterNet, Pair, Sent, allowed_pair, numbered
from tests.simlink import Address

NEW: Address = ("127.0.0.9", 7531)
ATTACKER: Address = ("127.0.0.66", 4444)


def _pair(*, fast: bool) -> Pair:
    return allowed_pair(main_config=RoadConfig(fast=fast), minion_config=RoadConfig(fast=fast))


def _seqs(net: FilterNet, address: Address) -> list[int]:
    return sorted(e.body["seq"] for e in net.of_type(address, events.MessageReceived)
                  if "seq" in e.body)


def _kinds(data: bytes) -> tuple[TransactionKind, PacketKind, int] | None:
    try:
        head = parse_packet(data).head
    except Exception:  # noqa: BLE001 - fast datagrams and garbage do not parse
        return None
    return head.transaction_kind, head.packet_kind, int(head.flags)


class _Observer(FilterNet):
    """An attacker on the wire: ``race(data, source, destination)`` may return a copy's
    source to inject first (the original then arrives ``delay`` later), and every byte
    to and from the attacker's addresses is counted."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.race_when: object = None  # a callable (data, source, destination) -> bool
        self.delay = 0.005
        self.copies: list[tuple[bytes, Address, Address]] = []  # what it raced, as sent
        self.raced = 0  # bytes the attacker sent
        self.to_attacker = 0  # bytes the stacks sent to the attacker's addresses
        self.attackers: set[Address] = {ATTACKER}

    def inject(self, data: bytes, source: Address, destination: Address) -> None:
        if source in self.attackers:
            self.raced += len(data)
        super().inject(data, source, destination)

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        if destination in self.attackers:
            self.to_attacker += len(data)
        race = self.race_when
        if callable(race) and race(data, source, destination):
            self.copies.append((data, source, destination))
            self.inject(data, ATTACKER, destination)
            if self.tap is not None:
                self.tap(data, source, destination)
            self.counters.sent += 1
            self._schedule(data, source, destination, self.now + self.delay)
            return
        super()._transmit(data, source, destination)


def _observed(pair: Pair) -> _Observer:
    net = _Observer(seed=0)
    net.now = pair.net.now

    def tap(data: bytes, source: Address, destination: Address) -> None:
        try:
            head = parse_packet(data).head
        except Exception:  # noqa: BLE001 - the log keeps what parses
            return
        pair.wire.append(Sent(net.now, head, data, source, destination))

    net.tap = tap
    for address, stack in pair.net.stacks.items():
        net.add(address, stack)
    pair.net = net
    return net


def _settle(pair: Pair, count: int = 3) -> None:
    """Messages both ways, all delivered and done: the session is in use."""
    for message in numbered(count):
        pair.minion.transmit(message, to="main", now=pair.net.now)
        pair.main.transmit(message, to="minion", now=pair.net.now)
    pair.run_until(lambda: _seqs(pair.net, MAIN) == list(range(count))
                   and _seqs(pair.net, MINION) == list(range(count))
                   and len(pair.net.of_type(MAIN, events.MessageSent)) == count
                   and len(pair.net.of_type(MINION, events.MessageSent)) == count)


def _probes_to(pair: Pair, address: Address) -> list[bytes]:
    return [s.data for s in pair.wire if s.destination == address
            and s.head.transaction_kind == TransactionKind.ALIVE
            and s.head.packet_kind == PacketKind.REQUEST]


# -- hijack and denial through the allow --------------------------------------------


def _hello(data: bytes, source: Address, _destination: Address) -> bool:
    kinds = _kinds(data)
    return source != ATTACKER and kinds is not None and kinds[:2] == (
        TransactionKind.ALLOW, PacketKind.HELLO) and not kinds[2] & Flag.CORRESPONDENT


def test_a_raced_copy_of_every_allow_hello_neither_blocks_the_allow_nor_moves_the_remote(
) -> None:
    """An observer copies each of the minion's allow hellos and gets the copy to main
    first from its own address (the original follows 5 ms later).  The minion's own
    allow must still complete at once where the minion is: a cookie sent only to the
    first hello's source left the real minion without one, so every allow it started
    timed out (and a minion that had moved could never be followed by an allow)."""
    pair = _pair(fast=False)
    net = _observed(pair)
    _settle(pair)
    allows = len(net.of_type(MINION, events.Allowed))
    failed = pair.minion.stats.handshakes_failed, pair.main.stats.handshakes_failed
    net.race_when = _hello
    pair.minion.allow("main", now=net.now)
    assert net.run_until(lambda: len(net.of_type(MINION, events.Allowed)) > allows,
                         timeout=1.0), f"no allow by t={net.now}"
    net.run_for(5.0)
    assert net.copies  # the race happened
    assert (pair.minion.stats.handshakes_failed, pair.main.stats.handshakes_failed) == failed
    remote = pair.main.remote("minion")
    assert remote.host_address == MINION
    assert pair.main.stats.remotes_moved == 0
    assert 0 < net.to_attacker <= 3 * net.raced
    for message in numbered(3):
        message["seq"] += 3
        pair.minion.transmit(message, to="main", now=net.now)
    assert net.run_until(lambda: _seqs(net, MAIN) == list(range(6)), timeout=5.0)


def test_a_moved_minion_whose_hellos_are_raced_is_followed_by_its_allow() -> None:
    """The minion moved and re-allows from its new address; each hello's copy reaches
    main first from the attacker's.  The allow completes from the new address and
    moves the minion there, not to the attacker."""
    pair = _pair(fast=False)
    net = _observed(pair)
    _settle(pair)
    net.stacks[NEW] = net.stacks.pop(MINION)
    net.events[NEW] = net.events.pop(MINION)
    allows = len(net.of_type(NEW, events.Allowed))
    net.race_when = _hello
    pair.minion.allow("main", now=net.now)
    assert net.run_until(lambda: len(net.of_type(NEW, events.Allowed)) > allows,
                         timeout=1.0), f"no allow by t={net.now}"
    assert net.copies
    assert pair.main.remote("minion").host_address == NEW
    moved = net.of_type(MAIN, events.RemoteMoved)
    assert [(m.old, m.new) for m in moved] == [(MINION, NEW)]
    assert 0 < net.to_attacker <= 3 * net.raced


def test_a_raced_copy_of_the_initiate_does_not_end_or_move_the_allow() -> None:
    """The copy of the minion's initiate arrives first from elsewhere: it may not move
    the minion there (its cookie went to the minion's address), nor end the allow."""
    pair = _pair(fast=False)
    net = _observed(pair)
    _settle(pair)
    allows = len(net.of_type(MINION, events.Allowed))

    def initiate(data: bytes, source: Address, _destination: Address) -> bool:
        kinds = _kinds(data)
        return source == MINION and kinds is not None and kinds[:2] == (
            TransactionKind.ALLOW, PacketKind.INITIATE)

    net.race_when = initiate
    pair.minion.allow("main", now=net.now)
    assert net.run_until(lambda: len(net.of_type(MINION, events.Allowed)) > allows,
                         timeout=10.0), f"no allow by t={net.now}"
    net.run_for(5.0)
    assert net.copies
    assert pair.main.remote("minion").host_address == MINION
    assert pair.main.stats.remotes_moved == 0
    assert net.to_attacker <= 3 * net.raced
