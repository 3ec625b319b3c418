"""A long-lived RAET 0.6.8 road estate, driven by JSON lines.

Runs *only* under the RAET shims (see :func:`tests.raetpeer.road.RaetRoadPeer`),
never in the test process.  Configuration comes as one JSON object in
``argv[1]``: ``name``, ``port`` (0 lets the kernel choose), ``keep`` (the keep
directory), ``main``, ``auto`` (0 never, 1 once, 2 always), ``role``,
``mutable``, ``manage`` (run RAET's presence manager as ioflo houses do) and
``pend_recheck`` (seconds between a pended join's keep re-checks; RAET's
default is 60).

Commands on stdin, one JSON object a line, keyed by ``do``: ``join`` (``to``
HOST:PORT), ``allow`` / ``alive`` (``name``), ``send`` (``to`` name, ``body``),
``status``, ``accept`` / ``reject`` (``role``), ``quit``.

Events on stdout, one JSON object a line, keyed by ``event``: ``ready``
(``port``), ``joined`` / ``allowed`` / ``alived`` / ``dead`` / ``removed``
(``remote``), ``message`` (``remote``, ``body``), ``status`` (``remotes``,
``stats``), ``error`` (``detail``).
"""

import json
import os
import queue
import sys
import threading
import time

from ioflo.base.storing import Store
from raet.road import estating, stacking, transacting

SERVICE_PAUSE = 0.002  # seconds between service rounds; RAET has no readiness hook


def out(event, **fields):
    fields["event"] = event
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def read_commands(commands):
    for raw in sys.stdin:
        line = raw.strip()
        if line:
            commands.put(json.loads(line))
    commands.put({"do": "quit"})


def remote_named(stack, name):
    remote = stack.nameRemotes.get(name)
    if remote is None:
        raise KeyError(f"no remote named {name!r}")
    return remote


def remote_at(stack, address):
    for remote in stack.remotes.values():
        if tuple(remote.ha) == address:
            return remote
    remote = estating.RemoteEstate(stack=stack, fuid=0, sid=0, ha=address)
    stack.addRemote(remote)
    return remote


def set_acceptance(stack, role, acceptance):
    data = stack.keep.loadRemoteRoleData(role)
    if not data:
        raise KeyError(f"no keys seen for role {role!r}")
    data["acceptance"] = acceptance
    stack.keep.dumpRemoteRoleData(data, role)
    for remote in stack.remotes.values():
        if remote.role == role:
            remote.acceptance = acceptance


def status(stack):
    remotes = [
        {
            "name": remote.name, "uid": remote.uid, "fuid": remote.fuid,
            "ha": list(remote.ha), "role": remote.role, "main": bool(remote.main),
            "joined": remote.joined, "allowed": remote.allowed, "alived": remote.alived,
            "acceptance": remote.acceptance, "sid": remote.sid, "rsid": remote.rsid,
            "transactions": len(remote.transactions),
        }
        for remote in stack.remotes.values()
    ]
    return {"remotes": remotes, "stats": dict(stack.stats)}


def obey(stack, command):
    action = command["do"]
    if action == "join":
        host, _, port = command["to"].rpartition(":")
        remote = remote_at(stack, (host, int(port)))
        stack.join(uid=remote.uid)
    elif action == "allow":
        stack.allow(uid=remote_named(stack, command["name"]).uid)
    elif action == "alive":
        stack.alive(uid=remote_named(stack, command["name"]).uid)
    elif action == "send":
        stack.transmit(command["body"], uid=remote_named(stack, command["to"]).uid)
    elif action == "status":
        out("status", **status(stack))
    elif action == "accept":
        set_acceptance(stack, command["role"], 1)
    elif action == "reject":
        set_acceptance(stack, command["role"], 2)
    else:
        raise ValueError(f"unknown command {action!r}")


def report_changes(stack, seen):
    names = set()
    for remote in stack.remotes.values():
        names.add(remote.name)
        now = (bool(remote.joined), bool(remote.allowed), remote.alived)
        before = seen.get(remote.name, (False, False, None))
        if now[0] and not before[0]:
            out("joined", remote=remote.name)
        if now[1] and not before[1]:
            out("allowed", remote=remote.name)
        if now[2] and not before[2]:
            out("alived", remote=remote.name)
        if now[2] is False and before[2]:
            out("dead", remote=remote.name)
        seen[remote.name] = now
    for name in set(seen) - names:
        del seen[name]
        out("removed", remote=name)


def main():
    config = json.loads(sys.argv[1])
    transacting.Joinent.PendRedoTimeout = config.get("pend_recheck", 60.0)
    transacting.Joiner.PendRedoTimeout = config.get("pend_recheck", 60.0)
    store = Store(stamp=0.0)
    started = time.monotonic()
    stack = stacking.RoadStack(
        store=store, name=config["name"], ha=("127.0.0.1", config.get("port", 0)),
        main=config.get("main", False), auto=config.get("auto", 1),
        role=config.get("role") or config["name"], mutable=config.get("mutable", False),
        dirpath=config["keep"],
    )
    if tuple(stack.aha) != tuple(stack.server.ha):  # port 0: remember the bound port
        stack.aha = tuple(stack.server.ha)
        stack.dumpLocal()
    out("ready", port=stack.server.ha[1], name=stack.local.name, pid=os.getpid())
    commands = queue.Queue()
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    seen = {}
    managing = config.get("manage", True)
    next_manage = 0.0
    while True:
        store.changeStamp(time.monotonic() - started)
        while not commands.empty():
            command = commands.get()
            if command["do"] == "quit":
                stack.server.close()
                return
            try:
                obey(stack, command)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                out("error", detail=f"{type(exc).__name__}: {exc}")
        stack.serviceAllRx()
        if managing and store.stamp >= next_manage:
            stack.manage(cascade=True)
            next_manage = store.stamp + 0.1
        stack.serviceAllTx()
        while stack.rxMsgs:
            body, name = stack.rxMsgs.popleft()
            out("message", remote=name, body=body)
        report_changes(stack, seen)
        time.sleep(SERVICE_PAUSE)


main()
