"""What ``raetlike estate`` logs about joins: one line per pending join, hostile names escaped."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raetlike.cli.estate import EstateOptions, _Estate, default_auto
from raetlike.wire.kinds import AutoMode
from road import events


@pytest.fixture
def estate(tmp_path: Path) -> Iterator[_Estate]:
    running = _Estate(EstateOptions(name="main", host="127.0.0.1", port=0, main=True,
                                    keep_dir=tmp_path / "keep"), time.monotonic)
    yield running
    running.close()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_main_estate_accepts_new_keys_never_and_a_joining_one_once_unless_told() -> None:
    assert default_auto(main=True) is AutoMode.NEVER
    assert default_auto(main=False) is AutoMode.ONCE


def test_the_estate_keep_and_stack_use_the_main_default(estate: _Estate) -> None:
    assert estate.keep.auto is AutoMode.NEVER
    assert estate.stack.config.auto is AutoMode.NEVER


def test_a_pending_join_is_one_warning_saying_how_to_accept_it_however_often_it_retries(
        estate: _Estate, caplog: pytest.LogCaptureFixture) -> None:
    estate.stack.add_remote(("127.0.0.1", 5555), name="minion")
    caplog.set_level(logging.DEBUG, logger="raetlike.cli.estate")
    for _ in range(5):  # the joiner retries while it waits: each attempt is pending again
        estate.handle(events.JoinPending("minion", "minion", local=True))
    keep = estate.keep.keep.directory
    assert warnings(caplog) == [
        (f"estate main: join from 'minion' (role 'minion', 127.0.0.1:5555) is pending; "
         f"accept it with: raetlike keys accept minion --keep {keep}")]
    caplog.clear()
    estate.handle(events.JoinRejected("minion", "rejected by operator"))
    estate.handle(events.JoinPending("minion", "minion", local=True))  # it asks again
    assert [line.partition(";")[0] for line in warnings(caplog)] == [
        "estate main: join with minion rejected: rejected by operator (1 so far)",
        "estate main: join from 'minion' (role 'minion', 127.0.0.1:5555) is pending"]


def test_rejections_retried_or_spoofed_are_warned_of_once_in_a_hundred(
        estate: _Estate, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="raetlike.cli.estate")
    for _ in range(150):  # a wanted join retried every rejoin interval, or forged REJECTs
        estate.handle(events.JoinRejected("main", "rejected"))
    assert warnings(caplog) == ["estate main: join with main rejected: rejected (1 so far)",
                                "estate main: join with main rejected: rejected (101 so far)"]


def test_a_shell_unsafe_keep_path_is_quoted_in_the_command(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    keep_dir = tmp_path / "my keeps"
    running = _Estate(EstateOptions(name="main", host="127.0.0.1", port=0, main=True,
                                    keep_dir=keep_dir), time.monotonic)
    try:
        running.handle(events.JoinPending("minion", "minion", local=True))
    finally:
        running.close()
    (line,) = warnings(caplog)
    assert line.endswith(f"raetlike keys accept minion --keep '{keep_dir / 'main'}'")
    assert "(role 'minion')" in line  # no address known for a remote the stack does not hold


def test_control_characters_in_names_from_the_network_never_reach_the_log(
        estate: _Estate, caplog: pytest.LogCaptureFixture) -> None:
    hostile = "evil\x1b[2J\x1b[31m\nestate main: joined admin"
    caplog.set_level(logging.DEBUG, logger="raetlike.cli.estate")
    estate.handle(events.JoinPending(hostile, hostile, local=True))
    estate.handle(events.Joined(hostile, uid=7, main=False, initiator=False))
    estate.handle(events.JoinRejected(hostile, f"reason {hostile}"))
    estate.handle(events.RemoteLost(hostile, hostile))
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 4
    for line in logged:
        assert "\x1b" not in line
        assert "\n" not in line
        assert "\\x1b[2J" in line
