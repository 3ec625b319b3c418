"""Join spam: strangers reaped, pending keys capped and expired, extras bounded, per-source
rates, back-off, and unsigned joins that change nothing of an established remote."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from raetlike.wire.kinds import Acceptance, AutoMode, PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet, parse_packet
from road import events
from road.keeping import MemoryKeep
from road.persist import open_estate
from road.stack import LocalEstate, RoadConfig, RoadStack
from road.stats import Drop
from tests.roadkit import MAIN, MINION, OTHER, Sent, make_pair
from tests.test_road_amplification import forged_join

ALLOW, JOIN = TransactionKind.ALLOW, TransactionKind.JOIN


def fake_address(index: int) -> tuple[str, int]:
    return (f"10.{index // 60000}.{index // 250 % 240}.{index % 250}", 40000 + index % 20000)


def test_a_real_joiner_joins_allows_and_talks_through_thousands_of_fake_joins() -> None:
    pair = make_pair()
    fakes = [forged_join(f"fake{i}") for i in range(2000)]
    for index, (request, ack) in enumerate(fakes):
        pair.net.inject(request, fake_address(index), MAIN)
        pair.net.inject(ack, fake_address(index), MAIN)
        if index == 1000:
            pair.minion.join(MAIN, now=pair.net.now)
        pair.net.run_for(0.001)
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=30.0)
    for n in range(20):
        pair.minion.transmit({"n": n}, to="main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 20)
    assert pair.main.stats.joins_completed >= 2000
    pair.net.run_for(61.0)  # no fake ever allowed: all reaped, their roles forgotten
    assert list(pair.main.names) == ["minion"]
    assert pair.main.stats.strangers_reaped == 2000
    assert list(pair.main.keep.roles) == ["minion"]  # type: ignore[attr-defined]
    pair.minion.transmit({"n": 20}, to="main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 21)


def test_the_main_backs_off_and_withholds_hellos_to_fake_joined_estates() -> None:
    pair = make_pair()
    for index in range(50):
        request, ack = forged_join(f"fake{index}")
        pair.net.inject(request, fake_address(index), MAIN)
        pair.net.inject(ack, fake_address(index), MAIN)
    pair.net.run_for(30.0)
    assert len(pair.main.remotes) == 50
    pair.net.run_until(lambda: len(pair.main.remotes) < 50, timeout=40.0)
    assert pair.net.now >= 60.0  # reaped at unallowed_reap_after, not before
    hellos = pair.sent(ALLOW, PacketKind.HELLO, source=MAIN)
    # before: ~1.4 hellos/s to each (~84 each in 60 s); now the main starts an allow at
    # about 1, 3, 7, 15, 31 s (doubling), and an unvalidated address gets 3x the bytes of
    # its request and ack: one hello each, the rest withheld
    assert len(hellos) <= 50 * 2
    assert len(pair.events(MAIN, events.AllowFailed)) <= 50 * 5
    assert pair.main.stats.amplification_limited > 50
    pair.net.run_for(1.0)
    assert not pair.main.remotes


def test_a_remote_we_allowed_that_goes_silent_is_checked_less_and_less_often() -> None:
    pair = make_pair()
    pair.allow()
    pair.net.blocked.add(MINION)
    start = pair.net.now
    pair.net.run_for(120.0)
    asked = [s for s in pair.sent(TransactionKind.ALIVE, PacketKind.REQUEST, source=MAIN)
             if s.at > start]
    # before: an alive (4 packets) every ~3 s, ~160 packets; now 1, 2, 4, ... 64 s apart
    assert len(asked) <= 4 * 7
    pair.net.blocked.clear()
    pair.run_until(lambda: len(pair.events(MAIN, events.Alive)) >= 2, timeout=70.0)


def test_pending_keys_are_capped_and_the_joiner_is_answered_once_there_is_room() -> None:
    keep = MemoryKeep(AutoMode.NEVER)
    pair = make_pair(main_keep=keep, main_config=RoadConfig(
        fast=False, max_pending_keys=5, pending_key_ttl=100.0, unallowed_reap_after=0))
    for index in range(10):
        request, _ = forged_join(f"fake{index}")
        pair.net.inject(request, fake_address(index), MAIN)
    pair.net.run_for(1.0)
    assert len(keep.roles) == 5
    assert pair.main.stats.dropped[Drop.PENDING_KEYS_FULL] == 5
    pair.minion.join(MAIN, now=pair.net.now)
    pair.net.run_for(10.0)
    assert "minion" not in keep.roles  # full: dropped unanswered, the minion retries
    assert not pair.events(MINION, events.JoinRejected)
    pair.net.run_for(100.0)  # the fakes' pending keys expire; the minion's retry gets in
    pair.run_until(lambda: bool(pair.events(MAIN, events.JoinPending)), timeout=10.0)
    assert pair.main.stats.pending_keys_expired == 5
    assert keep.roles["minion"].acceptance is Acceptance.PENDING
    keep.accept("minion")
    pair.run_until(lambda: bool(pair.events(MINION, events.Allowed)), timeout=30.0)


def test_pending_and_rejected_role_files_expire_from_a_file_keep(tmp_path: Path) -> None:
    local, keep = open_estate(tmp_path, "main", main=True, host_address=MAIN,
                              auto=AutoMode.NEVER)
    main = RoadStack(local, RoadConfig(auto=AutoMode.NEVER, pending_key_ttl=30.0,
                                       max_pending_keys=3), keep=keep)
    for index in range(6):
        request, _ = forged_join(f"fake{index}")
        main.receive_datagram(request, fake_address(index), float(index))
    roles = tmp_path / "main" / "role" / "remote"
    assert len(list(roles.iterdir())) == 3
    keep.keep.reject("fake1")  # an operator's rejection, under auto never, expires as well
    request, _ = forged_join("late")
    main.receive_datagram(request, fake_address(99), 40.0)
    assert sorted(p.name for p in roles.iterdir()) == ["role.late.json"]
    assert main.stats.pending_keys_expired == 3
    restarted = RoadStack(local, RoadConfig(auto=AutoMode.NEVER, pending_key_ttl=30.0),
                          keep=keep, now=1000.0)
    keep.restore_remotes(restarted)
    assert list(restarted.admission.since) == ["late"]


def test_an_operator_rejection_does_not_expire_under_auto_once() -> None:
    keep = MemoryKeep(AutoMode.ONCE)
    pair = make_pair(main_keep=keep, main_config=RoadConfig(fast=False, pending_key_ttl=1.0))
    pair.allow()
    keep.reject("minion")
    assert not keep.expire_role("minion")
    assert keep.roles["minion"].acceptance is Acceptance.REJECTED


def test_a_join_body_with_thousands_of_extra_keys_keeps_a_few_short_ones(tmp_path: Path) -> None:
    local, keep = open_estate(tmp_path, "main", main=True, host_address=MAIN)
    pair = make_pair(main_config=RoadConfig(), minion_config=RoadConfig())
    main = RoadStack(local, RoadConfig(), keep=keep)
    pair.net.stacks[MAIN] = main
    pair.main = main
    junk: dict[str, object] = {f"k{i}": i for i in range(2000)}  # a ~20 kB datagram
    junk["x" * 40] = 1  # too long a key

    def swell(sent: Sent) -> bool:
        """Replace the minion's join request with one carrying ``junk`` as well."""
        if (sent.source, sent.head.transaction_kind, sent.head.packet_kind) != (
                MINION, JOIN, PacketKind.REQUEST):
            return False
        packet = parse_packet(sent.data)
        body = {**json.loads(packet.coat), **junk}
        pair.net.inject(pack_packet(packet.head, json.dumps(body).encode(), limit=65000),
                        MINION, MAIN)
        return True

    pair.net.drop = swell
    pair.allow()
    at_main = main.remote("minion")
    assert len(at_main.capabilities) == 16
    assert "rlk" in at_main.capabilities
    assert main._fast.links  # fast mode negotiated all the same
    keep.flush()
    traits = tmp_path / "main" / "raetlike" / "remote.minion.json"
    assert len(json.loads(traits.read_text())["capabilities"]) == 16
    assert traits.stat().st_size < 400
    main.transmit({"fast": True}, to="minion", now=pair.net.now)
    pair.run_until(lambda: bool(pair.events(MINION, events.MessageReceived)))


def test_join_requests_from_one_ip_address_are_rate_limited() -> None:
    main = RoadStack(LocalEstate("main", main=True),
                     RoadConfig(join_rate_per_source=2.0, join_burst_per_source=20))
    for index in range(50):
        request, _ = forged_join(f"fake{index}")
        main.receive_datagram(request, ("10.1.1.1", 30000 + index), 0.0)
    assert main.stats.dropped[Drop.JOIN_RATE_LIMITED] == 30
    assert len(main.remotes) == 20
    request, _ = forged_join("later")
    main.receive_datagram(request, ("10.1.1.1", 31000), 0.5)  # one token refilled
    assert main.stats.dropped[Drop.JOIN_RATE_LIMITED] == 30
    request, _ = forged_join("elsewhere")
    main.receive_datagram(request, ("10.2.2.2", 31000), 0.5)  # another address: its own bucket
    assert len(main.remotes) == 22


def _state(pair_main: RoadStack) -> tuple[object, ...]:
    remote = pair_main.remote("minion")
    return (remote.host_address, remote.far_uid, remote.session_id, remote.remote_session_id,
            remote.joined, remote.allowed, remote.verify_key, remote.public_key,
            remote.capabilities, remote.session_box)


def test_unsigned_joins_and_acks_change_nothing_of_an_allowed_remote() -> None:
    pair = make_pair()
    pair.allow()
    pair.minion.transmit({"n": 0}, to="main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 1)
    request = pair.sent(JOIN, PacketKind.REQUEST, source=MINION)[0].data
    ack = pair.sent(JOIN, PacketKind.ACK, source=MINION)[0].data
    before = _state(pair.main)
    for source in (MINION, OTHER):  # the same address spoofed, and another one
        for _ in range(3):
            pair.main.receive_datagram(request, source, pair.net.now)
            pair.main.receive_datagram(ack, source, pair.net.now)
            pair.net.run_for(0.5)
    fake, _ = forged_join("minion")  # its name, other keys
    pair.main.receive_datagram(fake, OTHER, pair.net.now)
    pair.net.run_for(1.0)
    assert _state(pair.main) == before
    for n in range(1, 11):  # RAET mode: its next messages are not stale
        pair.minion.transmit({"n": n}, to="main", now=pair.net.now)
    pair.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) == 11)
    assert pair.main.stats.dropped[Drop.STALE_SESSION] == 0


def test_an_unsigned_reject_does_not_remove_an_established_remote() -> None:
    pair = make_pair()
    pair.allow()
    pair.minion.join(name="main", now=pair.net.now)  # a re-join of the main it knows
    [(request, _)] = [(d, a) for d, a in pair.minion.datagrams_to_send(pair.net.now)]
    pair.main.receive_datagram(request, MINION, pair.net.now)
    [(response, _)] = pair.main.datagrams_to_send(pair.net.now)
    head = parse_packet(response).head
    reject = pack_packet(dataclasses.replace(head, packet_kind=PacketKind.REJECT), b"")
    pair.minion.receive_datagram(reject, MAIN, pair.net.now)
    assert "main" in pair.minion.names
    assert pair.events(MINION, events.RemoteRemoved) == []


def test_max_pending_joins_is_read_at_each_use() -> None:
    pair = make_pair()
    pair.main.config.max_pending_joins = 1
    for n in range(3):
        other = RoadStack(LocalEstate(f"m{n}"), RoadConfig())
        pair.net.add(("127.0.0.1", 7600 + n), other)
        other.join(MAIN, now=pair.net.now)
    pair.net.run_for(0.002)
    assert pair.main.stats.joins_evicted >= 1


def test_a_stranger_evicted_by_max_pending_joins_leaves_its_role_held_bounded_and_timed() -> None:
    """Under auto once each fake join records its role.  A stranger evicted past
    ``max_pending_joins`` leaves its role held (so a flood cannot free the role of one that
    joined lately for other keys), at most ``max_unproven_roles`` of them, each forgotten
    ``unallowed_reap_after`` after its join: none stays for good."""
    keep = MemoryKeep(AutoMode.ONCE)
    config = RoadConfig(fast=False, max_pending_joins=2, max_unproven_roles=4,
                        unallowed_reap_after=10.0, auto=AutoMode.ONCE)
    pair = make_pair(main_config=config, main_keep=keep)

    def fake(n: int) -> None:
        request, _ = forged_join(f"fake{n}")
        pair.net.inject(request, (f"10.9.0.{n + 1}", 40000), MAIN)
        pair.net.run_for(0.01)

    for n in range(5):
        fake(n)
    assert pair.main.stats.joins_evicted == 3
    assert sorted(keep.roles) == ["fake1", "fake2", "fake3", "fake4"]  # fake0: past the bound
    assert list(pair.main.admission.unproven) == ["fake1", "fake2", "fake3", "fake4"]
    pair.net.run_to(10.015)  # fake1 joined 10 s ago (at 0.01), fake2 not yet (at 0.02)
    fake(5)
    assert sorted(keep.roles) == ["fake2", "fake3", "fake4", "fake5"]
    pair.net.run_for(config.unallowed_reap_after)
    assert not keep.roles
    assert not pair.main.admission.unproven
