"""RAET 0.6.8 benchmark peers, run as ``python raet_peer.py main PORTFILE`` or ``client ...``.

``main PORTFILE`` is a main estate that writes its port to PORTFILE, echoes
messages of kind ``echo``, counts messages of kind ``one`` and, when a run's
count is reached (or a ``big`` message arrives), answers with ``{"kind": "got",
"at": <time.monotonic()>}`` (Linux's monotonic clock is system-wide, so the
client subtracts its own start from it).  ``client HOST:PORT PLAN`` joins and
allows, then runs PLAN (a JSON list of steps ``["one", N, WINDOW]``, ``["echo", N, WINDOW]``,
``["big", BYTES]``) and prints one JSON line: a list of ``{"step", "count",
"seconds"}``.

Both loops are tight ``serviceAll`` loops; a peer waits on its socket (at most
1 ms) only when it has nothing in flight, so it never sleeps with work pending.
Sockets get 4 MB buffers (``bufcnt``), as raetlike's driver does.

Run only as a subprocess in an environment where RAET 0.6.8 is installed: it
patches the pre-3.10 names RAET and ioflo need on Python 3.11 before importing
them.  Never imported by raetlike itself.
"""
# ruff: noqa: E402, T201 - a standalone script: compatibility patches precede the imports

import collections
import collections.abc
import json
import logging
import select
import sys
import tempfile
import time
from typing import Any

for _name in ("Mapping", "MutableMapping", "Sequence", "MutableSet", "Set", "Iterable",
              "Callable", "Hashable", "MutableSequence"):
    setattr(collections, _name, getattr(collections.abc, _name))
_original_loads = json.loads


def _loads(text: Any, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("encoding", None)
    return _original_loads(text, *args, **kwargs)


json.loads = _loads  # type: ignore[assignment]
logging.getLogger("raet").setLevel(logging.ERROR)
from ioflo.base import consoling

consoling.getConsole().reinit(verbosity=consoling.Console.Wordage.mute)

from raet.road import estating, stacking  # type: ignore[import-untyped]

BUFFER_PACKETS = 4096  # x 1 KB packets: 4 MB socket buffers
IDLE_WAIT = 0.001
BODY_BYTES = 100


def _stack(name: str, main: bool) -> Any:
    return stacking.RoadStack(name=name, ha=("127.0.0.1", 0), main=main, auto=2,
                              bufcnt=BUFFER_PACKETS,
                              dirpath=tempfile.mkdtemp(prefix=f"raetbench-{name}-"))


def _busy(stack: Any) -> bool:
    return bool(stack.txes or stack.txMsgs or stack.rxes
                or any(remote.transactions for remote in stack.remotes.values()))


def _service(stack: Any) -> None:
    """One serviceAll; when nothing is in flight, first wait for the socket (at most 1 ms)."""
    if not _busy(stack):
        select.select([stack.server.ss], [], [], IDLE_WAIT)
    stack.serviceAll()


def _body(kind: str, **fields: Any) -> dict[str, Any]:
    """A message whose JSON body is about ``BODY_BYTES`` long."""
    body: dict[str, Any] = {"kind": kind, **fields, "pad": ""}
    size = len(json.dumps(body, separators=(",", ":")))
    body["pad"] = "x" * max(0, BODY_BYTES - size)
    return body


def serve(port_file: str) -> None:
    """The main estate: echo, count, acknowledge runs."""
    stack = _stack("raetmain", True)
    with open(port_file, "w") as handle:
        handle.write(str(stack.ha[1]))
    counts: dict[Any, int] = {}
    while True:
        _service(stack)
        while stack.rxMsgs:
            body, remote_name = stack.rxMsgs.popleft()[:2]
            uid = stack.nameRemotes[remote_name].uid
            kind = body.get("kind")
            if kind == "echo":
                stack.transmit(body, uid=uid)
            elif kind == "one":
                run = body["run"]
                counts[run] = counts.get(run, 0) + 1
                if counts[run] == body["of"]:
                    stack.transmit({"kind": "got", "at": time.monotonic()}, uid=uid)
            elif kind == "big":
                stack.transmit({"kind": "got", "at": time.monotonic()}, uid=uid)


class Client:
    """A joined and allowed estate running plan steps against the main."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.stack = _stack("raetclient", False)
        self.remote = estating.RemoteEstate(stack=self.stack, fuid=0, sid=0,
                                            ha=(host, int(port)))
        self.stack.addRemote(self.remote)
        self.stack.join(uid=self.remote.uid)
        deadline = time.monotonic() + 20
        while not (self.remote.joined and self.remote.allowed):
            if self.remote.joined and not self.remote.transactions:
                self.stack.allow(uid=self.remote.uid)
            _service(self.stack)
            if time.monotonic() > deadline:
                raise SystemExit("RAET client could not join and allow")
        self.runs = 0

    def _take(self) -> list[dict[str, Any]]:
        taken = []
        while self.stack.rxMsgs:
            taken.append(self.stack.rxMsgs.popleft()[0])
        return taken

    def _wait_got(self, deadline: float) -> float | None:
        while time.monotonic() < deadline:
            _service(self.stack)
            for body in self._take():
                if body.get("kind") == "got":
                    return float(body["at"])
        return None

    def one_way(self, count: int, window: int, limit: float) -> float | None:
        """Seconds from the first transmit to the main's receipt of the last of ``count``."""
        self.runs += 1
        uid, transactions = self.remote.uid, self.remote.transactions
        start = time.monotonic()
        deadline = time.monotonic() + limit
        sent = 0
        while sent < count:
            while sent < count and len(transactions) + len(self.stack.txMsgs) < window:
                self.stack.transmit(_body("one", run=self.runs, of=count), uid=uid)
                sent += 1
            _service(self.stack)
            self._take()
            if time.monotonic() > deadline:
                return None
        at = self._wait_got(deadline)
        return None if at is None else at - start

    def echo(self, count: int, window: int, limit: float) -> float | None:
        """Seconds until ``count`` echoes came back, ``window`` in flight."""
        sent = echoes = 0
        start = time.monotonic()
        while echoes < count:
            while sent < count and sent - echoes < window:
                self.stack.transmit(_body("echo", seq=sent), uid=self.remote.uid)
                sent += 1
            _service(self.stack)
            echoes += sum(1 for body in self._take() if body.get("kind") == "echo")
            if time.monotonic() - start > limit:
                return None
        return time.monotonic() - start

    def big(self, size: int, limit: float) -> float | None:
        """Seconds from transmit until the main has the whole ``size``-byte message."""
        start = time.monotonic()
        self.stack.transmit({"kind": "big", "pad": "b" * size}, uid=self.remote.uid)
        at = self._wait_got(time.monotonic() + limit)
        return None if at is None else at - start


def client(address: str, plan: list[list[Any]], limit: float, main: int | None = None) -> None:
    """Run ``plan`` and print the results as one JSON line (a one-way step also gives the
    CPU seconds it took this process and the main, process ``main``, when known)."""
    from raetlike.bench._common import cpu_seconds  # noqa: PLC0415 - after the patches

    peer = Client(address)
    results = []
    for step, *arguments in plan:
        if step == "one":
            own, theirs = time.process_time(), cpu_seconds(main) if main else None
            seconds = peer.one_way(int(arguments[0]), int(arguments[1]), limit)
            after = cpu_seconds(main) if main else None
            results.append({"step": step, "count": arguments[0], "seconds": seconds,
                            "cpu_sender": time.process_time() - own,
                            "cpu_receiver": None if theirs is None or after is None
                            else after - theirs})
            continue
        if step == "echo":
            seconds = peer.echo(int(arguments[0]), int(arguments[1]), limit)
        else:
            seconds = peer.big(int(arguments[0]), limit)
        results.append({"step": step, "count": arguments[0], "seconds": seconds})
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "main":
        serve(sys.argv[2])
    else:
        client(sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]),
               int(sys.argv[5]) if len(sys.argv) > 5 else None)
