"""The demo's first step: start the manors and echo yards, and accept the minions' joins."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from raetlike.demo._cast import ECHO_YARD, MAIN, MAIN_LANE, MINIONS
from raetlike.demo._errors import DemoError
from raetlike.demo._processes import START_TIMEOUT, Children
from raetlike.keep import Acceptance, Keep
from raetlike.udp import Address, parse_host_port

__all__ = ["start"]


def start(children: Children, base: Path, say: Callable[[str], None], *,
           quick: bool) -> dict[str, Path]:
    """Start the manors and echo yards, accept the minions; the lanes' socket directories."""
    dirs = {name: base / "lanes" / name for name in (MAIN, *MINIONS)}
    main = children.estate(MAIN, "--main", "--auto", "never", "--echo",
                           "--lane", MAIN_LANE, "--dir", str(dirs[MAIN]))
    main.wait_ready()
    say(f"main estate: a manor on udp {main.where}, lane '{MAIN_LANE}' "
        f"(pid {main.process.pid}, keys accepted by the operator only)")
    address = parse_host_port(main.where)
    minions, yards = {}, {}
    for minion in MINIONS:  # all at once: each takes a second or two to start
        lane = f"{minion}-lane"
        minions[minion] = children.estate(minion, "--join", _text(address), "--lane", lane,
                                          "--dir", str(dirs[minion]))
        yards[minion] = children.yard(ECHO_YARD, lane, dirs[minion], "--echo")
    for minion in MINIONS:
        lane = f"{minion}-lane"
        estate, yard = minions[minion], yards[minion]
        estate.wait_ready()
        yard.wait_ready()
        say(f"{minion}: a manor on udp {estate.where}, lane '{lane}' with yards "
            f"'main' and '{ECHO_YARD}' (pids {estate.process.pid}, {yard.process.pid})")
    keep = Keep(base / "keep", MAIN)
    for minion in MINIONS:
        if not main.wait_for_log(f"join from '{minion}' (role ", START_TIMEOUT):
            raise DemoError(f"{minion} never asked to join: {minions[minion].last_log_line()}")
    say("all three joins are pending in main's keep")
    for minion in MINIONS:
        if minion == MINIONS[-1]:
            time.sleep(0.3 if quick else 1.5)
            say(f"{minion} is still pending; accepting it through the keep "
                f"(as 'raetlike keys accept {minion}' does)")
        _accept(keep, minion)
    for minion, estate in minions.items():
        if not estate.wait_for_log(f"estate {minion}: allowed {MAIN}", START_TIMEOUT):
            raise DemoError(f"{minion} was not allowed by main: {estate.last_log_line()}")
    say("all minions joined and allowed (handshakes done, session keys set)")
    return dirs


def _accept(keep: Keep, name: str) -> None:
    remote = keep.load_remote(name)
    role = remote.role if remote is not None else name
    record = keep.load_role(role)
    if record is None or record.acceptance not in (None, Acceptance.PENDING):
        raise DemoError(f"main's keep holds no pending role {role!r}")
    keep.accept(role)


def _text(address: Address) -> str:
    return f"{address[0]}:{address[1]}"
