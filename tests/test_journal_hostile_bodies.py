"""What a peer's message body can do to the journal: never raise out of it, never write a
line its own readers refuse, never make a line far larger than a bound."""

from __future__ import annotations

from pathlib import Path

import orjson

from raetlike.durable._api import DurableMessageReceived
from raetlike.journal import JournalWriter, durable_marks_after, read_journal
from raetlike.journal._delivery import MAX_TEXT, body_size
from raetlike.wire.body import BodyKind, parse_body
from road.events import MessageReceived
from tests.journalkit import HOUR_START

T = HOUR_START + 1800.0


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


def _records(root: Path) -> list[object]:
    contents = read_journal([root])
    assert contents.skipped == []
    return contents.records


def test_a_body_nested_deeper_than_the_encoders_go_is_journaled(tmp_path: Path) -> None:
    import msgpack  # noqa: PLC0415 - the road's own body codec

    body = parse_body(BodyKind.MSGPACK, msgpack.packb({"x": _nested(1000)}))
    with JournalWriter(tmp_path, "main", clock=lambda: T) as writer:
        writer.record_delivery("main", MessageReceived("peer", body, 1, 7, 1), T)
        writer.record_delivery("main", MessageReceived("peer", {"x": [1 << 70, "\ud800"]},
                                                       1, 8, 1), T)
    deep, odd = _records(tmp_path)
    assert deep.body_bytes == len('{"x":') + 2 * 1001 + len("}")  # as its JSON would be
    assert odd.body_bytes == len(('{"x":[' + str(1 << 70) + ',"\ud800"]}').encode(
        errors="surrogatepass"))


def test_body_size_is_the_compact_json_size_walked_or_not() -> None:
    for body in ({"a": [1, 2.5, {"b": "é"}], "c": None, "d": True, 3: []}, [], {},
                 {"k": [[[[]]]]}):
        assert body_size(body) == len(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS))
    deep = {"k": _nested(400)}  # past orjson's depth: walked
    assert body_size(deep) == len('{"k":') + 2 * 401 + 1


def test_a_lone_surrogate_in_a_topic_leaves_every_line_readable(tmp_path: Path) -> None:
    body = parse_body(BodyKind.JSON, b'{"_topic": "a\\ud800b", "n": 1}')
    writer = JournalWriter(tmp_path, "main", clock=lambda: T)
    position = writer.position()
    writer.record_durable("main", DurableMessageReceived("peer", body, 1, 7, 1, 5, 42), T,
                          store=5, durable_seq=42)
    writer.record_delivery("main", MessageReceived("peer", body, 1, 8, 1), T)
    writer.flush()
    assert list(durable_marks_after(tmp_path, "main", position)) == [("peer", 5, 42)]
    writer.close()
    lines = [line for path in tmp_path.rglob("*.jsonl") for line in path.read_bytes().splitlines()]
    assert [orjson.loads(line)["topic"] for line in lines] == ["a\ufffdb"] * 2
    assert [record.topic for record in _records(tmp_path)] == ["a\ufffdb"] * 2


def test_a_peers_text_is_kept_to_a_bound(tmp_path: Path) -> None:
    topic = "\x01" * (12 << 20)  # 12 MiB of control characters: 6 bytes each escaped
    route = {"src": ["e" * (1 << 20), "y" * 5000, None], "dst": ["main", None, None]}
    with JournalWriter(tmp_path, "main", clock=lambda: T) as writer:
        writer.record_delivery("main", MessageReceived(
            "peer", {"_topic": topic, "route": route}, 1, 7, 1), T)
    [line] = [line for path in tmp_path.rglob("*.jsonl") for line in path.read_bytes().splitlines()]
    assert len(line) < 3 * 6 * MAX_TEXT + 1000
    [record] = _records(tmp_path)
    assert record.topic == "\x01" * MAX_TEXT
    assert (record.source.estate, record.source.yard) == ("e" * MAX_TEXT, "y" * MAX_TEXT)


def test_a_damaged_line_nested_past_the_parsers_is_skipped_not_raised(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, "main", clock=lambda: T) as writer:
        writer.record_delivery("main", MessageReceived("peer", b"x", 1, 7, 1), T)
    [segment] = tmp_path.rglob("*.jsonl")
    with segment.open("ab") as stream:
        stream.write(b"[" * 100_000 + b"\n" + b'{"a":' * 100_000 + b"\n")
    contents = read_journal([tmp_path])
    assert len(contents.records) == 1
    assert [skipped.line for skipped in contents.skipped] == [2, 3]


def test_a_bytes_value_in_a_body_counts_its_length_not_its_repr(tmp_path: Path) -> None:
    blob = bytes(range(256)) * 4096  # 1 MiB of msgpack bin: its repr is about 4x that
    body = {"blob": blob, "list": [b"ab", 1]}
    assert body_size(body) == len('{"blob":,"list":[,1]}') + len(blob) + 2
    with JournalWriter(tmp_path, "main", clock=lambda: T) as writer:
        writer.record_delivery("main", MessageReceived("peer", body, 1, 7, 1), T)
    [record] = _records(tmp_path)
    assert record.body_bytes == body_size(body)


def test_durable_marks_follow_the_writers_order_when_the_clock_steps_back(
        tmp_path: Path) -> None:
    now = [T]
    writer = JournalWriter(tmp_path, "main", clock=lambda: now[0])
    writer.record_durable("main", DurableMessageReceived("peer", b"x", 1, 7, 1, 5, 1), now[0],
                          store=5, durable_seq=1)
    position = writer.position()  # a checkpoint
    now[0] = T - 600  # the wall clock steps back ten minutes
    writer.rotate()
    writer.record_durable("main", DurableMessageReceived("peer", b"x", 1, 8, 1, 5, 2), now[0],
                          store=5, durable_seq=2)
    writer.flush()
    assert list(durable_marks_after(tmp_path, "main", position)) == [("peer", 5, 2)]
    writer.close()


def test_a_writer_numbers_its_segments_on_from_the_journals_highest(tmp_path: Path) -> None:
    for _ in range(3):  # three runs (the same pid here, as after restarts in a container)
        with JournalWriter(tmp_path, "main", clock=lambda: T) as writer:
            writer.record_delivery("main", MessageReceived("peer", b"x", 1, 7, 1), T)
            writer.rotate()
            writer.record_delivery("main", MessageReceived("peer", b"x", 1, 8, 1), T)
    serials = sorted(int(path.name.split(".")[-2]) for path in tmp_path.rglob("*.jsonl"))
    assert serials == [1, 2, 3, 4, 5, 6]
