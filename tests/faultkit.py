"""The fault matrix on the simulated link: each case builds a road, does something bad to it,
and returns a :class:`Row` saying what was done, what was sent, what arrived and the verdict.

Used by ``tests/test_fault_matrix_sim.py`` (CI-sized) and ``tools/fault_matrix.py`` (the
full matrix written into docs/reliability.md).  Everything runs on a virtual clock.
"""

from __future__ import annotations

import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from road import events
from road._fast_wire import is_fast
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack
from tests.roadkit import MAIN, MINION, OTHER, FilterNet, Pair, allowed_pair, make_pair
from tests.simlink import Address, Impairment

MODES = ("raet", "fast")


@dataclass
class Row:
    """One line of the fault matrix."""

    case: str
    mode: str
    done: str
    sent: str
    arrived: str
    ok: bool
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "pass" if self.ok else "FAIL"


def config(mode: str, **overrides: Any) -> RoadConfig:
    """A RoadConfig for ``mode`` ("raet" or "fast")."""
    return RoadConfig(fast=mode == "fast", **overrides)


def tracked(stack: RoadStack) -> int:
    """Open transactions plus the fast links' per-message state: what must not grow."""
    total = len(stack._transactions)
    for link in stack._fast.links.values():
        total += (len(link.sending.messages) + len(link.recovery.sent)
                  + len(link.receiving.partials) + len(link.sending.queue))
    return total


def _received(pair: Pair, address: Address) -> list[int]:
    return [e.body["seq"] for e in pair.events(address, events.MessageReceived)
            if isinstance(e.body, dict) and "seq" in e.body]


def _fates(pair: Pair, address: Address) -> tuple[int, int]:
    sent = len(pair.events(address, events.MessageSent))
    expired = len(pair.events(address, events.MessageExpired))
    return sent, expired


@dataclass
class Exchange:
    """Messages handed to both stacks of a pair, and what came of them."""

    pair: Pair
    count: int
    ids: dict[Address, list[int]] = field(default_factory=dict)

    def send(self, size: int = 64) -> None:
        for source, to in ((MINION, "main"), (MAIN, "minion")):
            stack = self.pair.stack(source)
            self.ids[source] = [stack.transmit({"seq": n, "pad": "x" * size}, to=to,
                                               now=self.pair.net.now)
                                for n in range(self.count)]

    def settled(self) -> bool:
        return all(sum(_fates(self.pair, a)) >= self.count for a in (MAIN, MINION)) and all(
            len(_received(self.pair, a)) >= self.count for a in (MAIN, MINION))

    def verdict(self) -> tuple[bool, str, dict[str, Any]]:
        """(ok, what arrived, figures): each side got every number exactly once."""
        ok = True
        parts = []
        figures: dict[str, Any] = {}
        for address, name in ((MAIN, "main"), (MINION, "minion")):
            seqs = _received(self.pair, address)
            twice = sum(c - 1 for c in Counter(seqs).values() if c > 1)
            missing = self.count - len(set(seqs))
            _sent, expired = _fates(self.pair, MINION if address == MAIN else MAIN)
            ok = ok and twice == 0 and missing == 0 and expired == 0
            parts.append(f"{name} {len(set(seqs))}/{self.count}, dup {twice}")
            figures[name] = {"received": len(seqs), "distinct": len(set(seqs)),
                             "twice": twice, "missing": missing, "expired_at_sender": expired}
        return ok, "; ".join(parts), figures


def impaired_exchange(mode: str, case: str, impairment: Impairment, *, count: int = 200,
                      seed: int = 1) -> Row:
    """Both sides send ``count`` messages through ``impairment``; each must arrive once."""
    pair = allowed_pair(seed=seed, impairment=impairment, main_config=config(mode),
                        minion_config=config(mode))
    exchange = Exchange(pair, count)
    exchange.send()
    finished = pair.net.run_until(exchange.settled, timeout=600)
    pair.net.run_for(5.0)  # late copies and retransmissions would show up here
    ok, arrived, figures = exchange.verdict()
    counters = pair.net.counters
    open_after = tracked(pair.main) + tracked(pair.minion)
    figures.update(virtual_s=round(pair.net.now, 1), link=vars(counters).copy(),
                   tracked_after=open_after,
                   dropped_main=dict(pair.main.stats.dropped),
                   dropped_minion=dict(pair.minion.stats.dropped))
    ok = ok and finished and open_after <= 4  # an alive may be open, no message state
    link = (f"link: {counters.sent} datagrams, {counters.dropped} lost, "
            f"{counters.duplicated} duplicated, {counters.corrupted} corrupted")
    return Row(case, mode, link, f"{count} each way", arrived + (
        "" if finished else " (not settled)"), ok, figures)


def impairments() -> dict[str, Impairment]:
    """The link rows of the matrix."""
    return {
        "loss 1%": Impairment(loss=0.01),
        "loss 5%": Impairment(loss=0.05),
        "loss 20%": Impairment(loss=0.20),
        "duplication 10%": Impairment(duplicate=0.10),
        "reordering (jitter 20 ms)": Impairment(jitter=0.02),
        "corruption 5%": Impairment(corrupt=0.05),
        "all at once (5% each + jitter)": Impairment(loss=0.05, duplicate=0.05, corrupt=0.05,
                                                     jitter=0.01),
    }


def partition(mode: str, *, seconds: float = 30.0, count: int = 100) -> Row:
    """A 100% partition for ``seconds`` of virtual time while messages are queued; then healing."""
    pair = allowed_pair(seed=2, main_config=config(mode), minion_config=config(mode))
    exchange = Exchange(pair, count)
    exchange.send()
    pair.net.run_for(0.002)  # some are in flight when the link goes
    pair.net.blocked |= {MAIN, MINION}
    pair.net.run_for(seconds)
    lost = [e.remote for e in pair.events(MINION, events.RemoteLost)]
    pair.net.blocked.clear()
    healed_at = pair.net.now
    finished = pair.net.run_until(exchange.settled, timeout=300)
    pair.net.run_for(5.0)
    ok, arrived, figures = exchange.verdict()
    figures.update(lost_events=len(lost), heal_s=round(pair.net.now - healed_at, 1),
                   tracked_after=tracked(pair.main) + tracked(pair.minion))
    ok = ok and finished and bool(lost)
    return Row("partition 100% for 30 s (virtual), then healed", mode,
               f"link blocked both ways {seconds:.0f} s; presence lost on both sides: {bool(lost)}",
               f"{count} each way, queued before the cut", arrived + (
                   f"; all within {figures['heal_s']} s of healing" if finished else
                   " (not settled)"), ok, figures)


def impersonation(mode: str) -> Row:
    """An estate with the minion's name and role but new keys joins main: rejected."""
    pair = allowed_pair(seed=3, main_config=config(mode), minion_config=config(mode))
    impostor = RoadStack(LocalEstate("minion"), config(mode))
    pair.net.add(OTHER, impostor)
    before = len(pair.events(MAIN, events.MessageReceived))
    impostor.join(MAIN, now=pair.net.now)
    pair.net.run_for(10.0)
    tried = 0
    for impostor_remote in list(impostor.remotes.values()):
        impostor.transmit({"seq": -1, "forged": True}, to=impostor_remote.name,
                          now=pair.net.now)
        tried += 1
    pair.net.run_for(10.0)
    delivered = len(pair.events(MAIN, events.MessageReceived)) - before
    keys_kept = pair.main.remote("minion").verify_key == pair.minion.local.signing_key.verify_key
    rejected = bool(pair.net.of_type(OTHER, events.JoinRejected)) or bool(
        pair.net.of_type(OTHER, events.RemoteRemoved))
    joined = bool(pair.net.of_type(OTHER, events.Joined))
    # the real minion still gets through
    pair.minion.transmit({"seq": 1}, to="main", now=pair.net.now)
    pair.net.run_until(lambda: len(pair.events(MAIN, events.MessageReceived)) > before, 30)
    real = len(pair.events(MAIN, events.MessageReceived)) - before
    ok = delivered == 0 and keys_kept and not joined and real == 1
    return Row("impersonation (same name and role, new keys)", mode,
               "impostor at another address joins main vacuously, then transmits to every "
               f"remote it still has ({tried})",
               f"{tried} forged message(s)",
               f"0 delivered from the impostor ({delivered}); impostor rejected: {rejected}, "
               f"joined: {joined}; main kept the real keys: {keys_kept}; real minion then "
               f"delivered {real}/1", ok,
               {"rejected": rejected, "joined": joined, "dropped_main": dict(
                   pair.main.stats.dropped)})


def replay(mode: str, *, count: int = 50) -> Row:
    """Every datagram of a session, replayed into both sides after a new allow: dropped."""
    pair = make_pair(seed=4, main_config=config(mode), minion_config=config(mode))
    captured: list[tuple[bytes, Address, Address]] = []
    previous = pair.net.tap

    def tap(data: bytes, source: Address, destination: Address) -> None:
        captured.append((data, source, destination))
        if previous is not None:
            previous(data, source, destination)

    pair.net.tap = tap
    pair.allow()
    exchange = Exchange(pair, count)
    exchange.send()
    pair.net.run_until(exchange.settled, timeout=60)
    pair.net.tap = previous
    # a new session: the minion allows again (new short-term keys)
    pair.minion.allow("main", now=pair.net.now)
    pair.net.run_until(lambda: len(pair.events(MINION, events.Allowed)) >= 2, 30)
    before = {a: len(pair.events(a, events.MessageReceived)) for a in (MAIN, MINION)}
    drops_before = pair.main.stats.dropped_total + pair.minion.stats.dropped_total
    for data, source, destination in captured:
        pair.net.inject(data, source, destination)
    pair.net.run_for(10.0)
    again = sum(len(pair.events(a, events.MessageReceived)) - before[a] for a in (MAIN, MINION))
    drops = pair.main.stats.dropped_total + pair.minion.stats.dropped_total - drops_before
    ok = again == 0 and drops > 0
    return Row("replay of an earlier session", mode,
               f"{len(captured)} captured datagrams (join, allow, {count} messages each way) "
               "replayed after a new allow",
               f"{len(captured)} replayed",
               f"{again} delivered again; {drops} counted as dropped "
               f"(main {dict(pair.main.stats.dropped)})", ok,
               {"replayed": len(captured), "delivered_again": again, "dropped": drops})


def forged_and_truncated(mode: str, *, count: int = 20) -> Row:
    """Message datagrams with flipped signature/body bytes, and cut ones: dropped, counted."""
    pair = make_pair(seed=5, main_config=config(mode), minion_config=config(mode))
    captured: list[bytes] = []
    previous = pair.net.tap

    def tap(data: bytes, source: Address, destination: Address) -> None:
        if source == MINION:
            captured.append(data)
        if previous is not None:
            previous(data, source, destination)

    pair.net.tap = tap
    pair.allow()
    captured.clear()
    exchange = Exchange(pair, count)
    exchange.send()
    pair.net.run_until(exchange.settled, timeout=60)
    pair.net.tap = previous
    pair.net.run_for(3.0)
    before = len(pair.events(MAIN, events.MessageReceived))
    drops_before = pair.main.stats.dropped_total
    bad: list[bytes] = []
    for index, original in enumerate(captured[:count]):
        data = original
        if is_fast(data):  # a fresh packet number, or the replay window would catch it first
            data = data[:12] + (1 << 40 | index).to_bytes(8, "big") + data[20:]
        forged = bytearray(data)
        forged[-1 - index % 8] ^= 0x55  # the signature (RAET) or the AEAD tag (fast)
        bad.append(bytes(forged))
        forged = bytearray(data)
        forged[len(data) // 2] ^= 0x01  # the body
        bad.append(bytes(forged))
        bad.append(data[: max(1, len(data) * index // (count + 1))])  # truncated
    for data in bad:
        pair.net.inject(data, MINION, MAIN)
    pair.net.run_for(3.0)
    delivered = len(pair.events(MAIN, events.MessageReceived)) - before
    drops = pair.main.stats.dropped_total - drops_before
    ok = delivered == 0 and drops == len(bad)
    return Row("forged and truncated datagrams", mode,
               f"{len(bad)} datagrams from the minion's address: flipped tag/signature bytes, "
               "flipped body bytes, cut short (fast: with unused packet numbers)",
               f"{len(bad)} injected", f"{delivered} delivered; {drops}/{len(bad)} dropped and "
               f"counted ({dict(pair.main.stats.dropped)})", ok,
               {"injected": len(bad), "dropped": drops, "delivered": delivered})


def flood_requests(count: int, mode: str) -> list[bytes]:
    """``count`` vacuous join requests, each from a different fresh estate."""
    out = []
    for index in range(count):
        stranger = RoadStack(LocalEstate(f"flood{index}"), config(mode, keepalive=False))
        stranger.join(MAIN, now=0.0)
        datagrams = stranger.datagrams_to_send(0.0)
        out.append(datagrams[0][0])
    return out


def join_flood(mode: str, *, strangers: int = 2000, joined: int = 10,
               rounds: int = 3, cap: int = 1000) -> Row:
    """Vacuous joins from ``strangers`` addresses (each sent ``rounds`` times, never acked)
    while ``joined`` estates keep exchanging messages with main."""
    net = FilterNet(seed=6)
    main = RoadStack(LocalEstate("main", main=True), config(mode, max_pending_joins=cap),
                     MemoryKeep())
    net.add(MAIN, main)
    minions = []
    for index in range(joined):
        address = ("127.0.0.2", 8000 + index)
        minion = RoadStack(LocalEstate(f"m{index}"), config(mode))
        net.add(address, minion)
        minion.join(MAIN, now=net.now)
        minions.append((address, minion))
    assert net.run_until(lambda: len(net.of_type(MAIN, events.Allowed)) >= joined, 60)
    requests = flood_requests(strangers, mode)
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    peak_remotes = peak_joinees = peak_transactions = 0
    sent = 0
    for _round in range(rounds):
        for index, data in enumerate(requests):
            net.inject(data, (f"10.{index // 60000}.{index // 250 % 240}.{index % 250}",
                              40000 + index % 20000), MAIN)
        for _address, minion in minions:
            minion.transmit({"seq": sent}, to="main", now=net.now)
        sent += 1
        for _ in range(20):
            net.run_for(0.05)
            peak_remotes = max(peak_remotes, len(main.remotes))
            peak_joinees = max(peak_joinees, len(main.joinees))
            peak_transactions = max(peak_transactions, len(main._transactions))
    _, peak_memory = tracemalloc.get_traced_memory()
    net.run_for(30.0)  # every stranger's join times out
    for _address, minion in minions:
        minion.transmit({"seq": sent}, to="main", now=net.now)
    sent += 1
    net.run_for(5.0)
    after_memory, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    got = Counter(e.remote for e in net.of_type(MAIN, events.MessageReceived))
    all_in = all(got[f"m{i}"] == sent for i in range(joined))
    lost = len(net.of_type(MAIN, events.RemoteLost))
    figures = {
        "flood_datagrams": strangers * rounds, "peak_remotes": peak_remotes,
        "peak_joinees": peak_joinees, "peak_transactions": peak_transactions,
        "remotes_after": len(main.remotes), "joinees_after": len(main.joinees),
        "transactions_after": len(main._transactions),
        "peak_memory_mb": round((peak_memory - base) / 1e6, 1),
        "memory_after_mb": round((after_memory - base) / 1e6, 1),
        "dropped": {k.value: v for k, v in main.stats.dropped.items()},
        "lost_events": lost,
    }
    bounded = (peak_remotes <= joined + cap and len(main.remotes) <= joined + cap
               and peak_transactions <= 2 * (joined + cap))
    figures.update(evicted=main.stats.joins_evicted, cap=cap)
    ok = all_in and bounded and lost == 0
    return Row(f"vacuous join flood ({strangers} addresses x {rounds})", mode,
               f"{strangers * rounds} join requests from {strangers} addresses, never acked, "
               f"while {joined} joined estates send",
               f"{sent} messages from each joined estate",
               f"joined estates: {'all' if all_in else 'NOT all'} delivered, {lost} lost "
               f"presence; main: peak {peak_remotes} remotes / {peak_joinees} joinees / "
               f"{peak_transactions} transactions, after {len(main.remotes)} / "
               f"{len(main.joinees)} / {len(main._transactions)} (cap {cap}, "
               f"{main.stats.joins_evicted} evicted); traced memory peak "
               f"{figures['peak_memory_mb']} MB, after {figures['memory_after_mb']} MB",
               ok, figures)


def run_all(rows: Iterable[Callable[[], Row]]) -> list[Row]:
    return [make() for make in rows]
