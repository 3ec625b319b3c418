"""The full fault matrix: simulated-link rows (RAET and fast mode) and real-process rows
(``raetlike estate`` processes, ``raetlike chaos``, SIGKILL restarts), written as a table
into docs/reliability.md between the ``fault-matrix`` markers.

    .venv/bin/python tools/fault_matrix.py [--quick] [--no-write] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from raetlike.run import Loop  # noqa: E402
from raetlike.udp import UdpDriver, parse_host_port  # noqa: E402
from road import events  # noqa: E402
from road.stack import LocalEstate, RoadStack  # noqa: E402
from tests import faultkit  # noqa: E402
from tests.faultkit import Row  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- fault-matrix:begin -->", "<!-- fault-matrix:end -->"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class Process:
    """A ``raetlike`` child whose first stdout line names its address."""

    def __init__(self, log: Path, prefix: str, *args: str) -> None:
        self.log = log
        with log.open("ab") as stderr:
            self.process = subprocess.Popen([sys.executable, "-m", "raetlike", *args],
                                            stdout=subprocess.PIPE, stderr=stderr, env=_env(),
                                            cwd=ROOT)
        assert self.process.stdout is not None  # noqa: S101 - stdout=PIPE
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(15):
                raise RuntimeError(f"no address line: {log.read_text()}")
        line = self.process.stdout.readline().decode().strip()
        if not line.startswith(prefix):
            raise RuntimeError(f"{line!r}: {log.read_text()}")
        self.address = line.removeprefix(prefix).split()[0]

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> str:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        out, _ = self.process.communicate(timeout=15)
        return out.decode()


def estate(base: Path, name: str, port: int = 0, *extra: str) -> Process:
    return Process(base / f"{name}.log", f"estate {name} listening on ", "estate", name,
                   "--host", "127.0.0.1", "--port", str(port), "--echo", "--auto", "once",
                   "--keep", str(base / "keep"), *extra)


def chaos(base: Path, forward: str, *impairments: str) -> Process:
    return Process(base / "chaos.log", "chaos listening on ", "chaos", "--listen",
                   "127.0.0.1:0", "--forward", forward, "--seed", "1", *impairments)


def chaos_counters(relay: Process) -> dict[str, dict[str, int]]:
    counters: dict[str, dict[str, int]] = json.loads(relay.stop().strip().splitlines()[-1])
    return counters


class Client:
    """An in-process estate (RAET or fast mode) that transmits numbered messages to an
    echoing estate and keeps the fate of each: echoed (how often), acknowledged, handed back."""

    def __init__(self, mode: str, name: str = "client", main: bool = False) -> None:
        self.stack = RoadStack(LocalEstate(name, main=main), faultkit.config(mode),
                               now=time.monotonic())
        self.loop = Loop()
        self.driver = UdpDriver(self.stack, "127.0.0.1", 0)
        self.loop.add(self.driver)
        self.allowed: list[str] = []
        self.echoes: Counter[int] = Counter()
        self.acked: set[int] = set()
        self.expired: set[int] = set()
        self.ids: dict[int, int] = {}  # message id -> seq

    def take(self) -> bool:
        while (event := self.stack.next_event()) is not None:
            if isinstance(event, events.Allowed):
                self.allowed.append(event.remote)
            elif isinstance(event, events.MessageReceived) and isinstance(event.body, dict):
                self.echoes[int(event.body.get("seq", -1))] += 1
            elif isinstance(event, events.MessageSent):
                self.acked.add(self.ids.get(event.message_id, -1))
            elif isinstance(event, events.MessageExpired):
                self.expired.add(self.ids.get(event.message_id, -1))
        return True

    def run_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        return self.loop.run_until(lambda: self.take() and condition(), timeout=timeout)

    def join(self, address: str, timeout: float = 20.0) -> str:
        self.stack.join(parse_host_port(address), now=time.monotonic())
        if not self.run_until(lambda: bool(self.allowed), timeout):
            raise RuntimeError("join/allow timed out")
        return self.allowed[0]

    def send(self, to: str, seqs: range, size: int = 64) -> None:
        for seq in seqs:
            message_id = self.stack.transmit({"seq": seq, "pad": "x" * size}, to=to,
                                             now=time.monotonic())
            self.ids[message_id] = seq

    def settled(self, count: int) -> bool:
        return all(self.echoes[s] or s in self.expired for s in range(count))

    def close(self) -> None:
        self.stack.close(now=time.monotonic())
        self.take()
        self.loop.close()

    def verdict(self, count: int) -> tuple[bool, str, dict[str, Any]]:
        echoed = sum(1 for s in range(count) if self.echoes[s])
        twice = sum(c - 1 for c in self.echoes.values() if c > 1)
        silent = [s for s in range(count)
                  if not self.echoes[s] and s not in self.expired and s not in self.acked]
        figures = {"echoed": echoed, "twice": twice, "expired": len(self.expired),
                   "acked_no_echo": sum(1 for s in self.acked if not self.echoes[s]),
                   "silent": len(silent), "dropped": {k.value: v for k, v in
                                                      self.stack.stats.dropped.items()}}
        ok = twice == 0 and not silent
        return ok, (f"{echoed}/{count} echoed, {twice} twice, {len(self.expired)} handed back "
                    f"(MessageExpired), {figures['acked_no_echo']} acknowledged whose echo "
                    f"died with a killed process, {len(silent)} unaccounted"), figures


def process_impairment(base: Path, mode: str, case: str, impairment: list[str],
                       count: int) -> Row:
    main = estate(base, "master", 0, "--main")
    relay = chaos(base, main.address, *impairment)
    client = Client(mode)
    started = time.monotonic()
    try:
        name = client.join(relay.address)
        client.send(name, range(count))
        client.run_until(lambda: client.settled(count), timeout=120)
    finally:
        client.close()
        counters = chaos_counters(relay)
        main.stop()
    ok, arrived, figures = client.verdict(count)
    ok = ok and figures["echoed"] == count
    up, down = counters["upstream"], counters["downstream"]
    figures.update(relay=counters, wall_s=round(time.monotonic() - started, 1))
    done = (f"`chaos {' '.join(impairment)}`: up {up['received']} in, {up['lost']} lost, "
            f"{up['duplicated']} dup, {up['reordered']} reord, {up['corrupted']} corrupt; "
            f"down {down['received']} in, {down['lost']} lost, {down['duplicated']} dup, "
            f"{down['reordered']} reord, {down['corrupted']} corrupt")
    return Row(f"{case} (processes, chaos relay)", mode, done,
               f"{count} to an echoing main process", arrived, ok, figures)


def process_partition(base: Path, mode: str, count: int, seconds: float = 5.0) -> Row:
    main = estate(base, "master", 0, "--main")
    relay = chaos(base, main.address)
    client = Client(mode)
    try:
        name = client.join(relay.address)
        client.send(name, range(count))
        client.run_until(lambda: sum(1 for s in range(count) if client.echoes[s]) > count // 4,
                         timeout=30)
        relay.process.send_signal(signal.SIGUSR1)
        client.run_until(lambda: False, timeout=seconds)
        relay.process.send_signal(signal.SIGUSR1)
        healed = time.monotonic()
        client.run_until(lambda: client.settled(count), timeout=120)
        heal_s = time.monotonic() - healed
    finally:
        client.close()
        counters = chaos_counters(relay)
        main.stop()
    ok, arrived, figures = client.verdict(count)
    ok = ok and figures["echoed"] == count
    return Row("partition 100% for 5 s (processes, chaos SIGUSR1)", mode,
               f"relay dropped everything for {seconds:.0f} s mid-transfer (lost up "
               f"{counters['upstream']['lost']}, down {counters['downstream']['lost']})",
               f"{count} to an echoing main process",
               f"{arrived}; done {heal_s:.1f} s after healing", ok, figures)


def kill_main(base: Path, mode: str, count: int) -> Row:
    """SIGKILL the main process mid-transfer, restart it from its keep on the same port."""
    main = estate(base, "master", 0, "--main")
    port = parse_host_port(main.address)[1]
    client = Client(mode)
    try:
        name = client.join(main.address)
        client.send(name, range(count))
        client.run_until(lambda: sum(1 for s in range(count) if client.echoes[s]) > count // 3,
                         timeout=30)
        main.stop(signal.SIGKILL)
        time.sleep(0.5)
        main = estate(base, "master", port, "--main")
        client.run_until(lambda: client.settled(count), timeout=60)
        # what died with the killed process: send again by hand, as an application would
        missing = [s for s in range(count) if not client.echoes[s]]
        client.send(name, range(count, count + 50))
        client.run_until(lambda: all(client.echoes[s] for s in range(count, count + 50)), 60)
        after = sum(1 for s in range(count, count + 50) if client.echoes[s])
    finally:
        client.close()
        main.stop()
    ok, arrived, figures = client.verdict(count)
    ok = ok and after == 50
    return Row("main SIGKILLed mid-transfer, restarted with --keep", mode,
               "kill -9 after a third of the echoes, same keep and port 0.5 s later",
               f"{count} + 50 after the restart",
               f"{arrived}; {len(missing)} without echo; 50 sent after restart: {after}/50 "
               "echoed", ok, figures)


def kill_joiner(base: Path, mode: str, count: int) -> Row:
    """SIGKILL a joiner process mid-transfer (main in process sends to it); restart it."""
    client = Client(mode, "main", main=True)
    host, port = client.driver.address
    joiner = estate(base, "joiner", 0, "--join", f"{host}:{port}")
    jport = parse_host_port(joiner.address)[1]
    try:
        client.run_until(lambda: bool(client.allowed), 20)
        name = client.allowed[0]
        client.send(name, range(count))
        client.run_until(lambda: sum(1 for s in range(count) if client.echoes[s]) > count // 3,
                         timeout=30)
        joiner.stop(signal.SIGKILL)
        time.sleep(0.5)
        joiner = estate(base, "joiner", jport, "--join", f"{host}:{port}")
        client.run_until(lambda: client.settled(count), timeout=60)
        client.send(name, range(count, count + 50))
        client.run_until(lambda: all(client.echoes[s] for s in range(count, count + 50)), 60)
        after = sum(1 for s in range(count, count + 50) if client.echoes[s])
    finally:
        client.close()
        joiner.stop()
    ok, arrived, figures = client.verdict(count)
    ok = ok and after == 50
    return Row("joiner SIGKILLed mid-transfer, restarted with --keep", mode,
               "main (in process) sends to an echoing joiner process; kill -9 after a third, "
               "same keep and port 0.5 s later", f"{count} + 50 after the restart",
               f"{arrived}; 50 sent after restart: {after}/50 echoed", ok, figures)


def main_with_ten(base: Path) -> Row:
    """A main process with 10 joined estate processes is killed and restarted."""
    main = estate(base, "master", 0, "--main")
    port = parse_host_port(main.address)[1]
    minions = [estate(base, f"m{i}", 0, "--join", main.address) for i in range(10)]
    try:
        time.sleep(4)
        main.stop(signal.SIGKILL)
        mark = main.log.stat().st_size
        main = estate(base, "master", port, "--main")
        deadline = time.monotonic() + 30
        allowed: set[str] = set()
        while time.monotonic() < deadline and len(allowed) < 10:
            time.sleep(0.5)
            text = main.log.read_bytes()[mark:].decode(errors="replace")
            allowed = {f"m{i}" for i in range(10) if f"allowed m{i} " in text}
        client = Client("fast")
        try:
            name = client.join(main.address)
            client.send(name, range(20))
            client.run_until(lambda: client.settled(20), 20)
            echoed = sum(1 for s in range(20) if client.echoes[s])
        finally:
            client.close()
    finally:
        for process in minions:
            process.stop()
        main.stop()
    ok = len(allowed) == 10 and echoed == 20
    return Row("main with 10 joined estates SIGKILLed and restarted", "default",
               "11 processes; kill -9 main, restart from its keep on the same port",
               "20 pings after the restart", f"{len(allowed)}/10 estates allowed again "
               f"(main's log); pings {echoed}/20 echoed", ok, {"allowed_again": len(allowed)})


def sim_rows(quick: bool) -> list[Row]:
    rows = []
    count = 100 if quick else 300
    for mode in faultkit.MODES:
        for case, impairment in faultkit.impairments().items():
            rows.append(faultkit.impaired_exchange(mode, f"{case} (sim)", impairment,
                                                   count=count))
        rows.append(faultkit.partition(mode))
        rows.append(faultkit.impersonation(mode))
        rows.append(faultkit.replay(mode))
        rows.append(faultkit.forged_and_truncated(mode))
        rows.append(faultkit.join_flood(mode, strangers=300 if quick else 3000))
    return rows


def process_rows(quick: bool) -> list[Row]:
    base_count = 100 if quick else 300
    rows = []
    cases = {"loss 1%": ["--loss", "0.01"], "loss 5%": ["--loss", "0.05"],
             "loss 20%": ["--loss", "0.2"], "duplication 10%": ["--duplicate", "0.1"],
             "reordering 10%": ["--reorder", "0.1", "--jitter", "2"],
             "corruption 5%": ["--corrupt", "0.05"]}
    with tempfile.TemporaryDirectory(prefix="fault-matrix-") as tmp:
        serial = iter(range(1000))

        def fresh() -> Path:
            """A directory of its own per row: keeps (and their accepted keys) are not shared."""
            path = Path(tmp) / f"row{next(serial)}"
            path.mkdir()
            return path

        for mode in faultkit.MODES:
            # fast mode carries 100 messages in a few datagrams: more, to be mid-transfer
            count = base_count * (40 if mode == "fast" else 1)
            for case, impairment in cases.items():
                rows.append(process_impairment(fresh(), mode, case, impairment, count))
                print(rows[-1].verdict, rows[-1].case, rows[-1].mode, file=sys.stderr)
            rows.append(process_partition(fresh(), mode, count))
            rows.append(kill_main(fresh(), mode, count))
            rows.append(kill_joiner(fresh(), mode, count))
            print(rows[-3:], file=sys.stderr)
        rows.append(main_with_ten(fresh()))
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| case | mode | what was done | sent | what arrived | verdict |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        cells = [row.case, row.mode, row.done, row.sent, row.arrived, f"**{row.verdict}**"]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def write(doc: Path, text: str) -> None:
    content = doc.read_text()
    start, end = content.find(BEGIN), content.find(END)
    block = f"{BEGIN}\n{text}\n{END}"
    if start < 0 or end < 0:
        content = content.rstrip() + "\n\n" + block + "\n"
    else:
        content = content[:start] + block + content[end + len(END):]
    doc.write_text(content)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--sim-only", action="store_true")
    parser.add_argument("--processes-only", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="do not touch the docs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows: list[Row] = []
    if not args.processes_only:
        rows += sim_rows(args.quick)
    if not args.sim_only:
        rows += process_rows(args.quick)
    text = table(rows)
    stamp = (f"Measured {time.strftime('%Y-%m-%d')} by `tools/fault_matrix.py"
             f"{' --quick' if args.quick else ''}` in {time.monotonic() - started:.0f} s: "
             f"{sum(r.ok for r in rows)}/{len(rows)} rows pass.")
    if args.json:
        print(json.dumps([{**vars(r), "verdict": r.verdict} for r in rows], default=str))
    else:
        print(stamp)
        print(text)
    if not args.no_write:
        write(DOC, stamp + "\n\n" + text)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
