"""The pyarrow converter against Spark's, differentially: ``_arrow.convert_unit`` either
declines a unit (None: the caller converts it with Spark) or writes and returns exactly
what ``_store._convert`` does: the same counts and times, the same rows in ``records`` and
in each partial (read back by Spark with their schemas, compared as multisets, doubles to
the bit).  Journals of the real writer are never declined; hand-written odd and hostile
lines, and lines a grammar makes and mutates, are declined or converted alike."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

from raetlike.durable._api import DurableMessageReceived
from raetlike.journal import Endpoint, JournalRecord, JournalWriter, RecordKind
from raetlike.journal._record import encode_fields
from raetlike.pipeline._arrow import convert_unit
from raetlike.pipeline._frames import JOURNAL_SCHEMA, KINDS
from raetlike.pipeline._partials import PARTIAL_SCHEMAS
from raetlike.pipeline._session import inheriting
from raetlike.pipeline._store import CONVERTERS, DONE, RECORDS, _convert
from road.events import MessageReceived
from tests.journalkit import HOUR_START, record
from tests.sparkkit import spark  # noqa: F401 - the session fixture

H = HOUR_START
HOUR = Path("date=2026-01-01") / "hour=10"
SCHEMAS = {RECORDS: JOURNAL_SCHEMA, **PARTIAL_SCHEMAS}

# -- the harness: convert units both ways, read both back with Spark, compare --------------


@dataclass(frozen=True, slots=True)
class _Unit:
    """A unit to convert both ways."""

    case: str
    """Its name in failures (and in its output directories' names)."""
    hour: str
    """The hour directory."""
    names: list[str]
    """The segment files of it the unit is made of."""
    out: Path
    """Where both converters write: ``CASE.arrow`` and ``CASE.spark`` in it."""

    @property
    def arrow(self) -> Path:
        return self.out / f"{self.case}.arrow"

    @property
    def spark(self) -> Path:
        return self.out / f"{self.case}.spark"


def _unit(root: Path, case: str, *files: bytes, names: tuple[str, ...] = ()) -> _Unit:
    """A unit of ``files`` (each a segment, named by ``names`` or as the writer names them)
    in a fresh hour directory under ``root``, beside a segment the unit does not name (both
    converters must leave it out)."""
    hour = root / case / HOUR
    hour.mkdir(parents=True)
    names = names or tuple(f"main.20260101T100000000000.1.{index + 1}.jsonl"
                           for index in range(len(files)))
    for name, data in zip(names, files, strict=True):
        (hour / name).write_bytes(data)
    (hour / "main.20260101T100000000000.1.99.jsonl").write_bytes(_raw(node='"decoy"'))
    return _Unit(case, str(hour), list(names), root / "out")


def _exact(value: Any) -> Any:
    """``value`` with each double as the text of its bits (every NaN one value; -0.0 is not
    0.0), so rows compare exactly and sort."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value.hex()
    if isinstance(value, tuple | list):
        return tuple(_exact(item) for item in value)
    return value


def _typed(made: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """A converter's returned dict, each value with its type (the manifest is JSON: a numpy
    number in it would not serialise)."""
    return {key: (type(value).__name__, _exact(value)) for key, value in made.items()}


def _written(spark: Any, parts: list[Path]) -> dict[tuple[str, str], Counter[Any]]:  # noqa: F811
    """The rows of ``records`` and each partial of the unit directories ``parts``, by
    (directory name, part), each kind read by Spark with its schema in one read."""
    rows: dict[tuple[str, str], Counter[Any]] = {}
    for part in parts:
        assert (part / DONE).read_text() == part.name, part
        for name in SCHEMAS:
            assert (part / name / "_SUCCESS").is_file(), (part, name)
            rows[part.name, name] = Counter()
    for name, schema in SCHEMAS.items():
        frame = spark.read.schema(schema).parquet(*[str(part / name) for part in parts])
        unit = F.regexp_extract(F.col("_metadata.file_path"), f"/([^/]+)/{name}/[^/]+$", 1)
        for row in frame.select("*", unit.alias("_unit")).collect():
            rows[row["_unit"], name][_exact(tuple(row)[:-1])] += 1
    return rows


def _short(rows: Counter[Any]) -> str:
    return f"{rows.total()} e.g. {next(iter(rows), None)!r:.300}"


def _compared(spark: Any,  # noqa: F811
              units: list[_Unit]) -> tuple[dict[str, dict[str, Any] | None], list[str]]:
    """Each unit converted by arrow, then by Spark where arrow did not decline: what arrow
    returned, by case, and how what both returned and wrote differs.  A declined unit has
    no ``_DONE``: nothing arrow left may pass for a whole unit."""
    made = {unit.case: convert_unit(unit.hour, unit.names, str(unit.arrow)) for unit in units}
    differences = [f"{unit.case}: declined, and left {DONE}" for unit in units
                   if made[unit.case] is None and (unit.arrow / DONE).exists()]
    taken = [unit for unit in units if made[unit.case] is not None]
    with ThreadPoolExecutor(max_workers=CONVERTERS) as pool:
        convert = inheriting(spark)(_convert)
        expected = list(pool.map(lambda unit: convert(spark, unit.hour, unit.names, unit.spark),
                                 taken))
    for unit, spark_made in zip(taken, expected, strict=True):
        if _typed(made[unit.case] or {}) != _typed(spark_made):
            differences.append(f"{unit.case}: arrow returned {made[unit.case]}, "
                               f"spark {spark_made}")
    if taken:
        rows = _written(spark, [part for unit in taken for part in (unit.arrow, unit.spark)])
        for unit in taken:
            for name in SCHEMAS:
                arrow, spark_rows = rows[unit.arrow.name, name], rows[unit.spark.name, name]
                if arrow != spark_rows:
                    differences.append(f"{unit.case} {name}: only arrow's "
                                       f"{_short(arrow - spark_rows)}; only spark's "
                                       f"{_short(spark_rows - arrow)}")
    return made, differences


def _convert_both(spark: Any,  # noqa: F811
                  units: list[_Unit]) -> dict[str, dict[str, Any] | None]:
    """:func:`_compared`, asserting no difference."""
    made, differences = _compared(spark, units)
    assert not differences, "\n".join(differences)
    return made


# -- lines ---------------------------------------------------------------------------------

_BASE = {"version": "1", "node": '"main"', "source_estate": '"minion"', "source_yard": "null",
         "source_share": "null", "destination_estate": '"main"', "destination_yard": '"yard1"',
         "destination_share": "null", "kind": '"message"', "topic": '"ping"',
         "transaction_id": "2", "request_id": "null", "sequence": "1", "body_bytes": "100",
         "segments": "1", "resends": "0", "sent": repr(H + 0.99), "received": repr(H + 1.0),
         "session_id": "7"}
"""A valid record's members as the writer orders them, each value as JSON text."""


def _raw(*extra: str, drop: tuple[str, ...] = (), **fields: str) -> bytes:
    """A line of :data:`_BASE`'s members, ``fields`` (JSON texts) in place of theirs, those
    in ``drop`` left out, the members ``extra`` (``'"key":value'`` texts) after them."""
    members = [f'"{key}":{value}' for key, value in {**_BASE, **fields}.items()
               if key not in drop]
    return ("{" + ",".join([*members, *extra]) + "}\n").encode("utf-8", "surrogatepass")


def _numbered(*numbers: int, start: float = H + 1.0, **fields: str) -> bytes:
    """Lines delivering ``numbers`` in order, a millisecond apart."""
    return b"".join(_raw(sequence=str(n), received=repr(start + index / 1000),
                         sent=repr(start + index / 1000 - 0.002), **fields)
                    for index, n in enumerate(numbers))


def _edge_times(count: int, after: float = H, every: int = 10_000) -> list[float]:
    """Receive times after ``after`` just below a window's edge (every ``every`` µs) whose
    microseconds, computed as Spark does (``received * 1e6`` in a double, truncated), reach
    the edge: the exact value's floor is a microsecond less, in the window before."""
    found: list[float] = []
    edge = math.ceil(after * 10**6 / every) * every
    while len(found) < count:
        edge += every
        below = float(Fraction(edge, 10**6))
        while Fraction(below) * 10**6 >= edge:
            below = math.nextafter(below, 0.0)
        if int(below * 1e6) == edge:
            found.append(below)
    return found


GOOD = _raw()
DECLINES, SAME, EITHER = "declines", "same", "either"


# -- journals of the real writer: never declined, converted alike --------------------------

_BLOCKS = (1, 2, 32_767, 32_768, 32_769, 65_536, 65_537, 0, -1, -32_767, -32_768, -32_769,
           -65_536, 1 << 62, -(1 << 62), 100_000)
"""Sequence numbers in several 32,768-number bitmap blocks, on and by their edges."""


def _records(start: float) -> list[JournalRecord]:
    """Every sort of record the writer journals, received from ``start`` on."""
    yards = JournalRecord(
        node="main", source=Endpoint("mïnion", "yard0", "share0"),
        destination=Endpoint("main", "yard1", "sharé"), kind=RecordKind.REQUEST,
        topic="tópico 漢字 😀", transaction_id=(1 << 63) - 1, request_id=12, sequence=3,
        body_bytes=1 << 32, segments=9, resends=4, sent=start, received=start + 0.25,
        session_id=(1 << 63) - 1)
    made = [yards, record(None, received=start + 0.3, sent=None, topic=None)]
    made += [record(n, kind=kind, received=start + 0.31 + index / 100, topic="",
                    segments=1 + index, resends=index % 2)
             for index, (n, kind) in enumerate(zip((4, 5, 6, 7, 8, 9), RecordKind, strict=True))]
    latencies = (start + 0.5, 0.0, -1e308, 1e300, 1e-300, start + 0.4 - 1e-7, start - 7200)
    made += [record(20 + index, source="timer", received=start + 0.4, sent=sent)
             for index, sent in enumerate(latencies)]  # negative, huge, overflowing, none
    made += [record(n, source="again", received=start + 0.5 + index / 1000)
             for index, n in enumerate((1, 2, 3, 3, 5, 4, 2, 6, 6, 1))]  # duplicates, late
    made += [record(n, source="blocks", received=start + 0.6 + index / 1000)
             for index, n in enumerate(_BLOCKS)]
    made += [record(n, node="main", source="relayed", received=start + 0.7 + n / 1000)
             for n in (2, 1)]  # numbered deliveries journaled where they were addressed ...
    made += [JournalRecord(  # ... and a relaying manor's copies, not at their destination
        node="main", source=Endpoint("relayed"), destination=Endpoint("other"),
        kind=RecordKind.MESSAGE, topic="ping", transaction_id=n, request_id=None,
        sequence=n, body_bytes=1, segments=1, resends=0, sent=None,
        received=start + 0.72 + n / 1000, session_id=1) for n in (4, 3)]
    made += [record(n, source="edges", received=at, sent=at - 0.001)
             for n, at in enumerate(_edge_times(3, start, 100_000), start=1)]
    late = start + 0.8
    made += [record((1 << 62) + 1, source="skipped", received=late),
             record(1, source="skipped", segments=-1, received=late),
             record(1, source="skipped", body_bytes=(1 << 32) + 1, received=late),
             record(1, source="skipped", topic="t" * 1025, received=late),
             record(1, source="kept", topic="😀" * 1024, received=late)]
    return made


def _deliveries(writer: JournalWriter, start: float) -> None:
    """The writer's own lines for deliveries: raw bytes, JSON bodies with routes, kinds,
    numbers and send times, a durable one (with members the schema does not name), a
    topic with a lone surrogate (written as U+FFFD)."""
    writer.record_delivery("main", MessageReceived("peer", b"raw", 1, 7, 1), start)
    writer.record_delivery("main", MessageReceived("peer", b"raw", 1, 8, 2), start + 0.001,
                           resends=3)
    route = {"src": ["ëstate", "yard", "share"], "dst": ["main", "yard1", None]}
    bodies: list[dict[str, Any]] = [
        {"_seq": 7, "_sent": start - 0.5, "_topic": "load", "route": route},
        {"_seq": 6, "_sent": start + 1.0, "_kind": "survey", "_topic": "who", "route": route},
        {"bus": {"ty": "event", "to": "tick", "pl": {"_sent": start}}, "_seq": 1},
        {"_topic": "a\ud800b", "_seq": 1 << 70, "_sent": "not a time", "n": [1 << 70]},
        {"_seq": -5, "_id": 77, "_kind": "survey_response", "_sent": 1e300}]
    for index, body in enumerate(bodies):
        writer.record_delivery("main", MessageReceived("peer", body, 2, 10 + index, 1),
                               start + 0.01 * (index + 1))
    writer.record_durable("main", DurableMessageReceived("peer", {"_seq": 8}, 3, 20, 1, 5, 42),
                          start + 0.1, store=5, durable_seq=42)


def _journal(directory: Path, starts: tuple[float, ...]) -> list[Path]:
    """A journal of :func:`_records` and :func:`_deliveries` from each of ``starts``, in
    small segments; its sealed segment files."""
    with JournalWriter(directory, "main", max_bytes=4_000, clock=lambda: H) as writer:
        for start in starts:
            for made in _records(start):
                writer.append(made)
            _deliveries(writer, start)
    return sorted(directory.rglob("*.jsonl"))


def test_the_real_writers_journals_are_converted_alike(tmp_path: Path,
                                                        spark: Any) -> None:  # noqa: F811
    """Units: one spanning under a second, one of two hours' segments moved into one hour
    directory (a span over an hour: a wider fine step), one with a record without a
    destination estate (the writer's own encoder), one of text that looks like JSON's
    tokens, one of segments with odd names."""
    short = _journal(tmp_path / "short", (H + 5.0,))
    long = _journal(tmp_path / "long", (H + 5.0, H + 3600 + 1800, H + 7000))
    assert len({path.parent for path in long}) == 2
    units = []
    for case, files in (("short", short), ("long", long)):
        units.append(_unit(tmp_path / "units", case, *[path.read_bytes() for path in files]))
    nowhere = encode_fields({**json.loads(GOOD), "destination_estate": None, "sequence": 5})
    units.append(_unit(tmp_path / "units", "nowhere", b"".join(
        path.read_bytes() for path in short) + nowhere))
    with JournalWriter(tmp_path / "tokens", "main", clock=lambda: H) as writer:
        writer.append(record(2, topic="log:Info,NaN"))  # text like JSON's tokens
        writer.append(record(3, topic="[NaN]"))
        writer.append(dataclasses.replace(record(4), destination=Endpoint("main", "[Infra]",
                                                                           "-Inf")))
    [tokens] = (tmp_path / "tokens").rglob("*.jsonl")
    units.append(_unit(tmp_path / "units", "tokens", tokens.read_bytes()))
    odd = ("main 1.jsonl", "m%20ä#1.jsonl", "a+b=c;d.jsonl", "ü.jsonl.open", "x[1]{a,b}*?.jsonl")
    units.append(_unit(tmp_path / "units", "names", *[path.read_bytes() for path in short[:5]],
                       names=odd))  # names Hadoop encodes in the paths Spark filters by
    assert len(units[0].names) > 2
    made = _convert_both(spark, units)
    declined = [case for case, result in made.items() if result is None]
    spans = {case: (result["last"] - result["first"], result["step"], result["skipped"])
             for case, result in made.items() if result is not None}
    assert {"short", "long"} <= set(spans), declined
    assert spans["short"][0] < 1, spans
    assert spans["long"][0] > 3600, spans
    assert (spans["short"][1:], spans["long"][1:]) == ((0.01, 4), (60.0, 12)), spans
    assert not declined, declined


# -- hand-written lines, each case a unit of its own ---------------------------------------

def _reordered() -> bytes:
    return ("{" + ",".join(f'"{key}":{value}' for key, value in reversed(_BASE.items()))
            + "}\n").encode()


def _text(length: int, char: str = "t") -> str:
    return json.dumps(char * length, ensure_ascii=False)


_ODD: list[tuple[str, str, bytes]] = [
    # torn, doubled or broken lines: pyarrow cannot read them as Spark does
    ("torn-last-line", DECLINES, GOOD + _raw()[:60]),
    ("torn-middle-line", DECLINES, GOOD + _raw()[:60] + b"\n" + GOOD),
    ("two-objects-on-a-line", DECLINES, GOOD[:-1] + b" " + _raw(node='"other"')),
    ("garbage-after-the-object", DECLINES, GOOD[:-1] + b" x\n"),
    # as many objects as lines, but not one a line: an object across two lines (pyarrow takes a
    # newline for a space; to Spark its first line is torn), two on another line
    ("an-object-across-lines", DECLINES, GOOD[:-2] + b',"x":\n{"y":1}}\n{} {}\n'),
    ("an-object-across-lines-and-a-record", DECLINES,
     GOOD[:-2] + b',"x":\n{"y":1}}\n' + GOOD[:-1] + b" {}\n"),
    ("duplicate-key", DECLINES, _raw('"node":"other"')),
    ("string-for-a-long", DECLINES, GOOD + _raw(sequence='"5"')),
    ("number-for-a-string", DECLINES, GOOD + _raw(topic="5")),
    ("object-for-a-string", DECLINES, GOOD + _raw(topic='{"a":[1]}')),
    ("float-for-a-long", DECLINES, GOOD + _raw(sequence="1.0")),
    ("boolean-for-a-long", DECLINES, GOOD + _raw(version="true")),
    ("long-past-64-bits", DECLINES, GOOD + _raw(transaction_id="9223372036854775808")),
    ("double-past-its-range", DECLINES, GOOD + _raw(sent="1e400")),
    ("lone-surrogate-escaped", DECLINES, GOOD + _raw(topic='"a\\ud800b"')),
    ("invalid-utf8", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"p\xffng"')),
    ("surrogate-in-utf8", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"p\xed\xa0\x80g"')),
    ("overlong-utf8", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"p\xc0\xafg"')),
    ("utf8-past-u10ffff", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"p\xf4\x90\x80\x80g"')),
    ("utf8-cut-short", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"p\xc3"')),
    ("raw-control-character", DECLINES, GOOD + GOOD.replace(b'"ping"', b'"pi\tng"')),
    ("single-quotes", DECLINES, GOOD + GOOD.replace(b'"', b"'")),
    ("top-level-array", DECLINES, b"[" + GOOD[:-1] + b"," + GOOD[:-1] + b"]\n"),
    ("not-an-object", DECLINES, b"5\n" + GOOD),
    ("trailing-comma", DECLINES, GOOD[:-2] + b",}\n"),
    # odd but legal JSON that pyarrow reads exactly: converted, alike (a few units of many
    # such lines: each unit costs Spark jobs)
    ("legal-spellings", SAME, b"".join([
        _raw('"no\\u0064e":"main"', drop=("node",)),  # an escaped key
        _reordered(),  # keys in another order
        _raw('"extra":{"a":[1,{"b":null}],"c":"d"}', '"more":[[]]'),  # nested unknown members
        _raw(received="1767264239"),  # an integer for a double
        _raw('"extra":1'), _raw('"extra":"x"'), _raw('"extra":{"a":[1,2]}'),  # an unknown
        _raw('"extra":null'), _raw('"extra":[true]'),  # member of changing type
        _raw(topic='"a\\/b\\u0000c\\ud83d\\ude00\\n\\"\\\\"'),  # escapes, a pair
        _raw(node='"m\\u00e4in"', destination_estate='"m\\u00e4in"'),
        _raw(received="1.767264239e9", sent="17672642385E-1"),  # numbers written otherwise
        _raw(sent="4.9e-324"), _raw(sent="2.2250738585072011e-308"),  # denormals
        _raw(sent="1767264238.12345678901234567890"),  # more digits than a double holds
        _raw(sent="1e-400"), _raw(sent="1.7976931348623157e308"),
        _raw(sent="1e05"), _raw(sent="1e-99999999999"),  # an exponent's zeros, its digits
        _raw('"node\\u0000":"x"', drop=("node",)),  # not the node: a NUL in the key
        _raw('"_corrupt_record":"x"'),  # a member named as Spark's column of torn lines
        GOOD.replace(b'"ping"', b'"p\x7f\xef\xbf\xbeg"'),  # DEL and U+FFFE as they are
        _raw(topic='"none"', body_bytes="null", segments="null", resends="null")])),
    ("only-skipped-lines", SAME, b"{}\n{ }\n" + _raw(version="2")),
    ("skipped-records", SAME, b"".join([
        _raw(topic="null", sequence="null", sent="null", destination_estate="null",
             source_yard="null"),
        _raw(drop=("node",)), _raw(drop=("received",)),
        _raw(drop=("sequence", "sent", "kind", "topic", "destination_estate")),
        _raw(version="2"), _raw(kind='"MESSAGE"'), _raw(kind='"gossip"'),
        _raw(topic=_text(1025)), _raw(topic=_text(1024, "😀")),
        _raw(source_estate=_text(1025, "é")),
        _raw(body_bytes="-1"), _raw(resends="-1"),
        _raw(body_bytes="4294967296", segments="4294967297"),
        _raw(sequence="4611686018427387904"), _raw(sequence="-4611686018427387905"),
        _raw(received="100000000000"), _raw(received="0"), _raw(received="99999999999.99998"),
        _raw(received="-1e-300"),
        _raw(source_yard='""', sequence="2"), _raw(source_share='"s"', sequence="1"),
        _raw(source_yard='"s"', sequence="0"), _raw(destination_estate='"relay"'),
        _raw(source_yard='"s"', sequence="9", received=repr(H + 0.5)),  # late: the parts
        _raw(source_share='"s"', sequence="8")])),  # join to one source
    ("window-edges", SAME, b"".join(_raw(sequence=str(n), received=repr(at), sent=repr(at - 1))
                                     for n, at in enumerate(_edge_times(4), start=1))),
    # what Spark's reader does differently, where pyarrow reads something: declined or alike
    ("keys-differing-in-case", EITHER, _raw('"Node":"main"', drop=("node",)) + GOOD),
    ("blank-lines", EITHER, GOOD + b"\n" + GOOD + b"   \n\n"),
    ("crlf", EITHER, (GOOD + GOOD).replace(b"\n", b"\r\n")),
    ("lone-cr", EITHER, GOOD[:-1] + b"\r" + GOOD),
    ("bom", EITHER, b"\xef\xbb\xbf" + GOOD + GOOD),
    ("no-final-newline", EITHER, GOOD + GOOD[:-1]),
    ("empty-file", EITHER, b""),
    ("nan-and-infinity", EITHER, _raw(sent="NaN") + _raw(received="Infinity")
     + _raw(sent="-Infinity") + GOOD),
    ("inf", EITHER, _raw(sent="Inf") + GOOD),
    ("minus-inf", EITHER, _raw(sent="-Inf") + GOOD),
    ("minus-nan", EITHER, _raw(sent="-NaN") + GOOD),
    ("plus-inf", EITHER, _raw(sent="+INF") + GOOD),
    ("minus-zero-double", EITHER, _raw(sent="-0") + GOOD),
    ("minus-zero-received", EITHER, _raw(received="-0") + GOOD),
    ("minus-zero-spelled-otherwise", EITHER, _raw(sent="-0.0") + _raw(sent="-1e-400") + GOOD),
    ("signed-zero-receive-times", EITHER, _raw(received="0.0", sent="0.0", sequence="5")
     + _raw(received="-0.0", sent="0.0", sequence="3")),
    ("minus-zero-long", EITHER, _raw(sequence="-0") + GOOD),
    ("integer-past-64-bits-as-double", EITHER, _raw(received="17672642390000000000000") + GOOD),
    ("number-of-1001-digits", EITHER, _raw('"extra":' + "1" * 1001) + GOOD),
    ("double-of-1100-digits", EITHER, _raw(sent="1767264238." + "1" * 1100) + GOOD),
    ("nesting-1000-deep", EITHER, _raw('"extra":' + "[" * 999 + "]" * 999) + GOOD),
    ("nesting-1001-deep", EITHER, _raw('"extra":' + "[" * 1000 + "]" * 1000) + GOOD),
    ("key-of-50001-characters", EITHER, _raw(f'"{"k" * 50_001}":1') + GOOD),
    ("inf-in-an-unknown-member", EITHER, _raw('"extra":Inf') + GOOD),
    ("minus-nan-in-an-unknown-member", EITHER, _raw('"extra":-NaN') + GOOD),
    ("nan-in-an-unknown-member", EITHER, _raw('"extra":NaN', '"more":-Infinity') + GOOD),
    ("invalid-utf8-in-an-unknown-member", EITHER, GOOD + _raw('"extra":"\xff"').replace(
        b"\\xff", b"\xff")),
    ("invalid-utf8-in-a-key", EITHER, GOOD + _raw('"x":1').replace(b'"x"', b'"\xff"')),
    ("utf8-cut-short-in-an-unknown-member", EITHER,
     GOOD + _raw('"extra":"x"').replace(b'"x"', b'"\xc3"')),
    ("duplicate-unknown-member", EITHER, _raw('"extra":1', '"extra":"x"') + GOOD),
    ("nul-after-the-object", EITHER, GOOD + GOOD[:-1] + b"\x00\n"),
    ("utf16-line", EITHER, GOOD + GOOD[:-1].decode().encode("utf-16-le") + b"\n"),
]
"""(case, what arrow must do, the unit's one segment): ``SAME``, convert it as Spark does;
``DECLINES``, decline it; ``EITHER``, one or the other."""


def test_odd_and_hostile_lines_are_declined_or_converted_alike(tmp_path: Path,
                                                               spark: Any) -> None:  # noqa: F811
    units = [_unit(tmp_path, f"{index:02d}-{case}", data)
             for index, (case, _, data) in enumerate(_ODD)]
    made, differences = _compared(spark, units)
    differences += [f"{unit.case}: not {expected}" for (_, expected, _), unit
                    in zip(_ODD, units, strict=True)
                    if expected != EITHER and (made[unit.case] is None) != (expected == DECLINES)]
    assert not differences, "\n".join(differences)


# -- lines from a grammar: valid records, mutated --------------------------------------------

def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return repr(value) if math.isfinite(value) else "-Infinity" if value < 0 else "Infinity"


def _quoted(texts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Strings as JSON, escaped (a lone surrogate as ``\\ud800``) or as they are (one as
    the bytes UTF-8 would give it, which is not UTF-8)."""
    return st.one_of(texts.map(json.dumps), texts.map(lambda text: json.dumps(
        text, ensure_ascii=False)))


_NAMES = _quoted(st.sampled_from(["main", "relay", "é", "", "Main", "😀"]))
_OPTIONAL = st.one_of(st.just("null"), _NAMES)
_TIMES = st.one_of(st.floats(H, H + 0.05), st.floats(H, H + 3600)).map(repr)
_ANY = st.one_of(
    st.integers(-(1 << 65), 1 << 65).map(str), st.floats().map(_number),
    _quoted(st.text(max_size=6)),
    st.sampled_from(["null", "true", "false", "[]", "{}", '{"a":[1,{"b":null}]}', "-0", "1e400",
                     "Inf", "-NaN", "01", "1.", '"\\u0000"', '"\\ud800"', "0" * 1001]))
"""A JSON value of any type, and some no reader agrees on."""
_VALID = st.fixed_dictionaries({
    "version": st.just("1"), "node": _NAMES, "source_estate": _NAMES, "source_yard": _OPTIONAL,
    "source_share": _OPTIONAL, "destination_estate": _OPTIONAL,
    "destination_yard": _OPTIONAL, "destination_share": _OPTIONAL,
    "kind": st.sampled_from(KINDS).map(json.dumps), "topic": _OPTIONAL,
    "transaction_id": st.integers(0, 1 << 63).map(str),
    "request_id": st.one_of(st.just("null"), st.integers(-5, 5).map(str)),
    "sequence": st.one_of(st.just("null"), st.integers(0, 6).map(str),
                          st.integers(-40_000, 70_000).map(str)),
    "body_bytes": st.integers(0, 10).map(str), "segments": st.integers(0, 3).map(str),
    "resends": st.integers(0, 2).map(str), "sent": st.one_of(st.just("null"), _TIMES),
    "received": _TIMES, "session_id": st.integers(0, 9).map(str)})
_KEYS = st.one_of(st.sampled_from(['"extra"', '"Node"', '"node"', '"no\\u0064e"', '"sent"']),
                  _quoted(st.text(max_size=4)))
_JUNK = st.one_of(st.sampled_from([b"\n", b"\r", b" ", b"\x00", b"\xff", b"\xef\xbb\xbf", b"{",
                                   b"}", b",", b'"', b"\\", b"\xc3", b"\xed\xa0\x80"]),
                  st.binary(min_size=1, max_size=3))


@st.composite
def _line(draw: st.DrawFn, *, changed: bool) -> bytes:
    """A valid record's line, reordered; ``changed``, often changed more: members given values
    of any type, dropped, added (unknown or known again), the line cut or given junk."""
    members = draw(_VALID)
    pairs = [(json.dumps(key), value) for key, value in members.items()]
    if changed:
        for index in draw(st.lists(st.integers(0, len(pairs) - 1), max_size=2)):
            pairs[index] = (pairs[index][0], draw(_ANY))
        dropped = draw(st.sets(st.sampled_from(sorted(members)), max_size=1))
        pairs = [(key, value) for key, value in pairs if json.loads(key) not in dropped]
        pairs += draw(st.lists(st.tuples(_KEYS, _ANY), max_size=2))
    text = "{" + ",".join(f"{key}:{value}" for key, value in draw(st.permutations(pairs))) + "}"
    data = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none"] * 6 + ["cut", "junk"])) if changed else "none"
    at = draw(st.integers(0, len(data) - 1))
    if damage == "cut":
        return data[:at]
    return data[:at] + draw(_JUNK) + data[at:] if damage == "junk" else data


_SEGMENTS = st.builds(lambda lines, end: b"\n".join(lines) + end,
                      st.one_of(st.lists(_line(changed=False), min_size=1, max_size=12),
                                st.lists(_line(changed=True), min_size=1, max_size=5)),
                      st.sampled_from([b"\n"] * 4 + [b"", b"\r\n", b"\n\n"]))
"""A segment: valid records only (numbers, times and names from small sets, so that they
share windows, streams and numbers), or lines of which most are changed."""


@settings(max_examples=8, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate))  # no shrinking: each example costs Spark jobs
@given(segments=st.lists(_SEGMENTS, min_size=3, max_size=3))
def test_lines_of_a_grammar_are_declined_or_converted_alike(
        tmp_path_factory: pytest.TempPathFactory, spark: Any,  # noqa: F811
        segments: list[bytes]) -> None:
    root = tmp_path_factory.mktemp("grammar")
    _convert_both(spark, [_unit(root, f"unit{index}", data)
                          for index, data in enumerate(segments)])


def test_a_unit_past_its_lines_or_a_file_longer_than_its_length_is_declined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory grows with lines as well as bytes (``MOST_LINES``), and a file is read by
    its length as Spark's reader reads it: a link to a /proc file (length 0, text in it)
    is declined, not read as lines Spark never sees, and a FIFO is declined at once (an
    open that waited for a writer would hang the run)."""
    from raetlike.pipeline import _arrow  # noqa: PLC0415 - its bound, patched

    ten = _unit(tmp_path / "units", "ten", GOOD * 10)
    monkeypatch.setattr(_arrow, "MOST_LINES", 10)
    made = convert_unit(ten.hour, list(ten.names), str(tmp_path / "ten"))
    assert made is not None
    assert made["records"] == 10
    eleven = _unit(tmp_path / "units", "eleven", GOOD * 6, GOOD * 5)  # the bound spans files
    assert convert_unit(eleven.hour, list(eleven.names), str(tmp_path / "eleven")) is None
    assert not (tmp_path / "eleven").exists()
    proc = _unit(tmp_path / "units", "proc", GOOD)
    link = Path(proc.hour) / "main.9.jsonl"
    link.symlink_to("/proc/self/comm")  # stat says 0 bytes; reading gives the name
    assert link.stat().st_size == 0
    assert link.read_bytes()
    assert convert_unit(proc.hour, [*proc.names, link.name], str(tmp_path / "proc")) is None
    fifo = Path(proc.hour) / "main.10.jsonl"  # put in a segment's place after the listing
    os.mkfifo(fifo)
    assert convert_unit(proc.hour, [*proc.names, fifo.name], str(tmp_path / "fifo")) is None
