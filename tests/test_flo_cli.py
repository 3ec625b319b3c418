"""``raetlike flo``: runs a plan's houses, reports how it ended, exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raetlike.cli import main
from tests.flokit import free_udp_ports, lane_plan, road_plan


def test_flo_runs_every_house_of_a_plan_and_prints_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, _ = lane_plan(tmp_path)

    status = main(["-q", "flo", str(plan), "--period", "0.01", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["ok"] is True
    assert report["houses"] == ["lord", "serf"]
    assert report["failures"] == {}
    assert report["interrupted"] is None
    assert 0 < report["ticks"] < 200


def test_flo_house_option_runs_one_house_and_exits_1_with_its_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nobody, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, nobody, minion_port)
    text = plan.read_text().replace("elapsed >= 10", "elapsed >= 0.2")
    plan.write_text(text)

    status = main(["-q", "flo", str(plan), "--house", "minion", "--period", "0.01"])

    captured = capsys.readouterr()
    assert status == 1
    assert captured.out.startswith(f"plan {plan}: minion ran ")
    assert captured.err.strip() == "raetlike flo: error: house minion: no answer from the master"


def test_flo_names_a_missing_plan_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["flo", "/nonexistent/plan.flo"])

    assert stopped.value.code == 2
    assert "invalid plan '/nonexistent/plan.flo': no such file" in capsys.readouterr().err


def test_flo_rejects_a_period_of_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, _ = lane_plan(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(["flo", str(plan), "--period", "0"])

    assert stopped.value.code == 2
    assert "--period" in capsys.readouterr().err


def test_flo_reports_an_unknown_house_in_one_line_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, _ = lane_plan(tmp_path)

    status = main(["-q", "flo", str(plan), "--house", "king"])

    assert status == 1
    assert capsys.readouterr().err.strip() == (
        f"raetlike flo: error: {plan}: no house 'king' (houses: lord, serf)")


def test_flo_joiner_looks_up_a_host_name_and_runs_the_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    master_port, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, master_port, minion_port)
    text = plan.read_text()
    joiner = f'joiner at enter with host "127.0.0.1" port {master_port}'
    assert joiner in text
    plan.write_text(text.replace(joiner, joiner.replace('"127.0.0.1"', '"localhost"')))

    status = main(["-q", "flo", str(plan), "--period", "0.01", "--json"])

    report = json.loads(capsys.readouterr().out)
    assert status == 0, report
    assert report["failures"] == {}


def test_flo_joiner_with_a_host_that_does_not_resolve_fails_in_one_line_and_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    master_port, minion_port = free_udp_ports(2)
    plan = road_plan(tmp_path, master_port, minion_port)
    text = plan.read_text()
    joiner = f'joiner at enter with host "127.0.0.1" port {master_port}'
    plan.write_text(text.replace(joiner, joiner.replace('"127.0.0.1"', '"nosuchhost.invalid"')))

    status = main(["-q", "flo", str(plan), "--period", "0.01", "--json"])

    captured = capsys.readouterr()
    assert status == 2  # like a bad HOST:PORT on the command line
    assert json.loads(captured.out)["ok"] is False
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("raetlike flo: error: house minion: joiner nosuchhost.invalid:")
    assert "cannot resolve host 'nosuchhost.invalid'" in line
