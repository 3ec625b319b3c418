"""``raetlike demo``: two estate processes, a ping through them, a short report.

Starts a main estate (``--echo``) and a minion estate that joins it, each as
``python -m raetlike estate ...`` on port 0 with a temporary keep, waits for
the minion to be allowed, pings the main estate from this process (many
small messages, then one of 1 MB), prints what happened and cleans up.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from raetlike.errors import RaetError
from raetlike.ping import PingResult, ping
from raetlike.udp import Address, parse_host_port

__all__ = ["DemoError", "run_demo", "start_estate"]

log = logging.getLogger(__name__)

START_TIMEOUT = 10.0
SMALL_COUNT = 500
SMALL_SIZE = 100
BIG_SIZE = 1_000_000
POLL = 0.02


class DemoError(RaetError):
    """The demo could not do what it shows; the message says what went wrong."""


class EstateProcess:
    """An ``raetlike estate`` child process, its address and its log file."""

    def __init__(self, name: str, args: list[str], keep_dir: Path, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        command = [sys.executable, "-m", "raetlike", "estate", name, "--host", "127.0.0.1",
                   "--port", "0", "--keep", str(keep_dir), *args]
        with log_path.open("wb") as log_file:
            self.process = subprocess.Popen(  # noqa: S603 - our own CLI, fixed arguments
                command, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
        self.address = self._read_address()

    def _read_address(self) -> Address:
        stdout = self.process.stdout
        assert stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(START_TIMEOUT):
                raise DemoError(f"estate {self.name} did not start within {START_TIMEOUT:g} s")
        line = stdout.readline().decode(errors="replace").strip()
        prefix = f"estate {self.name} listening on "
        if not line.startswith(prefix):
            raise DemoError(f"estate {self.name} failed to start: {self.last_log_line()}")
        return parse_host_port(line.removeprefix(prefix))

    def last_log_line(self) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return lines[-1] if lines else "(no output)"

    def wait_for_log(self, text: str, timeout: float) -> bool:
        """Whether ``text`` shows up in the estate's log within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_path.read_text(errors="replace"):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(POLL)
        return text in self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then wait (kill after a few seconds); returns the exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


@contextlib.contextmanager
def start_estate(name: str, args: list[str], keep_dir: Path,
                 log_path: Path) -> Iterator[EstateProcess]:
    """Run an estate process for the ``with`` block; it is stopped after."""
    estate = EstateProcess(name, args, keep_dir, log_path)
    try:
        yield estate
    finally:
        estate.stop()


def run_demo(out: TextIO) -> int:
    """Run the demo, writing the report to ``out``; 0 when everything worked."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="raetlike-demo-") as temp:
        base = Path(temp)
        with (start_estate("main", ["--main", "--echo"], base / "main-keep",
                           base / "main.log") as main,
              start_estate("minion", ["--join", _text(main.address), "--echo"],
                           base / "minion-keep", base / "minion.log") as minion):
            out.write(f"main estate listening on {_text(main.address)} (pid {main.process.pid})\n")
            out.write(f"minion estate on {_text(minion.address)} (pid {minion.process.pid})\n")
            if not minion.wait_for_log("estate minion: joined main", START_TIMEOUT):
                raise DemoError(f"minion did not join main: {minion.last_log_line()}")
            out.write("minion joined main\n")
            if not minion.wait_for_log("estate minion: allowed main", START_TIMEOUT):
                raise DemoError(f"minion was not allowed by main: {minion.last_log_line()}")
            out.write("minion allowed by main (handshake done, session keys set)\n")
            small = ping(main.address, count=SMALL_COUNT, size=SMALL_SIZE, timeout=30)
            out.write(_line(small))
            big = ping(main.address, count=1, size=BIG_SIZE, timeout=30)
            out.write(f"1 MB message echoed in {big.round_trips[0] * 1000:.0f} ms "
                      f"(round trip)\n")
        out.write(f"both estates stopped cleanly (exit {main.process.returncode}, "
                  f"{minion.process.returncode}); demo took "
                  f"{time.monotonic() - started:.1f} s\n")
        if main.process.returncode or minion.process.returncode:
            raise DemoError("an estate process did not stop cleanly")
    return 0


def _text(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


def _line(result: PingResult) -> str:
    return (f"{result.count} messages of {result.size} B echoed by main: "
            f"{result.messages_per_second:.0f} msgs/s, "
            f"rtt p50 {result.rtt_p50 * 1000:.2f} ms, p99 {result.rtt_p99 * 1000:.2f} ms\n")

