"""A long soak between two processes: every echo exactly once, memory and state flat.

An echoing main estate runs as a child process (``raetlike estate soakmain
--main --echo``); this script is the client: a RoadStack on a real UDP socket
that keeps ``--window`` numbered messages in flight until ``--messages`` echoes
are back, counting each sequence number's echoes in a preallocated byte array
(so the client's own bookkeeping does not grow).  RSS of both processes is read
from ``/proc/PID/status`` after the first 10,000 echoes (a tenth of the run when
shorter) and at the end; the client stack's tracked transactions, remembered
done transactions and outbox are read at the end, after the last acks settle.

    .venv/bin/python tools/soak.py [--messages N] [--mode fast|raet] [--window W] [--json]

Exit status 0 only when every message was echoed exactly once.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from raetlike.errors import BackpressureError  # noqa: E402
from raetlike.run import Loop  # noqa: E402
from raetlike.udp import UdpDriver, parse_host_port  # noqa: E402
from raetlike.wire.kinds import AutoMode  # noqa: E402
from road import events  # noqa: E402
from road.keeping import MemoryKeep  # noqa: E402
from road.stack import LocalEstate, RoadConfig, RoadStack  # noqa: E402
from tests.faultkit import tracked  # noqa: E402

PREFIX = "estate soakmain listening on "
STEP = 0.05


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start_main(keep: Path, mode: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the echoing main estate; return the process and its ``HOST:PORT``."""
    args = [sys.executable, "-m", "raetlike", "-q", "estate", "soakmain", "--host",
            "127.0.0.1", "--port", "0", "--main", "--auto", "once", "--echo",
            "--keep", str(keep)]
    if mode == "raet":
        args.append("--raet-mode")
    with log.open("ab") as stderr:
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stdout is not None  # noqa: S101 - stdout=PIPE
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(15):
            process.kill()
            raise RuntimeError(f"main printed no address: {log.read_text()}")
    line = process.stdout.readline().decode().strip()
    if not line.startswith(PREFIX):
        process.kill()
        raise RuntimeError(f"{line!r}: {log.read_text()}")
    return process, line.removeprefix(PREFIX).split()[0]


class SoakClient:
    """The client estate: a window of numbered messages in flight, echoes counted per number."""

    def __init__(self, messages: int, mode: str, window: int, size: int) -> None:
        self.messages = messages
        self.window = window
        self.payload = "x" * size
        config = RoadConfig(auto=AutoMode.ONCE, fast=mode == "fast")
        self.stack = RoadStack(LocalEstate("soakclient"), config,
                               keep=MemoryKeep(AutoMode.ONCE), now=time.monotonic())
        self.loop = Loop()
        self.driver = UdpDriver(self.stack, "127.0.0.1", 0)
        self.loop.add(self.driver)
        self.echoes = bytearray(messages)  # echoes seen per sequence number (saturates at 255)
        self.echoed = 0  # distinct sequence numbers echoed
        self.duplicates = 0
        self.changed = 0
        self.foreign = 0
        self.expired = 0
        self.next_seq = 0
        self.remote = ""

    def take(self) -> None:
        """Handle the stack's events, then top up the window."""
        while (event := self.stack.next_event()) is not None:
            if isinstance(event, events.Allowed):
                self.remote = event.remote
            elif isinstance(event, events.MessageReceived):
                self.count(event.body)
            elif isinstance(event, events.MessageExpired):
                self.expired += 1
        self.fill()

    def count(self, body: Any) -> None:
        seq = body.get("seq") if isinstance(body, dict) else None
        if not isinstance(seq, int) or not 0 <= seq < self.next_seq:
            self.foreign += 1
            return
        if body.get("payload") != self.payload:
            self.changed += 1
        if self.echoes[seq]:
            self.duplicates += 1
        else:
            self.echoed += 1
        self.echoes[seq] = min(255, self.echoes[seq] + 1)

    def fill(self) -> None:
        if not self.remote:
            return
        while self.next_seq < self.messages and self.next_seq - self.echoed < self.window:
            try:
                self.stack.transmit({"seq": self.next_seq, "payload": self.payload},
                                    to=self.remote, now=time.monotonic())
            except BackpressureError:
                return
            self.next_seq += 1

    def step(self) -> None:
        self.loop.run_once(max_wait=STEP)
        self.take()
        self.driver.send(time.monotonic())

    def run_until(self, done: Any, deadline: float) -> bool:
        while not done():
            if time.monotonic() > deadline:
                return False
            self.step()
        return True

    def state(self) -> dict[str, int]:
        """What the client stack still holds for the main estate."""
        remote = next(r for r in self.stack.remotes.values() if r.name == self.remote)
        return {"tracked": tracked(self.stack),
                "done_transactions": len(remote.done_transactions),
                "outbox": len(remote.outbox)}

    def close(self) -> None:
        self.stack.close(now=time.monotonic())
        self.loop.close()


def soak(messages: int, *, mode: str = "fast", window: int = 64, size: int = 100,
         timeout: float = 900.0, settle: float = 2.0) -> dict[str, Any]:
    """Run one soak; return its figures (see the module docstring)."""
    early = min(10_000, max(1, messages // 10))
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        base = Path(tmp)
        process, address = start_main(base / "keep", mode, base / "main.log")
        client = SoakClient(messages, mode, window, size)
        try:
            deadline = time.monotonic() + timeout
            client.stack.join(parse_host_port(address), now=time.monotonic())
            if not client.run_until(lambda: bool(client.remote), time.monotonic() + 20):
                raise RuntimeError("join/allow with the main process timed out")
            client.fill()
            started = time.monotonic()
            client.run_until(lambda: client.echoed >= early, deadline)
            rss_start = {"main": rss_kib(process.pid), "client": rss_kib(os.getpid())}
            finished = client.run_until(lambda: client.echoed >= messages, deadline)
            seconds = time.monotonic() - started
            rss_end = {"main": rss_kib(process.pid), "client": rss_kib(os.getpid())}
            if finished:
                client.run_until(lambda: False, time.monotonic() + settle)
            state = client.state()
        finally:
            client.close()
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=15)
    lost = messages - client.echoed
    return {
        "ok": finished and lost == 0 and client.duplicates == 0 and client.changed == 0,
        "mode": mode, "messages": messages, "window": window, "size": size,
        "echoed": client.echoed, "duplicates": client.duplicates, "lost": lost,
        "changed": client.changed, "foreign": client.foreign, "expired": client.expired,
        "seconds": round(seconds, 3),
        "messages_per_second": round(client.echoed / seconds, 1) if seconds else 0.0,
        "rss_kib_after": early, "rss_kib_start": rss_start, "rss_kib_end": rss_end,
        "client_state_end": state,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--mode", choices=("fast", "raet"), default="fast")
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds to let the last acks settle before reading the state")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = soak(args.messages, mode=args.mode, window=args.window, size=args.size,
                  timeout=args.timeout, settle=args.settle)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
