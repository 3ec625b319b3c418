"""kill -9, twenty times, in a stream of 10,000 numbered messages: each arrives once.

Real processes on 127.0.0.1: ``raetlike estate recv --main --durable --journal`` and a
durable sender (:mod:`tests.durable_peer`).  At random moments the sender, the
receiver or both are killed with SIGKILL and started again on the same keep and store.
At the end every number from 1 to 10,000 is in the receiver's journal exactly once, and
the pipeline's audit (real local Spark) says the stream is complete.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import read_journal
from raetlike.pipeline import PipelineOptions, run_pipeline
from tests.sparkkit import spark  # noqa: F401 - the session fixture

ROOT = Path(__file__).resolve().parent.parent
COUNT = 10_000
ROUNDS = 20
RATE = 400.0  # messages/s while the sender runs: the stream outlasts the twenty kills
DEADLINE = 300.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Run:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.recv_port, self.send_port = _free_port(), _free_port()
        self.journal = root / "journal"
        self.receiver: subprocess.Popen[bytes] | None = None
        self.sender: subprocess.Popen[bytes] | None = None

    def start_receiver(self) -> None:
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "raetlike", "estate", "recv", "--main", "--auto", "always",
             "--host", "127.0.0.1", "--port", str(self.recv_port), "--keep",
             str(self.root / "recv-keep"), "--durable", "--journal", str(self.journal), "-q"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(self.root / "recv.err").open("ab"))

    def start_sender(self) -> None:
        self.sender = subprocess.Popen(
            [sys.executable, "-m", "tests.durable_peer", "--name", "send", "--keep",
             str(self.root / "send-keep"), "--durable", str(self.root / "send-store"),
             "--join", f"127.0.0.1:{self.recv_port}", "--to", "recv", "--port",
             str(self.send_port), "--count", str(COUNT), "--rate", str(RATE)],
            cwd=ROOT, stdout=(self.root / "send.out").open("ab"),
            stderr=(self.root / "send.err").open("ab"))

    def journaled(self) -> bool:
        """Whether the receiver journaled a delivery yet."""
        return any(path.stat().st_size for path in self.journal.glob("date=*/hour=*/*"))

    @staticmethod
    def kill(process: subprocess.Popen[bytes] | None) -> None:
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self) -> None:
        for process in (self.sender, self.receiver):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@pytest.mark.parametrize("victim", ["sender", "receiver", "both"])
def test_twenty_kills_lose_and_repeat_nothing(tmp_path: Path, victim: str,
                                              spark: Any) -> None:  # noqa: F811
    rng = random.Random(f"durable-{victim}")
    run = _Run(tmp_path)
    run.start_receiver()
    run.start_sender()
    try:
        # the stream first: the kills fall in a running stream, as the issue asks.  (Kills
        # before the first allow once left the pair apart for minutes: a main killed after
        # answering the join but before keeping the joiner drops its allows; the joiner
        # now joins afresh, tests/test_road_main_restart.py.)
        started = time.monotonic() + 120.0
        while not run.journaled() and time.monotonic() < started:
            time.sleep(0.05)
        assert run.journaled(), "the stream never started"
        kills_in_stream = 0
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.3, 1.0))  # a random moment in the stream, not a wait
            assert run.sender is not None
            if run.sender.poll() is None:
                kills_in_stream += 1
            if victim in ("sender", "both"):
                run.kill(run.sender)
            if victim in ("receiver", "both"):
                run.kill(run.receiver)
                run.start_receiver()
            if victim in ("sender", "both"):
                run.start_sender()
        assert run.sender is not None
        deadline = time.monotonic() + DEADLINE
        while run.sender.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert run.sender.poll() == 0, (
            f"sender did not finish: {(tmp_path / 'send.err').read_text()[-2000:]}")
        assert kills_in_stream == ROUNDS, "the stream ended before the kills did: slow it"
        assert run.receiver is not None
        run.receiver.send_signal(signal.SIGTERM)
        run.receiver.wait(timeout=60)
    finally:
        run.stop()
    assert (tmp_path / "recv-keep" / "recv" / "durable" / "outbox").is_dir()  # --durable: keep
    contents = read_journal([run.journal])
    numbers = Counter(r.sequence for r in contents.records if r.source.estate == "send")
    assert sorted(numbers) == list(range(1, COUNT + 1)), "messages lost"
    assert max(numbers.values()) == 1, "messages delivered twice"
    result = run_pipeline(PipelineOptions(journals=(run.journal,), out=tmp_path / "out",
                                          quiet=True), spark)
    rows = spark.read.parquet(str(result.tables["audit_summary"])).collect()
    (summary,) = [row.asDict() for row in rows if str(row["source"]).startswith("send")]
    assert summary["complete"], summary
    assert summary["records"] == COUNT, summary
