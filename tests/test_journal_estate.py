"""``raetlike estate --journal DIR`` journals every message it delivers, in a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from raetlike.cli.ping import ping
from raetlike.journal import RecordKind, journal_files, read_journal
from raetlike.udp import parse_host_port


def test_an_echoing_estate_journals_each_ping_it_delivers(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    command = [sys.executable, "-m", "raetlike", "estate", "master", "--host", "127.0.0.1",
               "--port", "0", "--main", "--auto", "once", "--echo",
               "--keep", str(tmp_path / "keep"),
               "--journal", str(journal)]
    with (tmp_path / "master.log").open("wb") as log:
        estate = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
    try:
        assert estate.stdout is not None
        line = estate.stdout.readline().decode()
        assert line.startswith("estate master listening on "), line
        address = parse_host_port(line.removeprefix("estate master listening on ").strip())
        result = ping(address, count=50, size=200, timeout=20)
    finally:
        estate.terminate()
        status = estate.wait(timeout=10)
        if estate.stdout is not None:
            estate.stdout.close()
    assert status == 0
    assert len(result.round_trips) == 50
    assert journal_files(journal, include_open=False) == journal_files(journal)  # sealed
    contents = read_journal([journal])
    assert contents.skipped == []
    assert len(contents.records) == 50
    assert {(r.node, r.destination.estate, r.kind) for r in contents.records} == {
        ("master", "master", RecordKind.MESSAGE)}
    assert len({r.source.estate for r in contents.records}) == 1
    assert all(r.body_bytes > 200 for r in contents.records)
    assert all(r.segments == 1 for r in contents.records)
    assert len({r.transaction_id for r in contents.records}) == 50
