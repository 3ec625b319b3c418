"""The Spark pipeline over known traffic: real road stacks, two synthetic nodes, a crash."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from raetlike.cli import main
from raetlike.journal import JournalWriter, encode_record, read_journal
from raetlike.journal import _writer as writer_module
from raetlike.pipeline import PipelineOptions, run_pipeline
from tests.journalkit import HOUR_START, journal_road_traffic, record, write_known_traffic
from tests.sparkkit import spark  # noqa: F401 - the session fixture

SVG = "{http://www.w3.org/2000/svg}svg"


def _crashed_journal(directory: Path) -> None:
    """A writer that died mid-record: three records from minion3, then a torn fourth."""
    writer = JournalWriter(directory, "gamma")
    for n in range(1, 4):
        writer.append(record(n, node="gamma", source="minion3", received=HOUR_START + 100 + n))
    writer.tick()  # the loop round that appended them ended: they are written
    path = writer.open_segment
    assert path is not None
    with path.open("ab") as tail:
        tail.write(encode_record(record(4, node="gamma", source="minion3"))[:50])
    writer_module._OPEN_PATHS.discard(path)


def _outside_the_window(directory: Path) -> None:
    """minion4's records, all outside [SINCE, UNTIL): two in other hours, one late in hour 10."""
    with JournalWriter(directory, "delta") as writer:
        for n, at in ((1, HOUR_START - 10), (2, UNTIL + 90), (3, HOUR_START + 7300)):
            writer.append(record(n, node="delta", source="minion4", received=at))


SINCE, UNTIL = HOUR_START, HOUR_START + 3500


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> dict[str, Any]:  # noqa: F811
    root = tmp_path_factory.mktemp("journals")
    road = journal_road_traffic(root / "road")
    known = write_known_traffic(root)
    _crashed_journal(root / "crashed")
    _outside_the_window(root / "extras")
    journals = (root / "road", root / "main", root / "other", root / "crashed", root / "extras")
    out = root / "out"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = main(["-q", "pipeline", *map(str, journals), "--out", str(out),
                       "--since", str(SINCE), "--until", "2026-01-01T10:58:20"])
    return {"status": status, "stdout": stdout.getvalue().splitlines(), "out": out,
            "road": road, "known": known, "journals": journals, "spark": spark}


def _table(run: dict[str, Any], name: str) -> list[dict[str, Any]]:
    path = run["out"] / "tables" / name
    return [r.asDict() for r in run["spark"].read.parquet(str(path)).collect()]


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run["out"] / "summary.json").read_text())
    return summary


def test_the_command_line_says_how_many_records_and_where_the_report_is(
        run: dict[str, Any]) -> None:
    assert run["status"] == 0
    records = len(run["road"]["records"]) + run["known"]["records"] + 3
    assert run["stdout"][0].startswith(f"{records} records (1 skipped lines)")
    assert run["stdout"][-1] == f"report: {run['out'] / 'report.html'}"


def test_every_whole_record_in_the_window_is_counted_and_the_torn_one_skipped(
        run: dict[str, Any]) -> None:
    summary = _summary(run)
    assert summary["records"] == len(run["road"]["records"]) + run["known"]["records"] + 3
    assert summary["skipped_lines"] == 1
    sources = {r["source"] for r in _table(run, "audit_summary")}
    assert sources == {"minion", "minion1", "minion2", "minion3"}  # not minion4


def test_the_audit_finds_exactly_the_injected_losses_and_duplicates(run: dict[str, Any]) -> None:
    missing = {(r["source"], r["first_missing"], r["last_missing"])
               for r in _table(run, "audit_missing")}
    assert missing == {("minion", 40, 41), ("minion", 90, 90),
                       ("minion1", 50, 50), ("minion1", 120, 122)}
    duplicates = {(r["source"], r["sequence"], r["copies"])
                  for r in _table(run, "audit_duplicates")}
    assert duplicates == {("minion", 60, 2), ("minion1", 77, 2)}
    late = {(r["source"], r["sequence"]) for r in _table(run, "audit_out_of_order")}
    assert ("minion2", 30) in late
    assert all(source != "minion2" or sequence == 30 for source, sequence in late)
    summary = {r["source"]: r for r in _table(run, "audit_summary")}
    assert summary["minion2"]["complete"] is True
    assert summary["minion3"]["complete"] is True
    assert (summary["minion"]["missing"], summary["minion"]["duplicates"]) == (3, 1)
    assert (summary["minion1"]["first"], summary["minion1"]["last"]) == (1, 200)


def test_traffic_counts_and_bytes_match_the_journal(run: dict[str, Any]) -> None:
    contents = read_journal(run["journals"][:-1])  # all but the records outside the window
    expected: dict[tuple[str, str], tuple[int, int]] = {}
    for item in contents.records:
        key = (item.source.estate, item.destination.estate)
        count, size = expected.get(key, (0, 0))
        expected[key] = (count + 1, size + item.body_bytes)
    counted: dict[tuple[str, str], tuple[int, int]] = {}
    for row in _table(run, "traffic"):
        key = (row["source"], row["destination"].split("/")[0])
        count, size = counted.get(key, (0, 0))
        counted[key] = (count + row["messages"], size + row["bytes"])
        assert row["messages_per_second"] == pytest.approx(row["messages"] / 60.0)
    assert counted == expected


def _nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def test_latency_percentiles_match_exact_ones_from_the_journal(run: dict[str, Any]) -> None:
    latencies = [(r.received - r.sent) * 1000 for r in run["road"]["records"]]
    [row] = [r for r in _table(run, "latency") if r["source"] == "minion"]
    assert row["messages"] == len(latencies)
    for name, fraction in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        assert row[name] == pytest.approx(_nearest_rank(latencies, fraction), abs=1e-3)
    assert row["max_ms"] == pytest.approx(max(latencies))
    assert row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["max_ms"]


def test_resends_and_segments_per_remote_add_up(run: dict[str, Any]) -> None:
    [row] = [r for r in _table(run, "remotes") if r["remote"] == "minion"]
    records = run["road"]["records"]
    assert row["resends"] == run["road"]["resend_requests"] > 0
    assert row["segments"] == sum(r.segments for r in records)
    assert row["multi_segment_messages"] == sum(1 for r in records if r.segments > 1) > 0


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_the_report_is_an_html_page_with_valid_svg_plots(run: dict[str, Any]) -> None:
    out = run["out"]
    for name, drawn in (("latency.svg", "latency-bar-"), ("rate.svg", "rate-point-"),
                        ("kinds.svg", "quantile-point-"), ("pairs.svg", "quantile-point-")):
        root = ET.parse(out / name).getroot()  # noqa: S314 - our own output
        assert root.tag == SVG
        ids = [e.get("id", "") for e in root.iter()]
        assert sum(i.startswith(drawn) for i in ids) > 1, name  # more than one point drawn
    html = (out / "report.html").read_text()
    parser = _Tags()
    parser.feed(html)
    assert parser.tags.count("svg") == 4  # latency by kind and by pair, histogram, rate
    assert parser.tags.count("table") >= 3
    assert "4 missing" not in html  # the figure is 3 + 4 = 7
    assert "7 missing and 2 duplicate message(s)" in html
    assert _summary(run)["latency"]["messages"] > 0


def test_an_empty_journal_gives_an_empty_report(tmp_path: Path, spark: Any) -> None:  # noqa: F811
    (tmp_path / "journal").mkdir()
    result = run_pipeline(PipelineOptions((tmp_path / "journal",), tmp_path / "out"), spark)
    assert (result.records, result.skipped_lines) == (0, 0)
    assert result.report.is_file()
    assert ET.parse(tmp_path / "out" / "rate.svg").getroot().tag == SVG  # noqa: S314


def test_bad_arguments_exit_2_and_a_missing_journal_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--since", "yesterday"]) == 2
    assert "invalid time 'yesterday'" in capsys.readouterr().err
    assert main(["pipeline", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 1
    assert "no such journal directory" in capsys.readouterr().err


def test_a_message_a_manor_relays_is_not_counted_as_a_duplicate(
        tmp_path: Path, spark: Any) -> None:  # noqa: F811
    """Main journals what it passes on to minion2; the audit counts minion2's copy only."""
    with JournalWriter(tmp_path / "main", "main") as relay, \
            JournalWriter(tmp_path / "minion2", "minion2") as destination:
        for n in range(1, 11):
            at_minion2 = record(n, node="minion2", source="minion1",
                                received=HOUR_START + n)
            relay.append(dataclasses.replace(at_minion2, node="main"))
            destination.append(at_minion2)
    out = tmp_path / "out"
    run_pipeline(PipelineOptions((tmp_path / "main", tmp_path / "minion2"), out), spark)
    rows = [r.asDict() for r in spark.read.parquet(str(out / "tables" / "audit_summary")).collect()]
    assert [(r["records"], r["duplicates"], r["missing"], r["complete"]) for r in rows] == [
        (10, 0, 0, True)]


def test_latency_and_resends_per_pair_and_kind_match_the_journal(run: dict[str, Any]) -> None:
    road = run["road"]["records"]
    latencies = [(r.received - r.sent) * 1000 for r in road]
    summary = _summary(run)
    [pair] = [p for p in summary["pairs"] if p["source_estate"] == "minion"]
    assert pair["messages"] == len(road)
    assert pair["resends"] == sum(r.resends for r in road)
    for name, fraction in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        assert pair[name] == pytest.approx(_nearest_rank(latencies, fraction), abs=1e-3)
    kinds = {k["kind"]: k for k in summary["kinds"]}
    assert sum(k["messages"] for k in kinds.values()) == summary["records"]
    assert kinds["message"]["p50_ms"] <= kinds["message"]["p90_ms"] <= kinds["message"]["p99_ms"]
    assert summary["resends"]["resends"] == sum(p["resends"] for p in summary["pairs"])


def test_the_summary_holds_the_rate_series_its_bucket_edges_and_the_header(
        run: dict[str, Any]) -> None:
    from raetlike import __version__  # noqa: PLC0415
    from raetlike.pipeline._tables import choose_window  # noqa: PLC0415

    summary = _summary(run)
    rate = summary["rate"]
    width = rate["window_seconds"]
    assert width == choose_window(summary["last_received"] - summary["first_received"])
    assert sum(rate["messages"]) == summary["records"]
    assert len(rate["edges"]) == len(rate["messages"]) == len(rate["messages_per_second"]) > 1
    steps = {round(b - a, 6) for a, b in zip(rate["edges"], rate["edges"][1:], strict=False)}
    assert steps == {width}
    assert rate["edges"][0] <= summary["first_received"] < rate["edges"][0] + width
    assert summary["version"] == __version__
    assert summary["generated"].endswith("+00:00")
    html = (run["out"] / "report.html").read_text()
    assert "True" not in html
    assert "(first 0)" not in html
    assert f"raetlike {__version__}" in html
