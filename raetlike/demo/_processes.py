"""The demo's child processes: ``python -m raetlike estate|yard ...``, started and stopped."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time
from pathlib import Path

from raetlike.demo._errors import DemoError

__all__ = ["POLL", "START_TIMEOUT", "ChildProcess", "Children"]

START_TIMEOUT = 15.0
POLL = 0.02


class ChildProcess:
    """A ``python -m raetlike ...`` child whose first stdout line says where it listens."""

    def __init__(self, name: str, args: list[str], log_path: Path, ready: str) -> None:
        self.name = name
        self.log_path = log_path
        command = [sys.executable, "-m", "raetlike", *args]
        with log_path.open("wb") as log_file:
            self.process = subprocess.Popen(  # noqa: S603 - our own CLI, fixed arguments
                command, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
        self.ready = ready
        self.where = ""
        self.terminated = False

    def wait_ready(self) -> str:
        """Read the first stdout line (where the child listens); DemoError if it does not come."""
        self.where = self._read_line(self.ready)
        return self.where

    def _read_line(self, prefix: str) -> str:
        stdout = self.process.stdout
        assert stdout is not None  # noqa: S101 - Popen was given stdout=PIPE
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(START_TIMEOUT):
                raise DemoError(f"{self.name} did not start within {START_TIMEOUT:g} s")
        line = stdout.readline().decode(errors="replace").strip()
        if not line.startswith(prefix):
            raise DemoError(f"{self.name} failed to start: {self.last_log_line()}")
        return line.removeprefix(prefix)

    def last_log_line(self) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return lines[-1] if lines else "(no output)"

    def wait_for_log(self, text: str, timeout: float) -> bool:
        """Whether ``text`` shows up in the child's log within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_path.read_text(errors="replace"):
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(POLL)
        return text in self.log_path.read_text(errors="replace")

    def terminate(self) -> None:
        """Send SIGTERM once, if it still runs (a second one could cut its shutdown short)."""
        if not self.terminated and self.process.poll() is None:
            self.process.terminate()
        self.terminated = True

    def stop(self) -> int:
        """SIGTERM, then wait (kill after a few seconds); returns the exit status."""
        self.terminate()
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


class Children:
    """Every child process of the demo; all are stopped on exit (also on Ctrl-C)."""

    def __init__(self, base: Path, journals: Path | None = None) -> None:
        self.base = base
        self.journals = journals
        self.started: list[ChildProcess] = []

    def estate(self, name: str, *args: str) -> ChildProcess:
        """Start ``raetlike estate NAME`` on a free loopback port with its own keep."""
        journal = [] if self.journals is None else ["--journal", str(self.journals / name)]
        child = ChildProcess(
            name, ["estate", name, "--host", "127.0.0.1", "--port", "0",
                   "--keep", str(self.base / "keep"), *journal, *args],
            self.base / f"{name}.log", f"estate {name} listening on ")
        self.started.append(child)
        return child

    def yard(self, name: str, lane: str, directory: Path, *args: str) -> ChildProcess:
        """Start ``raetlike yard NAME --lane LANE --dir DIRECTORY``."""
        child = ChildProcess(
            f"{lane}.{name}", ["yard", name, "--lane", lane, "--dir", str(directory), *args],
            self.base / f"{lane}.{name}.log", f"yard {name} listening on ")
        self.started.append(child)
        return child

    def stop_all(self) -> dict[str, int]:
        """Stop the children (SIGTERM to all, then wait); their exit statuses by name."""
        for child in self.started:
            child.terminate()
        statuses = {child.name: child.stop() for child in reversed(self.started)}
        self.started.clear()
        return statuses
