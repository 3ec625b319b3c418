"""Helpers for journal and pipeline tests: records with chosen fields."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import (
    Endpoint,
    JournalRecord,
    JournalWriter,
    RecordKind,
    record_from_delivery,
)
from road import events
from tests.roadkit import MAIN, allowed_pair
from tests.simlink import Impairment

HOUR_START = 1_767_261_600.0  # 2026-01-01T10:00:00Z
ROOT = Path(__file__).resolve().parent.parent

_FULL_DISK_PRELUDE = textwrap.dedent("""
    import errno, os, resource, signal, sys, time
    from pathlib import Path
    from raetlike.journal import FsyncPolicy, JournalWriter
    from raetlike.journal import _delivery as delivery_module
    from road.events import MessageReceived

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    directory, path = Path(sys.argv[1]), sys.argv[2]
    if path == "pure":
        delivery_module._APPEND_PLAIN = None
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    H = 1_767_261_600.0
""")


def run_full_disk(body: str, directory: Path, *,
                  compiled: bool) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a child process after a prelude that gives it a full disk without
    root: a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes writes fail with EFBIG
    where a full disk gives ENOSPC, a write cut short first, as there.  The prelude
    defines ``directory`` (the journal), ``hard`` (the limit to give back), ``H`` (an hour's
    start) and takes the pure path when ``compiled`` is false (skipped when the compiled
    path is not built).  The child must exit 0; its output is returned."""
    from raetlike.journal._delivery import COMPILED  # noqa: PLC0415

    if compiled and not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    done = subprocess.run([sys.executable, "-c", _FULL_DISK_PRELUDE + textwrap.dedent(body),
                           str(directory), "compiled" if compiled else "pure"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done


def record(sequence: int | None = 1, *, node: str = "main", source: str = "minion",
           received: float = HOUR_START + 1.0, sent: float | None = HOUR_START + 0.99,
           kind: RecordKind = RecordKind.MESSAGE, topic: str | None = "ping",
           body_bytes: int = 100, segments: int = 1, resends: int = 0) -> JournalRecord:
    """A journal record from ``source`` to ``node`` with the given fields."""
    return JournalRecord(
        node=node, source=Endpoint(source), destination=Endpoint(node, "yard1", None),
        kind=kind, topic=topic, transaction_id=(sequence or 0) + 1, request_id=None,
        sequence=sequence, body_bytes=body_bytes, segments=segments, resends=resends,
        sent=sent, received=received, session_id=7,
    )


def write_known_traffic(root: Path) -> dict[str, object]:
    """Two nodes' journals with known losses, duplicates and reorderings; returns the truth.

    minion1 sends 1..200 to main: 50 and 120-122 lost, 77 delivered twice (once at
    each node). minion2 sends 1..100 to other: complete, but 30 arrives after 31.
    Latency of message n is ``n % 10 + 1`` ms.
    """
    main_journal, other_journal = root / "main", root / "other"
    lost = {50, 120, 121, 122}
    with JournalWriter(main_journal, "main", max_bytes=8_000) as main, \
            JournalWriter(other_journal, "other") as other:
        for n in range(1, 201):
            if n in lost:
                continue
            at = HOUR_START + n * 0.5
            main.append(record(n, node="main", source="minion1", received=at,
                               sent=at - (n % 10 + 1) / 1000, segments=1 + n % 3,
                               resends=1 if n % 40 == 0 else 0))
            if n == 77:
                other.append(record(n, node="other", source="minion1", received=at + 0.01,
                                    sent=at - (n % 10 + 1) / 1000))
        order = [*range(1, 30), 31, 30, *range(32, 101)]
        for index, n in enumerate(order, start=1):
            at = HOUR_START + 3000 + index
            other.append(record(n, node="other", source="minion2", received=at,
                                sent=at - (n % 10 + 1) / 1000, topic="beat"))
    return {"missing": [(50, 50), (120, 122)], "duplicates": [77], "out_of_order": [30],
            "records": 196 + 1 + 100}


def journal_road_traffic(directory: Path) -> dict[str, Any]:
    """Real road stacks on a lossy simulated link; the main estate journals what it delivers.

    The minion numbers its messages 1..120 (``_seq``) but never sends 40, 41 and
    90 and sends 60 twice; every fifth message is big enough for several
    segments.  Wall time is HOUR_START plus the virtual clock.
    """
    pair = allowed_pair(seed=3, impairment=Impairment(loss=0.1, jitter=0.005))
    sequence = [n for n in range(1, 121) if n not in {40, 41, 90}]
    sequence.insert(sequence.index(61), 60)
    for n in sequence:
        pair.minion.transmit({"_seq": n, "_sent": HOUR_START + pair.net.now, "_topic": "load",
                              "pad": "x" * (3000 if n % 5 == 0 else 10)},
                             to="main", now=pair.net.now)
    writer = JournalWriter(directory, "main")
    state = {"seen": 0, "requests": 0}
    journaled: list[JournalRecord] = []

    def journal_new() -> bool:
        received = pair.events(MAIN, events.MessageReceived)
        for event in received[state["seen"]:]:
            requests = pair.main.stats.resend_requests_sent
            at, resends = HOUR_START + pair.net.now, requests - state["requests"]
            writer.record_delivery("main", event, at, resends=resends)
            journaled.append(record_from_delivery("main", event, at, resends=resends))
            state["requests"] = requests
        state["seen"] = len(received)
        return state["seen"] >= len(sequence)

    pair.run_until(journal_new, timeout=300)
    writer.close()
    return {"records": journaled, "missing": [(40, 41), (90, 90)], "duplicates": [60],
            "resend_requests": pair.main.stats.resend_requests_sent}
