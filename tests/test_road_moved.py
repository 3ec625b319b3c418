"""A remote estate that moves to a new address mid-session (a re-addressed interface, a NAT
that maps it anew) keeps its identity and goes on; nobody else can move it.

RAET 0.6.8 lets an estate move only on a mutable road, by joining again. Here the
address moves only when the remote proves, at the new address, that it holds the
session's keys: it answers an "alive?" we sent only there (a path probe), or it
completes an allow from there.  An authenticated datagram from elsewhere (a fast one
fresh and the newest so far, or a signed RAET packet of the current session) starts
the probe; a replay can start one too, but nobody answers it there, and nothing of
the session changes.  All on the simulated link, virtual clock.
"""

from __future__ import annotations

from raetlike.wire.kinds import TransactionKind
from road import events
from road.config import RoadConfig
from tests.roadkit import MAIN, MINION, FilterNet, Pair, allowed_pair, numbered
from tests.simlink import Address

NEW: Address = ("127.0.0.9", 7531)
ATTACKER: Address = ("127.0.0.66", 4444)


def _pair(*, fast: bool) -> Pair:
    return allowed_pair(main_config=RoadConfig(fast=fast), minion_config=RoadConfig(fast=fast))


def _move(net: FilterNet, old: Address, new: Address) -> None:
    """The stack at ``old`` now sends from and receives at ``new`` (its socket is unchanged)."""
    net.stacks[new] = net.stacks.pop(old)
    net.events[new] = net.events.pop(old)


def _seqs(net: FilterNet, address: Address) -> list[int]:
    return sorted(e.body["seq"] for e in net.of_type(address, events.MessageReceived)
                  if "seq" in e.body)


def _both_ways(pair: Pair, minion_at: Address, first: int, count: int) -> None:
    for message in numbered(count):
        message["seq"] += first
        pair.minion.transmit(message, to="main", now=pair.net.now)
        pair.main.transmit(message, to="minion", now=pair.net.now)


def _moved_and_continues(*, fast: bool, timeout: float) -> Pair:
    pair = _pair(fast=fast)
    net = pair.net
    uid, far_uid = pair.main.remote("minion").uid, pair.minion.remote("main").far_uid
    joins = (pair.main.stats.joins_completed, pair.minion.stats.joins_completed)
    _both_ways(pair, MINION, 0, 20)
    pair.run_until(lambda: _seqs(net, MAIN) == list(range(20))
                   and _seqs(net, MINION) == list(range(20))
                   and len(net.of_type(MINION, events.MessageSent)) == 20
                   and len(net.of_type(MAIN, events.MessageSent)) == 20)
    _move(net, MINION, NEW)
    _both_ways(pair, NEW, 20, 20)
    everything = list(range(40))
    assert net.run_until(lambda: set(_seqs(net, MAIN)) == set(everything)
                         and set(_seqs(net, NEW)) == set(everything)
                         and not pair.minion.remote("main").outbox
                         and not pair.main.remote("minion").outbox, timeout=timeout), (
        f"main has {len(_seqs(net, MAIN))}, minion {len(_seqs(net, NEW))} at t={net.now}")
    net.run_for(5.0)  # late duplicates would show now
    assert _seqs(net, MAIN) == everything  # each once
    assert _seqs(net, NEW) == everything
    remote = pair.main.remote("minion")
    assert remote.host_address == NEW
    assert (remote.uid, pair.minion.remote("main").far_uid) == (uid, far_uid)
    assert (pair.main.stats.joins_completed, pair.minion.stats.joins_completed) == joins
    assert pair.main.stats.remotes_moved == 1
    moved = net.of_type(MAIN, events.RemoteMoved)
    assert [(m.remote, m.old, m.new) for m in moved] == [("minion", MINION, NEW)]
    assert not net.of_type(MAIN, events.MessageExpired)
    assert not net.of_type(NEW, events.MessageExpired)
    return pair


def test_a_fast_mode_minion_that_moves_mid_stream_keeps_its_uid_and_goes_on_at_once() -> None:
    pair = _moved_and_continues(fast=True, timeout=5.0)
    assert pair.main._fast.links[pair.main.remote("minion").uid].keyed


def test_a_raet_mode_minion_that_moves_mid_stream_is_followed_at_once() -> None:
    """RAET mode: its signed message packets from the new address start the probe, and
    main answers them where they came from, so each is done once (not delivered again
    after a re-allow, which would start RAET's per-session dedup over)."""
    _moved_and_continues(fast=False, timeout=5.0)


def test_a_replayed_fast_datagram_from_elsewhere_moves_nothing_and_starts_no_allow() -> None:
    pair = _pair(fast=True)
    net = pair.net
    captured: list[bytes] = []
    tap = net.tap

    def keep(data: bytes, source: Address, destination: Address) -> None:
        if source == MINION and data[:1] != b"{" and not captured:
            captured.append(data)
        if tap is not None:
            tap(data, source, destination)

    net.tap = keep
    _both_ways(pair, MINION, 0, 5)
    pair.run_until(lambda: _seqs(net, MAIN) == list(range(5)))
    allows = pair.main.stats.allows_completed
    net.inject(captured[0], ATTACKER, MAIN)
    net.run_for(10.0)
    remote = pair.main.remote("minion")
    assert remote.host_address == MINION
    assert remote.allowed
    assert pair.main.stats.remotes_moved == 0
    assert pair.main.stats.allows_completed == allows
    assert not [s for s in pair.wire if s.destination == ATTACKER]
    assert _seqs(net, MAIN) == list(range(5))


def test_a_replayed_raet_packet_from_elsewhere_moves_nothing_and_keeps_the_session() -> None:
    """A signed packet replayed from elsewhere may start a probe there; nobody answers
    it, the session and the address stay, and what goes there is held to 3x."""
    pair = _pair(fast=False)
    net = pair.net
    _both_ways(pair, MINION, 0, 3)
    pair.run_until(lambda: _seqs(net, MAIN) == list(range(3)))
    signed = [s for s in pair.wire if s.source == MINION and s.head.session_id != 0]
    for sent in signed[-5:]:
        net.inject(sent.data, ATTACKER, MAIN)
    net.run_for(10.0)
    remote = pair.main.remote("minion")
    assert remote.host_address == MINION
    assert remote.allowed
    assert pair.main.stats.remotes_moved == 0
    assert _seqs(net, MAIN) == list(range(3))
    # a replayed message packet is answered where it came from (done again, or a nack),
    # and probed there, never more than 3x its bytes (RFC 9000 8.1); no allow there
    answered = [s for s in pair.wire if s.destination == ATTACKER]
    assert sum(len(s.data) for s in answered) <= 3 * sum(len(s.data) for s in signed[-5:])
    assert not [s for s in answered if s.head.transaction_kind == TransactionKind.ALLOW]


class _Racer(FilterNet):
    """An observer that copies the minion's next fast datagram and gets its copy in first,
    from its own address (the original is lost): what QUIC calls a spoofed migration."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.armed = False
        self.raced = 0  # bytes the attacker sent from its address
        self.to_attacker = 0  # bytes sent to the attacker's address

    def _transmit(self, data: bytes, source: Address, destination: Address) -> None:
        if self.armed and source == MINION and data[:1] != b"{":
            self.armed = False
            self.raced += len(data)
            self.counters.sent += 1
            self.inject(data, ATTACKER, destination)
            return
        if destination == ATTACKER:
            self.to_attacker += len(data)
        super()._transmit(data, source, destination)


def test_a_fresh_fast_datagram_raced_from_elsewhere_does_not_move_the_remote() -> None:
    pair = _pair(fast=True)
    net = _Racer(seed=0)
    net.now = pair.net.now
    for address, stack in pair.net.stacks.items():
        net.add(address, stack)
    pair.net = net
    main = pair.main
    _both_ways(pair, MINION, 0, 5)
    assert net.run_until(lambda: _seqs(net, MAIN) == list(range(5)))
    net.armed = True
    _both_ways(pair, MINION, 5, 5)
    assert net.run_until(lambda: _seqs(net, MAIN) == list(range(10))
                         and _seqs(net, MINION) == list(range(10)), timeout=30.0)
    net.run_for(10.0)
    assert net.raced > 0
    remote = main.remote("minion")
    assert remote.host_address == MINION  # the probe at the attacker's was never answered
    assert main.stats.remotes_moved == 0
    assert _seqs(net, MAIN) == list(range(10))
    # what went to the attacker's address is held to 3x what came from it (RFC 9000 8.1)
    assert 0 < net.to_attacker <= 3 * net.raced


def test_a_main_that_speaks_from_another_address_keeps_the_address_the_minion_joined() -> None:
    """A minion never moves its main: the main's address is the one it was given
    (``--join``), and multi-main recognises its mains by it.  Main's datagrams from
    elsewhere are taken, but nothing is sent there and the record stays."""
    pair = _pair(fast=True)
    net = pair.net
    _both_ways(pair, MINION, 0, 5)  # (answered links: no fallback to RAET mode below)
    pair.run_until(lambda: _seqs(net, MINION) == list(range(5))
                   and len(net.of_type(MAIN, events.MessageSent)) == 5)
    moved_main: Address = ("127.0.0.8", 7530)
    _move(net, MAIN, moved_main)
    for message in numbered(5):
        message["seq"] += 5
        pair.main.transmit(message, to="minion", now=net.now)
    net.run_for(10.0)
    assert _seqs(net, MINION) == list(range(10))  # authentic: delivered, once
    remote = pair.minion.remote("main")
    assert remote.host_address == MAIN
    assert pair.minion.stats.remotes_moved == 0
    assert not [s for s in pair.wire if s.source == MINION and s.destination == moved_main]


def test_an_idle_minion_that_moves_is_followed_at_its_next_presence_check() -> None:
    """A minion with nothing to send moves; main's messages to it go to the old address.
    Its next "alive?" (1.5 s after it last heard main) comes from the new address, main
    asks it "alive?" there, its answer moves it, and main's messages arrive: no new join
    or allow, each message once."""
    pair = _pair(fast=True)
    net = pair.net
    _both_ways(pair, MINION, 0, 5)
    pair.run_until(lambda: _seqs(net, MINION) == list(range(5))
                   and len(net.of_type(MAIN, events.MessageSent)) == 5
                   and len(net.of_type(MINION, events.MessageSent)) == 5)
    allows = pair.main.stats.allows_completed, pair.minion.stats.allows_completed
    _move(net, MINION, NEW)
    moved_at = net.now
    for message in numbered(5):
        message["seq"] += 5
        pair.main.transmit(message, to="minion", now=net.now)
    assert net.run_until(lambda: _seqs(net, NEW) == list(range(10)), timeout=10.0)
    followed = net.now - moved_at
    assert followed < 2.0  # the minion's presence period (1.5 s) and a round trip
    net.run_for(5.0)
    assert _seqs(net, NEW) == list(range(10))
    assert pair.main.remote("minion").host_address == NEW
    assert pair.main.stats.remotes_moved == 1
    assert (pair.main.stats.allows_completed, pair.minion.stats.allows_completed) == allows


def test_the_new_address_is_validated_once_the_remote_answered_there() -> None:
    """After the move, what main sends there is no longer held to 3x what came from there
    (the remote proved it receives there): a RAET-mode minion that moved and went quiet
    still gets main's 200 KB of messages."""
    pair = _pair(fast=False)
    net = pair.net
    _both_ways(pair, MINION, 0, 2)
    pair.run_until(lambda: _seqs(net, MINION) == list(range(2))
                   and len(net.of_type(MAIN, events.MessageSent)) == 2
                   and len(net.of_type(MINION, events.MessageSent)) == 2)
    _move(net, MINION, NEW)
    pair.minion.transmit({"seq": 2}, to="main", now=net.now)  # one small message from NEW
    assert net.run_until(lambda: pair.main.stats.remotes_moved == 1, timeout=5.0)
    for number in range(3, 23):
        pair.main.transmit({"seq": number, "pad": "x" * 10_000}, to="minion", now=net.now)
    assert net.run_until(lambda: _seqs(net, NEW) == list(range(2)) + list(range(3, 23)),
                         timeout=30.0)
    assert pair.main.stats.amplification_limited == 0
