"""Measure the durable outbox's storage: our segment log against SQLite in WAL mode.

The operation that matters per message: ``put(remote, body, expires)`` is written to
the OS before it returns (a kill -9 right after loses nothing), and later ``done(id)``
when the message is acknowledged.  Every store below does the same work for each of
``--messages`` 100-byte ``bytes`` bodies: one put per message and, every 64 puts, the 64
ids just put marked done (a simulated ack round).  Two fsync settings:

- batched: :class:`raetlike.durable.DurableOutbox` with ``FsyncPolicy.INTERVAL``
  (fdatasync at most every 10 ms: ``sync(now)`` whenever ``sync_due() <= now``, checked
  after every put), the done ids buffered and written by one ``flush()`` per round;
  SQLite with ``synchronous=NORMAL`` (in WAL mode it syncs only at checkpoints, so it
  promises less against a power cut than we do) and, for reference, ``synchronous=OFF``;
- per message (``--always-messages``, it is slow): ``FsyncPolicy.ALWAYS`` (an
  fdatasync per put and per done flush) against SQLite ``synchronous=FULL`` (a sync per
  commit).

SQLite gets the cheapest form of the same semantics: autocommit mode, so each put is one
``INSERT`` that commits by itself (kill -9 safety needs the commit: an open transaction
dies with the process) and each round one ``DELETE ... WHERE id IN (64 ids)`` that
commits by itself; statements are cached, so nothing is parsed twice.  Ids come from a
counter in memory and are bound explicitly (no ``AUTOINCREMENT``, whose extra
``sqlite_sequence`` write a real store would need so that ids never repeat after the table
empties: left out, it can only flatter SQLite).  References: a bare ``os.write`` of 100
bytes per message, and ``os.write`` + ``fdatasync`` per message.

Each figure is the median of three runs, the runs interleaved across the stores; a run
times the loop and the store's ``close()`` (its final sync or checkpoint), not opening a
fresh store in a fresh directory.

Usage::

    .venv/bin/python tools/bench_durable_store.py [--messages 100000]
        [--always-messages 2000] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from raetlike.durable import DurableOutbox
from raetlike.journal import FsyncPolicy

ROUND = 64  # puts per simulated ack round: the ids done and flushed together
RUNS = 3
BODY = os.urandom(100)
REMOTE = "minion1"
INTERVAL = 0.01

Bench = Callable[[Path, int], float]  # (fresh directory, messages) -> seconds


def outbox_run(policy: FsyncPolicy) -> Bench:
    """DurableOutbox: put each message, every ROUND puts mark them done and flush."""

    def run(directory: Path, count: int) -> float:
        outbox = DurableOutbox(directory, fsync=policy, interval=INTERVAL)
        put, done, flush = outbox.put, outbox.done, outbox.flush
        sync_due, sync, monotonic = outbox.sync_due, outbox.sync, time.monotonic
        expires = time.time() + 60.0
        ids: list[int] = []
        started = time.perf_counter()
        for _ in range(count):
            ids.append(put(REMOTE, BODY, expires))
            if len(ids) == ROUND:
                for message_id in ids:
                    done(message_id)
                flush()
                ids = []
            due = sync_due()
            if due is not None and due <= (now := monotonic()):
                sync(now)
        for message_id in ids:
            done(message_id)
        outbox.close()
        spent = time.perf_counter() - started
        if len(outbox) != 0:
            raise RuntimeError(f"outbox still holds {len(outbox)} messages")
        return spent

    return run


_DELETE = f"DELETE FROM outbox WHERE id IN ({', '.join('?' * ROUND)})"  # noqa: S608


def sqlite_run(synchronous: str) -> Bench:
    """SQLite WAL: an INSERT (its own commit) per put, a DELETE of ROUND ids (one commit)
    per round."""

    def run(directory: Path, count: int) -> float:
        db = sqlite3.connect(directory / "outbox.db", isolation_level=None)  # autocommit
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"SQLite refused WAL mode ({mode})")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, remote TEXT, "
                   "expires REAL, body BLOB)")
        execute = db.execute
        insert = "INSERT INTO outbox (id, remote, expires, body) VALUES (?, ?, ?, ?)"
        expires = time.time() + 60.0
        next_id = 1
        ids: list[int] = []
        started = time.perf_counter()
        for _ in range(count):
            execute(insert, (next_id, REMOTE, expires, BODY))
            ids.append(next_id)
            next_id += 1
            if len(ids) == ROUND:
                execute(_DELETE, ids)
                ids = []
        if ids:
            execute(f"DELETE FROM outbox WHERE id IN ({', '.join('?' * len(ids))})",  # noqa: S608
                    ids)
        left = db.execute("SELECT count(*) FROM outbox").fetchone()[0]
        db.close()
        spent = time.perf_counter() - started
        if left != 0:
            raise RuntimeError(f"SQLite outbox still holds {left} messages")
        return spent

    return run


def write_run(*, fdatasync: bool) -> Bench:
    """A bare os.write of the 100-byte body per message (and an fdatasync if asked)."""

    def run(directory: Path, count: int) -> float:
        fd = os.open(directory / "bare.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        write, sync = os.write, os.fdatasync
        started = time.perf_counter()
        if fdatasync:
            for _ in range(count):
                write(fd, BODY)
                sync(fd)
        else:
            for _ in range(count):
                write(fd, BODY)
        os.close(fd)
        return time.perf_counter() - started

    return run


def filesystem(path: Path) -> str:
    """The type of the file system holding ``path`` (from /proc/mounts), or '?'."""
    path = path.resolve()
    best, kind = "", "?"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        if (path == Path(mount) or Path(mount) in path.parents) and len(mount) > len(best):
            best, kind = mount, fields[2]
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000,
                        help="messages per run with batched fsync (default 100000)")
    parser.add_argument("--always-messages", type=int, default=2_000,
                        help="messages per run with an fsync per message (default 2000)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to make the temporary directory (default: the current "
                             "directory, so its file system, not /dev/shm)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    parent = args.dir if args.dir is not None else Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-durable-store-", dir=parent))
    fs = filesystem(base)

    # (key, store, fsync label, batched?, bench)
    cases: list[tuple[str, str, str, bool, Bench]] = [
        ("outbox-interval", "DurableOutbox", "batched (10 ms)", True,
         outbox_run(FsyncPolicy.INTERVAL)),
        ("sqlite-normal", "SQLite WAL", "synchronous=NORMAL", True, sqlite_run("NORMAL")),
        ("sqlite-off", "SQLite WAL", "synchronous=OFF", True, sqlite_run("OFF")),
        ("write", "os.write", "none", True, write_run(fdatasync=False)),
        ("outbox-always", "DurableOutbox", "per message", False,
         outbox_run(FsyncPolicy.ALWAYS)),
        ("sqlite-full", "SQLite WAL", "synchronous=FULL", False, sqlite_run("FULL")),
        ("write-fdatasync", "os.write+fdatasync", "per message", False,
         write_run(fdatasync=True)),
    ]
    times: dict[str, list[float]] = {key: [] for key, *_ in cases}
    try:
        for run in range(RUNS):
            for key, _store, _fsync, batched, bench in cases:
                directory = base / f"{key}-{run}"
                directory.mkdir()
                count = args.messages if batched else args.always_messages
                times[key].append(bench(directory, count))
                shutil.rmtree(directory)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    rows = []
    for key, store, fsync, batched, _bench in cases:
        count = args.messages if batched else args.always_messages
        seconds = statistics.median(times[key])
        rows.append({"key": key, "store": store, "fsync": fsync, "messages": count,
                     "seconds": seconds, "messages_per_s": count / seconds,
                     "us_per_message": seconds / count * 1e6,
                     "runs_s": times[key]})
    rate = {row["key"]: row["messages_per_s"] for row in rows}
    ratios = {
        "batched_outbox_over_sqlite_normal": rate["outbox-interval"] / rate["sqlite-normal"],
        "batched_outbox_over_sqlite_off": rate["outbox-interval"] / rate["sqlite-off"],
        "per_message_outbox_over_sqlite_full": rate["outbox-always"] / rate["sqlite-full"],
    }
    if args.json:
        print(json.dumps({"directory_fs": fs, "sqlite_version": sqlite3.sqlite_version,
                          "body_bytes": len(BODY), "round": ROUND, "runs": RUNS,
                          "results": rows, "ratios": ratios}))
        return
    print(f"{len(BODY)}-byte bodies, done every {ROUND} puts, median of {RUNS} runs; "
          f"file system {fs}; SQLite {sqlite3.sqlite_version}")
    print(f"{'store':<20} {'fsync':<20} {'messages':>9} {'messages/s':>12} {'µs/message':>11}")
    for row in rows:
        print(f"{row['store']:<20} {row['fsync']:<20} {row['messages']:>9} "
              f"{row['messages_per_s']:>12,.0f} {row['us_per_message']:>11.2f}")
    print(f"DurableOutbox / SQLite, batched fsync (vs NORMAL): "
          f"{ratios['batched_outbox_over_sqlite_normal']:.2f}x "
          f"(vs OFF: {ratios['batched_outbox_over_sqlite_off']:.2f}x)")
    print(f"DurableOutbox / SQLite, fsync per message (vs FULL): "
          f"{ratios['per_message_outbox_over_sqlite_full']:.2f}x")


if __name__ == "__main__":
    main()
