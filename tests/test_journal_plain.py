"""The journal's raw-bytes hot path, compiled and pure Python, writes delivery_line's bytes.

``PlainLines`` appends a raw-bytes delivery's line to a batch without making a
record; the compiled path (``raetlike/journal/_cjournal.c``) writes the numbers
itself, the float with its own shortest-round-trip digits.  Both must give
exactly the bytes of the general path, for any names and numbers, and refuse
(append nothing) where they cannot.
"""

from __future__ import annotations

import math
import os
import random
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.journal import JournalWriter, partition_of, read_journal
from raetlike.journal import _delivery as delivery_module
from raetlike.journal._delivery import COMPILED, PlainLines, delivery_line
from road.events import MessageReceived

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


def _line(compiled: bool, node: str, event: object, received: float, resends: int) -> bytes:
    batch = bytearray(b"before\n")
    size = PlainLines(compiled=compiled).append(batch, node, event,  # type: ignore[arg-type]
                                               received, resends)
    assert len(batch) == 7 + size
    assert batch[:7] == b"before\n"
    return bytes(batch[7:])


def test_the_compiled_path_is_built_here() -> None:
    """The install builds _cjournal.c with the machine's compiler; a failed build must not
    pass unnoticed (set RAETLIKE_PURE_PYTHON=1 to run on the pure path on purpose)."""
    if os.environ.get("RAETLIKE_PURE_PYTHON"):
        assert not COMPILED
    else:
        assert COMPILED


_NAMES = st.text(min_size=1, max_size=12)
_INTS = st.integers(min_value=-(2**70), max_value=2**70)
_COUNTS = st.one_of(st.integers(min_value=0, max_value=2**64 + 5), _INTS)


def _bits_to_float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


_TIMES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1.0, max_value=2.0**53),
    st.floats(min_value=1.5e9, max_value=2.5e9),  # wall clocks, the usual case
    st.integers(min_value=0, max_value=2**64 - 1).map(_bits_to_float),
    st.integers(min_value=0, max_value=60).map(lambda n: 2.0**n),  # lopsided intervals
    st.integers(min_value=1, max_value=10**9).map(lambda n: n + 0.5),  # ties
)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**400), max_value=10**400),
                    st.integers(min_value=-(2**64), max_value=2**64), st.floats(),
                    st.text(max_size=8))
_BODIES = st.one_of(
    st.binary(max_size=40),
    st.dictionaries(st.sampled_from(["_seq", "_sent", "_topic", "_id", "pad", "route", "_kind",
                                     "bus", "sp"]), _VALUES, max_size=5),
)


@settings(max_examples=600)
@pytest.mark.parametrize("compiled", PATHS)
@given(node=_NAMES, remote=_NAMES, body=_BODIES, received=_TIMES,
       resends=_COUNTS, transaction_id=_COUNTS, segments=_COUNTS, session_id=_COUNTS)
def test_a_plain_line_is_byte_for_byte_the_general_one(
        compiled: bool, *, node: str, remote: str, body: object, received: float, resends: int,
        transaction_id: int, segments: int, session_id: int) -> None:
    event = MessageReceived(remote=remote, body=body, session_id=session_id,
                            transaction_id=transaction_id, segments=segments)
    try:
        expected = delivery_line(node, event, received, resends=resends)
    except UnicodeEncodeError:
        return  # a name no journal line can hold (a lone surrogate): not the hot path's
    line = _line(compiled, node, event, received, resends)
    assert line in (b"", expected)
    plain = isinstance(body, bytes) or not {"route", "_kind", "bus", "sp"} & set(body)
    if plain and not (compiled and isinstance(body, bytes)):
        assert line == expected  # the pure path takes every plain body


def test_the_compiled_float_digits_are_repr_s_over_many_wall_clock_times() -> None:
    """A quarter of a million times as the journal sees them, and their neighbours."""
    if not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    rng = random.Random(20261126)
    event = MessageReceived(remote="minion", body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    plain = PlainLines(compiled=True)
    now = time.time()
    for _ in range(250_000):
        value = rng.choice((now + rng.uniform(-1e8, 1e8), rng.uniform(1, 1e15),
                            round(rng.uniform(1, 1e9), rng.randint(0, 9))))
        value = rng.choice((value, math.nextafter(value, math.inf),
                            math.nextafter(value, -math.inf)))
        batch = bytearray()
        assert plain.append(batch, "main", event, value, 0)
        assert bytes(batch) == delivery_line("main", event, value), value


class _Hostile:
    """A delivery whose fields are anything but what a road event holds."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


@pytest.mark.parametrize("compiled", PATHS)
@pytest.mark.parametrize("fields", [
    {"remote": "m", "body": b"x", "session_id": True, "transaction_id": 1, "segments": 1},
    {"remote": "m", "body": b"x", "session_id": 1, "transaction_id": 1.5, "segments": 1},
    {"remote": "m", "body": b"x", "session_id": 1, "transaction_id": 2**64, "segments": 1},
    {"remote": "m", "body": b"x", "session_id": 1, "transaction_id": 1},
    {"remote": "m", "body": bytearray(b"x"), "session_id": 1, "transaction_id": 1,
     "segments": 1},
], ids=["bool", "float", "past-64-bits", "missing", "bytearray"])
def test_odd_deliveries_are_left_to_the_general_path_or_written_exactly(
        compiled: bool, fields: dict[str, Any]) -> None:
    event = _Hostile(**fields)
    batch = bytearray()
    try:
        size = PlainLines(compiled=compiled).append(batch, "main", event,  # type: ignore[arg-type]
                                                    1.7e9, 0)
    except RuntimeError:  # a field it lacks: as the general path reads it, so it fails
        assert batch == b""
        with pytest.raises(RuntimeError):
            delivery_line("main", event, 1.7e9)  # type: ignore[arg-type]
        return
    if size:
        assert bytes(batch) == delivery_line("main", event, 1.7e9)  # type: ignore[arg-type]
    else:
        assert batch == b""


def test_names_too_long_to_keep_take_the_general_path() -> None:
    event = MessageReceived(remote="r" * 4000, body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    assert PlainLines().append(bytearray(), "main", event, 1.7e9, 0) == 0


def test_a_plain_lines_keeps_at_most_its_bound_of_names() -> None:
    plain = PlainLines()
    for n in range(PlainLines.MOST * 3):
        event = MessageReceived(remote=f"minion{n}", body=b"x", session_id=1,
                                transaction_id=n, segments=1)
        plain.append(bytearray(), "main", event, 1.7e9, 0)
        assert len(plain._kept) <= PlainLines.MOST
        assert sum(map(len, plain._prefixes.values())) <= PlainLines.MOST


@pytest.mark.parametrize("compiled", PATHS)
def test_a_writer_on_either_path_writes_what_reads_back(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    writer = JournalWriter(tmp_path, "main", flush_bytes=4096, max_bytes=64 * 1024)
    start = 1_767_261_600.0
    for n in range(2_000):
        body: object = b"x" * (n % 50) if n % 3 else {"_seq": n, "pad": "y"}
        event = MessageReceived(remote=f"minion{n % 4}", body=body, session_id=7,
                                transaction_id=n, segments=1 + n % 2)
        writer.record_delivery("main", event, start + n * 0.37)
        if n % 100 == 0:
            writer.tick(start + n * 0.37)
    assert writer.records_written == 2_000
    writer.close()
    contents = read_journal([tmp_path])
    assert contents.skipped == []
    assert [r.transaction_id for r in sorted(contents.records, key=lambda r: r.received)] \
        == list(range(2_000))
    assert len(writer.segments_sealed) > 1  # 64 KiB segments: rotated by size
    for path in writer.segments_sealed:
        assert path.stat().st_size <= 64 * 1024


def _writer(tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch,
            **options: Any) -> JournalWriter:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    elif not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    writer = JournalWriter(tmp_path, "main", **options)
    assert (type(writer._batch).__name__ == "Batch") is compiled  # the path under test
    return writer


_ROUND_TIMES = st.one_of(  # what a writer takes: times whose hour has a date (years 1-9999)
    st.floats(min_value=1.5e9, max_value=2.5e9),  # wall clocks, the usual case
    st.floats(min_value=-6e10, max_value=2.5e11),
    st.floats(min_value=0.0, max_value=1.0),  # below 1: the digits left to repr's code
    st.integers(min_value=0, max_value=37).map(lambda n: 2.0**n),  # lopsided intervals
    st.integers(min_value=1, max_value=10**9).map(lambda n: n + 0.5),  # ties
)


@settings(max_examples=150, deadline=None)
@pytest.mark.parametrize("compiled", PATHS)
@given(rounds=st.lists(st.tuples(
    _ROUND_TIMES,
    st.lists(st.tuples(st.sampled_from(["minion0", "minion1", "\u00e9t\u00e9", 'q"\\']),
                       st.one_of(st.binary(max_size=30), _BODIES), _COUNTS, _COUNTS),
             min_size=1, max_size=8)), min_size=1, max_size=6))
def test_a_writer_s_file_is_byte_for_byte_the_general_lines(
        tmp_path_factory: pytest.TempPathFactory, compiled: bool,
        rounds: list[tuple[float, list[tuple[str, object, int, int]]]]) -> None:
    """The batch a writer journals into (compiled: the C batch that is record_delivery
    itself, keeping the last pair's prefix and the last time's digits; pure: the Python
    one) writes exactly delivery_line's bytes, round after round of one time each."""
    directory = tmp_path_factory.mktemp("journal")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _write_rounds(_writer(directory, compiled, monkeypatch), directory, rounds)


def _write_rounds(writer: JournalWriter, directory: Path,
                  rounds: list[tuple[float, list[tuple[str, object, int, int]]]]) -> None:
    expected = []
    for received, deliveries in rounds:
        for n, (remote, body, number, resends) in enumerate(deliveries):
            event = MessageReceived(remote=remote, body=body, session_id=number,
                                    transaction_id=n, segments=1 + n % 3)
            try:
                line = delivery_line("main", event, received, resends=resends)
            except UnicodeEncodeError:
                continue
            if resends:
                writer.record_delivery("main", event, received, resends=resends)
            else:
                writer.record_delivery("main", event, received)
            expected.append((received, line))
        writer.tick()  # the round's write (its age on the writer's clock: no seal)
    writer.close()
    segments: list[tuple[str, bytes]] = []  # a segment for each run of one hour partition
    for received, line in expected:
        partition = partition_of(received)
        if segments and segments[-1][0] == partition:
            segments[-1] = (partition, segments[-1][1] + line)
        else:
            segments.append((partition, line))
    files = sorted(directory.rglob("*.jsonl"), key=lambda path: int(path.name.split(".")[-2]))
    assert [(str(path.parent.relative_to(directory)), path.read_bytes())
            for path in files] == segments


@pytest.mark.parametrize("compiled", PATHS)
def test_record_delivery_takes_the_method_s_arguments_on_either_path(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = _writer(tmp_path, compiled, monkeypatch)
    event = MessageReceived(remote="minion", body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    writer.record_delivery("main", event, 1.7e9)
    writer.record_delivery("main", event, 1.7e9, resends=3)
    writer.record_delivery(node="main", delivery=event, now_wall=1.7e9)  # by name: the method
    with pytest.raises(TypeError):
        writer.record_delivery("main", event)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        writer.record_delivery("main", event, 1.7e9, resend=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        writer.record_delivery("main", event, 1.7e9, 3)  # type: ignore[misc]
    writer.close()
    assert [r.resends for r in read_journal([tmp_path]).records] == [0, 3, 0]


@pytest.mark.parametrize("compiled", PATHS)
def test_a_failed_write_keeps_what_did_not_go_out(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write() that fails (here: a closed file) raises, and the lines stay in the batch;
    none is lost or counted as written."""
    writer = _writer(tmp_path, compiled, monkeypatch)
    event = MessageReceived(remote="minion", body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    for _ in range(3):
        writer.record_delivery("main", event, 1.7e9)
    batch = writer._batch
    waiting = batch.getvalue()
    read, write = os.pipe()
    os.close(read)  # EPIPE on write (SIGPIPE is ignored by Python)
    try:
        with pytest.raises(BrokenPipeError):
            batch.write(write)
    finally:
        os.close(write)
    assert batch.getvalue() == waiting
    assert (batch.records, batch.written, batch.written_records) == (3, 0, 0)
    writer.close()
    assert len(read_journal([tmp_path]).records) == 3


def test_the_compiled_batch_reads_each_delivery_type_s_own_slots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C batch learns where a slotted type keeps the fields and reads them there: for
    types taking turns, and for a type changed after it was learnt (its version tag
    tells), the lines are delivery_line's."""

    @dataclass(slots=True)
    class _Reordered:  # a slotted delivery type, its fields in another order than road's
        segments: int
        session_id: int
        body: Any
        transaction_id: int
        remote: str

    writer = _writer(tmp_path, True, monkeypatch)
    expected = []
    for n in range(40):
        if n == 20:  # now a property over the slot: read by name, as the general path does
            _Reordered.transaction_id = property(  # type: ignore[assignment]
                lambda _self: 7, lambda _self, _value: None)
        event: Any = (
            MessageReceived(remote="a", body=b"x" * n, session_id=n, transaction_id=n,
                            segments=1) if n % 2 else
            _Reordered(segments=2, session_id=-n, body=b"y", transaction_id=n, remote="b"))
        writer.record_delivery("main", event, 1.7e9)
        expected.append(delivery_line("main", event, 1.7e9))
    writer.close()
    assert b"".join(path.read_bytes() for path in tmp_path.rglob("*.jsonl")) == b"".join(expected)
    assert b'"transaction_id":7,' in expected[20]


@pytest.mark.parametrize("compiled", PATHS)
def test_names_whose_escapes_make_a_long_line_do_not_pass_max_bytes(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control characters take six bytes each in JSON: names within the kept bound can make
    a line longer than PLAIN_ROOM, which the plain paths must leave to the general one (it
    rotates by the line's size), so a segment passes max_bytes only when one line does."""
    writer = _writer(tmp_path, compiled, monkeypatch, flush_bytes=4096, max_bytes=16 * 1024)
    for n in range(100):
        event = MessageReceived(remote="\x02" * 3000 if n % 10 == 9 else "m", body=b"x",
                                session_id=1, transaction_id=n, segments=1)
        writer.record_delivery("main", event, 1.7e9)
    writer.close()
    assert len(read_journal([tmp_path]).records) == 100
    for path in writer.segments_sealed:
        data = path.read_bytes()
        assert len(data) <= 16 * 1024 or data.count(b"\n") == 1
