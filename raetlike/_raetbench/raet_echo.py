"""RAET 0.6.8 echo benchmark peer: ``main PORTFILE`` echoes, ``client HOST:PORT N WINDOW`` times.

Run only as a subprocess (``python raet_echo.py ...``) in an environment where
RAET 0.6.8 is installed; it patches the pre-3.10 names RAET and ioflo need on
Python 3.11 before importing them.  The client prints one JSON line:
``{"echoes": N, "seconds": S}``.  Never imported by raetlike itself.
"""
# ruff: noqa: E402, T201 - a standalone script: compatibility patches precede the imports

import collections
import collections.abc
import json
import logging
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


def _stack(name: str, port: int, main: bool) -> Any:
    return stacking.RoadStack(name=name, ha=("127.0.0.1", port), main=main, auto=2,
                              dirpath=tempfile.mkdtemp(prefix=f"raetbench-{name}-"))


def serve(port_file: str) -> None:
    """An echoing main estate; writes its port to ``port_file``."""
    stack = _stack("raetmain", 0, True)
    with open(port_file, "w") as handle:
        handle.write(str(stack.ha[1]))
    while True:
        stack.serviceAll()
        while stack.rxMsgs:
            body, remote_name = stack.rxMsgs.popleft()[:2]
            stack.transmit(body, uid=stack.nameRemotes[remote_name].uid)
        time.sleep(0.0002)


def client(address: str, count: int, window: int) -> None:
    """Join, allow, then keep ``window`` messages in flight until ``count`` echoes came back."""
    host, _, port = address.rpartition(":")
    stack = _stack("raetclient", 0, False)
    remote = estating.RemoteEstate(stack=stack, fuid=0, sid=0, ha=(host, int(port)))
    stack.addRemote(remote)
    stack.join(uid=remote.uid)
    deadline = time.monotonic() + 20
    while not (remote.joined and remote.allowed):
        if remote.joined and not remote.transactions:
            stack.allow(uid=remote.uid)
        stack.serviceAll()
        time.sleep(0.0005)
        if time.monotonic() > deadline:
            raise SystemExit("RAET client could not join and allow")
    sent = echoes = 0
    start = time.monotonic()
    while echoes < count:
        while sent < count and sent - echoes < window:
            stack.transmit({"seq": sent, "pad": "x" * 90}, uid=remote.uid)
            sent += 1
        stack.serviceAll()
        while stack.rxMsgs:
            stack.rxMsgs.popleft()
            echoes += 1
        if time.monotonic() - start > 120:
            break
    print(json.dumps({"echoes": echoes, "seconds": time.monotonic() - start}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "main":
        serve(sys.argv[2])
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
