"""Drive a live RAET 0.6.8 road estate (``road_peer.py``) from a test.

:class:`RaetRoadPeer` starts the peer in a subprocess under the RAET shims,
sends it JSON-line commands and collects its JSON-line events on a thread.
:class:`PeerWaker` plugs into a :class:`raetlike.run.Loop` so the loop wakes
the moment the peer reports something: tests wait on conditions with
deadlines, never with fixed sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.raetpeer import raet_command

SCRIPT = (Path(__file__).resolve().parent / "road_peer.py").read_text()
START_TIMEOUT = 20.0


class PeerWaker:
    """A Loop driver with no stack work: readable whenever a peer reported an event."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self.stack = self

    def poke(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._write.send(b"!")

    # -- the Loop's Driver protocol -------------------------------------
    @property
    def wants_write(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._read.fileno()

    def receive(self, now: float) -> int:  # noqa: ARG002 - the Driver protocol
        try:
            return len(self._read.recv(4096))
        except BlockingIOError:
            return 0

    def send(self, now: float) -> int:  # noqa: ARG002 - the Driver protocol
        return 0

    def get_timer(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:  # noqa: ARG002 - the Driver protocol
        return None

    def close(self) -> None:
        self._read.close()
        self._write.close()


class RaetRoadPeer:
    """One RAET RoadStack in its own process."""

    def __init__(self, name: str, keep: Path, *, port: int = 0, main: bool = False,
                 auto: int = 1, role: str = "", mutable: bool = False,
                 manage: bool = True, pend_recheck: float = 0.25,
                 waker: PeerWaker | None = None) -> None:
        self.name = name
        self.config = {
            "name": name, "keep": str(keep), "port": port, "main": main, "auto": auto,
            "role": role or name, "mutable": mutable, "manage": manage,
            "pend_recheck": pend_recheck,
        }
        self.waker = waker
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        self.process = subprocess.Popen(
            [*raet_command(SCRIPT), json.dumps(self.config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )
        self._reader = threading.Thread(target=self._read_events, daemon=True)
        self._reader.start()
        ready = self.wait_event(lambda e: e["event"] == "ready", START_TIMEOUT)
        if ready is None:
            self.stop()
            raise RuntimeError(f"RAET peer {name} did not start: {self.stderr_tail()}")
        self.port = int(ready["port"])

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    @property
    def address_text(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "noise", "line": line}
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
            if self.waker is not None:
                self.waker.poke()

    def do(self, action: str, **fields: Any) -> None:
        """Send one command."""
        assert self.process.stdin is not None
        fields["do"] = action
        self.process.stdin.write(json.dumps(fields) + "\n")
        self.process.stdin.flush()

    def find(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        """Events of ``kind`` whose fields equal ``match``."""
        with self._changed:
            return [e for e in self.events if e["event"] == kind
                    and all(e.get(k) == v for k, v in match.items())]

    def has(self, kind: str, **match: Any) -> bool:
        return bool(self.find(kind, **match))

    def messages(self, remote: str | None = None) -> list[Any]:
        """Bodies of the messages received (from ``remote`` when given), in order."""
        match = {} if remote is None else {"remote": remote}
        return [e["body"] for e in self.find("message", **match)]

    def errors(self) -> list[dict[str, Any]]:
        return self.find("error")

    def wait_event(self, predicate: Callable[[dict[str, Any]], bool],
                   timeout: float) -> dict[str, Any] | None:
        """Block (without servicing anything else) until an event matches."""
        with self._changed:
            start = 0
            found: list[dict[str, Any]] = []

            def scan() -> bool:
                nonlocal start
                found.extend(e for e in self.events[start:] if predicate(e))
                start = len(self.events)
                return bool(found) or self.process.poll() is not None

            self._changed.wait_for(scan, timeout)
            return found[0] if found else None

    def status_request(self) -> int:
        """Ask for a status report; returns how many were seen before it."""
        count = len(self.find("status"))
        self.do("status")
        return count

    def latest_status(self) -> dict[str, Any] | None:
        reports = self.find("status")
        return reports[-1] if reports else None

    def stderr_tail(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()[-3000:]

    def stop(self) -> None:
        """Quit (or kill) the peer and wait for it."""
        if self.process.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.do("quit")
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self._reader.join(timeout=5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
