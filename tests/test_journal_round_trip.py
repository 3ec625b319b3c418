"""Journal records survive writing and reading, and deliveries map to records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.journal import (
    Endpoint,
    FsyncPolicy,
    JournalRecord,
    JournalWriter,
    RecordKind,
    decode_record,
    encode_record,
    journal_files,
    read_journal,
    record_from_delivery,
)
from raetlike.journal._delivery import delivery_line
from road.events import MessageReceived
from tests.journalkit import HOUR_START, record


def test_a_record_encodes_to_one_flat_json_line_and_back() -> None:
    original = JournalRecord(
        node="main", source=Endpoint("minion", "yard2", "share3"),
        destination=Endpoint("main", None, None), kind=RecordKind.SURVEY_RESPONSE,
        topic=None, transaction_id=9, request_id=2**31 + 5, sequence=None, body_bytes=0,
        segments=3, resends=1, sent=None, received=HOUR_START, session_id=42)
    line = encode_record(original)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line)["source_yard"] == "yard2"
    assert decode_record(line) == original


@pytest.mark.parametrize("line", [
    b'{"version":1,"node":"main"}',
    b'{"version":2}',
    b"[1,2]",
    b'{"version":1,"node":"main","source_estate":"m","destination_estate":"n","kind":"bogus"',
])
def test_anything_but_a_whole_record_is_refused_with_value_error(line: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - json, enum and field errors all are
        decode_record(line)


def test_records_appended_read_back_in_order(tmp_path: Path) -> None:
    written = [record(n, received=HOUR_START + n) for n in range(1, 101)]
    with JournalWriter(tmp_path, "main") as writer:
        for item in written:
            writer.append(item)
    contents = read_journal([tmp_path])
    assert contents.records == written
    assert contents.skipped == []
    [segment] = contents.files
    assert segment.parent.relative_to(tmp_path) == Path("date=2026-01-01/hour=10")
    assert segment.name.startswith("main.")
    assert segment.name.endswith(".jsonl")


def test_the_segment_being_written_is_hidden_behind_the_open_suffix(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path, "main")
    writer.append(record(1))
    assert journal_files(tmp_path, include_open=False) == []
    [open_file] = journal_files(tmp_path)
    assert open_file.name.endswith(".jsonl.open")
    assert read_journal([tmp_path]).records == []  # gathered: written at the next tick
    writer.tick()
    assert read_journal([tmp_path]).records == [record(1)]
    writer.close()
    [sealed] = journal_files(tmp_path, include_open=False)
    assert sealed.name == open_file.name.removesuffix(".open")


def test_a_road_delivery_maps_to_a_record_with_body_keys() -> None:
    body = {"_seq": 17, "_sent": HOUR_START - 0.25, "_kind": "request", "_topic": "disk.usage",
            "_id": 99, "route": {"src": ["minion", "yard9", None], "dst": ["main", "y", "s"]},
            "payload": "x" * 50}
    event = MessageReceived(remote="minion", body=body, session_id=3, transaction_id=12,
                            segments=2)
    mapped = record_from_delivery("main", event, HOUR_START, resends=4)
    assert mapped == JournalRecord(
        node="main", source=Endpoint("minion", "yard9", None),
        destination=Endpoint("main", "y", "s"), kind=RecordKind.REQUEST, topic="disk.usage",
        transaction_id=12, request_id=99, sequence=17,
        body_bytes=len(json.dumps(body, separators=(",", ":")).encode()), segments=2,
        resends=4, sent=HOUR_START - 0.25, received=HOUR_START, session_id=3)


def test_a_raw_or_plain_delivery_gets_defaults_and_its_byte_size(tmp_path: Path) -> None:
    raw = MessageReceived(remote="far", body=b"\x00" * 1234, session_id=1, transaction_id=2,
                          segments=1)
    odd = MessageReceived(remote="far", body={"_seq": "7", "_kind": ["x"], "_sent": "now"},
                          session_id=1, transaction_id=3, segments=1)
    with JournalWriter(tmp_path, "main") as writer:
        writer.record_delivery("main", raw, HOUR_START)
        writer.record_delivery("main", odd, HOUR_START + 1)
    first = record_from_delivery("main", raw, HOUR_START)
    second = record_from_delivery("main", odd, HOUR_START + 1)
    assert (first.source, first.destination) == (Endpoint("far"), Endpoint("main"))
    assert (first.kind, first.body_bytes, first.sequence, first.sent) == (
        RecordKind.MESSAGE, 1234, None, None)
    assert (second.kind, second.sequence, second.sent) == (RecordKind.MESSAGE, None, None)
    assert read_journal([tmp_path]).records == [first, second]


@pytest.mark.parametrize(("body", "kind", "topic"), [
    ({"bus": {"ty": "event", "to": "demo.tick", "pl": {}}}, RecordKind.EVENT, "demo.tick"),
    ({"bus": {"ty": "request", "to": "demo.add"}, "route": {}}, RecordKind.REQUEST, "demo.add"),
    ({"bus": {"ty": "response", "to": "demo.add"}}, RecordKind.RESPONSE, "demo.add"),
    ({"bus": {"ty": "keepalive"}}, RecordKind.MESSAGE, None),
    ({"sp": [1, 2], "body": {"_kind": "survey", "q": 1}}, RecordKind.SURVEY, None),
    ({"sp": [3], "body": {"_kind": "survey_response"}}, RecordKind.SURVEY_RESPONSE, None),
    ({"sp": [3], "body": "plain"}, RecordKind.MESSAGE, None),
    ({"_kind": "event", "bus": {"ty": "request"}}, RecordKind.EVENT, None),  # _kind wins
    ({"bus": {"ty": ["odd"]}, "sp": "x"}, RecordKind.MESSAGE, None),  # ill-typed: ignored
])
def test_a_bus_or_sp_message_says_its_own_kind(body: dict[str, object], kind: RecordKind,
                                               topic: str | None) -> None:
    event = MessageReceived(remote="minion", body=body, session_id=1, transaction_id=1,
                            segments=1)
    mapped = record_from_delivery("main", event, HOUR_START)
    assert (mapped.kind, mapped.topic) == (kind, topic)


@pytest.mark.parametrize(("body", "sent"), [
    ({"bus": {"ty": "event", "to": "demo.tick", "pl": {"n": 1, "_sent": 12.5}}}, 12.5),
    ({"bus": {"ty": "request", "pl": [1, 2]}}, None),
    ({"sp": [1, 2], "body": {"_kind": "survey", "_sent": 7}}, 7.0),
    ({"sp": [1], "body": {"_sent": "soon"}}, None),  # ill-typed: ignored
    ({"_sent": 3.0, "bus": {"ty": "event", "pl": {"_sent": 4.0}}}, 3.0),  # the outer wins
    ({"body": {"_sent": 5.0}}, None),  # not an SP message
])
def test_a_bus_payload_or_sp_body_carries_the_send_time(body: dict[str, object],
                                                        sent: float | None) -> None:
    event = MessageReceived(remote="minion", body=body, session_id=1, transaction_id=1,
                            segments=1)
    assert record_from_delivery("main", event, HOUR_START).sent == sent
    assert json.loads(delivery_line("main", event, HOUR_START))["sent"] == sent


def test_appended_records_are_written_at_each_tick_or_once_flush_bytes_wait(
        tmp_path: Path) -> None:
    line = len(encode_record(record(1)))
    writer = JournalWriter(tmp_path, "main", flush_bytes=10 * line)
    for n in range(1, 10):
        writer.append(record(n))
    assert read_journal([tmp_path]).records == []
    writer.append(record(10))  # the tenth fills flush_bytes: all ten go in one write
    assert [r.sequence for r in read_journal([tmp_path]).records] == list(range(1, 11))
    writer.append(record(11))
    writer.tick()
    assert len(read_journal([tmp_path]).records) == 11
    always = JournalWriter(tmp_path / "always", "main", fsync=FsyncPolicy.ALWAYS)
    always.append(record(1))  # fsync always: on disk before append returns
    assert read_journal([tmp_path / "always"]).records == [record(1)]
    always.close()
    writer.close()


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(), st.text(max_size=8))
_BODIES = st.one_of(
    st.binary(max_size=64),
    st.dictionaries(st.sampled_from(["_seq", "_sent", "_kind", "_topic", "_id", "pad", "bus",
                                     "sp", "body", "route"]),
                    st.one_of(_VALUES,
                              st.fixed_dictionaries({"ty": _VALUES, "to": _VALUES}),
                              st.fixed_dictionaries({"ty": _VALUES, "pl": st.one_of(
                                  _VALUES, st.fixed_dictionaries({"_sent": _VALUES}))}),
                              st.fixed_dictionaries({"_sent": _VALUES}),
                              st.fixed_dictionaries({"src": st.lists(_VALUES, max_size=3),
                                                     "dst": st.lists(_VALUES, max_size=3)}),
                              st.lists(_VALUES, max_size=3)),
                    max_size=6),
)


@settings(max_examples=300)
@given(body=_BODIES, received=st.floats(min_value=0, max_value=4e9),
       resends=st.integers(min_value=0, max_value=2**40))
def test_the_hot_path_writes_exactly_the_bytes_of_the_record_it_stands_for(
        body: object, received: float, resends: int) -> None:
    event = MessageReceived(remote="minion", body=body, session_id=3, transaction_id=12,
                            segments=2)
    line = delivery_line("main", event, received, resends=resends)
    assert line == encode_record(record_from_delivery("main", event, received,
                                                      resends=resends))
    assert decode_record(line) == record_from_delivery("main", event, received,
                                                       resends=resends)
    # standard JSON: the standard library reads the same fields, in the schema's order
    fields = json.loads(line)
    assert list(fields) == list(json.loads(encode_record(record(1))))
    assert line.endswith(b"\n")
    assert b"\n" not in line[:-1]
