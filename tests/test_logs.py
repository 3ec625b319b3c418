"""Logs an operator can live with: failures at WARNING with their reason, one
line per message only at DEBUG, the logger's name in every line, and
``--log-format json`` as one JSON object per line."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from raetlike.logs import setup_logging
from road import events
from road.stack import LocalEstate
from tests.roadkit import MINION, make_pair
from tests.test_cli import Estate, _run


def test_a_rejected_join_is_a_warning_naming_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    pair = make_pair(main_estate=LocalEstate("main", main=False))  # a vacuous join is refused
    with caplog.at_level(logging.WARNING):
        pair.minion.join(("127.0.0.1", 7530), now=pair.net.now)
        pair.run_until(lambda: bool(pair.events(MINION, events.JoinRejected)))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any(r.name == "road._transaction" and "join with" in r.getMessage()
               and "failed: rejected" in r.getMessage() for r in warnings), caplog.text


def test_failures_are_warned_of_once_per_outage_or_every_100th_when_a_peer_repeats_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pair = make_pair(main_estate=LocalEstate("main", main=False))
    with caplog.at_level(logging.DEBUG, logger="road._transaction"):
        for _ in range(150):
            pair.minion.join(("127.0.0.1", 7530), now=pair.net.now)
            pair.net.run_for(0.2)
    refusals = [r for r in caplog.records
                if r.getMessage().startswith("main: join with") and "failed" in r.getMessage()]
    assert len(refusals) > 100  # each one (the join rate limit drops some) is logged
    loud = [r for r in refusals if r.levelno == logging.WARNING]
    assert 1 <= len(loud) <= 3


def test_our_own_join_retries_warn_once_until_one_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pair = make_pair()
    with caplog.at_level(logging.DEBUG, logger="road._transaction"):
        pair.minion.join(("127.0.0.1", 9), now=pair.net.now)  # nobody there: it retries
        pair.net.run_for(300.0)
    ours = [r for r in caplog.records
            if r.getMessage().startswith("minion: join with") and "failed" in r.getMessage()]
    assert len(ours) >= 3, [r.getMessage() for r in ours]
    assert [r.levelno for r in ours].count(logging.WARNING) == 1
    assert "timed out" in ours[0].getMessage()


def test_text_lines_carry_the_logger_name_and_json_lines_parse() -> None:
    out = io.StringIO()
    setup_logging(logging.INFO, "text", out)
    logging.getLogger("road.example").warning("join with %s failed: %s", "main", "timed out")
    line = out.getvalue().strip()
    assert line.endswith(" WARNING road.example: join with main failed: timed out")

    out = io.StringIO()
    setup_logging(logging.INFO, "json", out)
    logging.getLogger("road.example").info("a\nquoted %r", "x")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("road.example").exception("failed")
    first, second = (json.loads(text) for text in out.getvalue().splitlines())
    assert first["level"] == "INFO"
    assert first["logger"] == "road.example"
    assert first["msg"] == "a\nquoted 'x'"
    assert first["ts"].endswith("+00:00")
    assert "ValueError: boom" in second["exc"]
    setup_logging(logging.WARNING)


def test_an_echo_main_logs_no_line_per_message_and_json_lines_parse(tmp_path: Path) -> None:
    main = Estate(tmp_path, "main", "--main", "--echo", "--auto", "once",
                  "--keep", str(tmp_path / "keep"), "--log-format", "json")
    try:
        result = _run("ping", main.address, "--count", "300", "--timeout", "20")
        assert result.returncode == 0, result.stderr
        assert main.wait_for_log("allowed ping-", 5)
    finally:
        main.stop()
    lines = main.log.read_text().splitlines()
    assert len(lines) < 15, lines  # 300 messages, and no line for each
    records = [json.loads(line) for line in lines]
    assert {"ts", "level", "logger", "msg"} <= set(records[0])
    assert any(r["logger"] == "raetlike.cli.estate" and "allowed ping-" in r["msg"]
               for r in records)
