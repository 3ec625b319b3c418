"""The durable outbox and dedup store on disk: torn tails, garbage, corruption, compaction.

Every test works on real files in a temporary directory.  A "crash" is either a file cut
short by hand (a torn append) or ``log.abandon()`` (what ``kill -9`` leaves: everything
written so far, nothing more).  The log format is read back here with an independent
parser (u32 length, u32 CRC-32 of the length bytes then the payload, payload).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.durable import DurableOutbox, DurableSeen, RecordLog, Stored
from raetlike.durable._outbox import MAX_SEGMENTS, RAW_HEAD, RAW_MAGIC
from raetlike.errors import BackpressureError, StoreError
from raetlike.journal import FsyncPolicy

NEVER = FsyncPolicy.NEVER
_HEAD = struct.Struct("<II")

Mark = tuple[str, int, int]


# == helpers ===============================================================


def record_spans(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` of every record in a segment file, all of which must be whole (zeros
    after the last one are the free space of a segment still open)."""
    data = path.read_bytes()
    spans, offset = [], 0
    while offset < len(data) and data[offset:].strip(b"\0"):
        assert len(data) - offset >= _HEAD.size, f"{path}: short head at {offset}"
        length, check = _HEAD.unpack_from(data, offset)
        end = offset + _HEAD.size + length
        assert end <= len(data), f"{path}: record at {offset} runs past the end"
        payload = data[offset + _HEAD.size:end]
        assert zlib.crc32(payload, zlib.crc32(data[offset:offset + 4])) == check, (
            f"{path}: bad check at {offset}")
        spans.append((offset, end))
        offset = end
    return spans


def segment_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if re.fullmatch(r"\d{12}\.log", p.name))


def newest_segment(directory: Path) -> Path:
    return segment_files(directory)[-1]


def disk_state(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


SMALL = 64 * 1024
"""Segment size for these tests: every reopen reads the open segment's free space too."""


def open_outbox(directory: Path, **kwargs: Any) -> DurableOutbox:
    return DurableOutbox(directory, fsync=NEVER, **{"segment_bytes": SMALL, **kwargs})


def open_seen(directory: Path, **kwargs: Any) -> DurableSeen:
    return DurableSeen(directory, fsync=NEVER, **{"segment_bytes": SMALL, **kwargs})


def admit_all(seen: DurableSeen, marks: Iterable[Mark]) -> list[bool]:
    return [seen.admit(sender, store, ident, journaled=False) for sender, store, ident in marks]


# == torn writes at every byte of the last record =========================


def _build_outbox(directory: Path, last: str) -> tuple[list[Stored], int]:
    """An outbox of a few puts and a done record, then one more record of kind ``last``;
    returns what is pending without that last record, and next_id before it."""
    outbox = open_outbox(directory)
    ids = [outbox.put(f"remote-{i}", {"n": i, "pad": "x" * i}, 1000.0 + i)
           for i in range(4)]
    outbox.put("bytes", b"\x00\x01raw", 1500.5)
    assert outbox.done(ids[1])
    outbox.flush()
    before, next_id = outbox.pending(), outbox.next_id
    if last == "put":
        outbox.put("last", {"tail": "the torn one", "list": [1, 2, 3]}, 2000.0)
    else:
        assert outbox.done(ids[2])
        outbox.flush()
    outbox.close()
    return before, next_id


def _cut_copy(tmp_path: Path, original: Path, cut: int) -> tuple[Path, Path]:
    """A copy of the store ``original`` whose newest segment is cut at byte ``cut`` (a
    torn append); the copy and that segment."""
    copy = tmp_path / f"cut-{cut}"
    shutil.copytree(original, copy)
    segment = newest_segment(copy)
    os.truncate(segment, cut)
    return copy, segment


def _assert_cut_at(log: RecordLog, segment: Path, end: int) -> None:
    """The open segment holds whole records up to ``end`` and only zeros (free space of
    the mapped segment) after it."""
    assert log.size == end
    assert not segment.read_bytes()[end:].strip(b"\0")


@pytest.mark.parametrize("last", ["put", "done"])
def test_outbox_torn_last_record_at_every_byte(tmp_path: Path, last: str) -> None:
    original = tmp_path / "original"
    before, next_id = _build_outbox(original, last)
    assert len(segment_files(original)) == 1
    start, end = record_spans(newest_segment(original))[-1]
    assert end == newest_segment(original).stat().st_size
    if last == "done":  # the done record's message is back when the record is gone
        assert [s.id for s in before] == [1, 3, 4, 5]

    for cut in range(start, end):
        copy, segment = _cut_copy(tmp_path, original, cut)
        outbox = open_outbox(copy)
        assert outbox.log.torn == (0 if cut == start else 1), cut
        _assert_cut_at(outbox.log, segment, start)  # cut back to the last whole record
        assert outbox.pending() == before, cut
        assert outbox.next_id == next_id, cut
        new_id = outbox.put("after", {"cut": cut}, 3000.0)
        assert new_id == next_id
        outbox.close()

        again = open_outbox(copy)
        assert again.log.torn == 0, cut
        assert again.pending() == [*before, Stored(new_id, "after", 3000.0, {"cut": cut})]
        record_spans(segment)  # every record whole
        again.close()


def _build_seen(directory: Path) -> tuple[list[Mark], list[Mark]]:
    """A dedup store with a snapshot and two marks records, then a last marks record;
    returns the marks before the last record and those in it."""
    seen = open_seen(directory)
    early: list[Mark] = [("alpha", 11, 1), ("alpha", 11, 2), ("beta", 22, 5)]
    assert all(admit_all(seen, early[:2]))
    seen.checkpoint(None)  # a snapshot record starts segment 2
    assert all(admit_all(seen, early[2:]))
    seen.commit()
    more: list[Mark] = [("alpha", 11, 4), ("gamma", 33, 100)]
    assert all(admit_all(seen, more))
    seen.commit()
    last: list[Mark] = [("alpha", 11, 3), ("beta", 22, 9), ("delta", 44, 1)]
    assert all(admit_all(seen, last))
    seen.commit()
    seen.close()
    return early + more, last


def test_seen_torn_last_marks_record_at_every_byte(tmp_path: Path) -> None:
    original = tmp_path / "original"
    kept, last = _build_seen(original)
    assert len(segment_files(original)) == 1  # the checkpoint dropped segment 1
    start, end = record_spans(newest_segment(original))[-1]

    for cut in range(start, end):
        copy, segment = _cut_copy(tmp_path, original, cut)
        seen = open_seen(copy)
        assert seen.log.torn == (0 if cut == start else 1), cut
        _assert_cut_at(seen.log, segment, start)
        assert admit_all(seen, kept) == [False] * len(kept), cut  # earlier marks intact
        assert admit_all(seen, last) == [True] * len(last), cut  # the torn marks are gone
        seen.commit()
        seen.close()

        again = open_seen(copy)
        assert again.log.torn == 0, cut
        assert admit_all(again, kept + last) == [False] * (len(kept) + len(last)), cut
        record_spans(segment)
        again.close()


# == garbage tails ========================================================

GARBAGE: dict[str, bytes] = {
    "zeros-4096": bytes(4096),
    "zeros-3": bytes(3),  # shorter than a head
    "zeros-8": bytes(8),  # a whole head of zeros: length 0, check 0, which never passes
    "random-4096": random.Random(7).randbytes(4096),
    "random-5": random.Random(8).randbytes(5),
    "huge-length": _HEAD.pack(0xFFFF_FFF0, 0) + b"abc",
    "stale-copy": b"",  # filled in by the test: the last whole record again, one byte off
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_outbox_garbage_tail_is_cut_away(tmp_path: Path, kind: str) -> None:
    outbox = open_outbox(tmp_path)
    for i in range(3):
        outbox.put("r", {"i": i}, 10.0)
    outbox.done(2)
    outbox.close()
    segment = newest_segment(tmp_path)
    size = segment.stat().st_size
    garbage = GARBAGE[kind]
    if kind == "stale-copy":
        start, end = record_spans(segment)[-1]
        stale = bytearray(segment.read_bytes()[start:end])
        stale[-1] ^= 0x55
        garbage = bytes(stale)
    with segment.open("ab") as f:
        f.write(garbage)

    outbox = open_outbox(tmp_path)
    assert outbox.log.torn == (0 if kind.startswith("zeros") else 1)  # zeros: free space
    _assert_cut_at(outbox.log, segment, size)
    assert [(s.id, s.body) for s in outbox.pending()] == [(1, {"i": 0}), (3, {"i": 2})]
    outbox.put("r", {"i": 3}, 10.0)
    outbox.close()
    outbox = open_outbox(tmp_path)
    assert outbox.log.torn == 0
    assert [s.id for s in outbox.pending()] == [1, 3, 4]
    outbox.close()


@pytest.mark.parametrize("kind", sorted(set(GARBAGE) - {"stale-copy"}))
def test_seen_garbage_tail_is_cut_away(tmp_path: Path, kind: str) -> None:
    seen = open_seen(tmp_path)
    marks: list[Mark] = [("a", 1, 1), ("a", 1, 2), ("b", 2, 7)]
    admit_all(seen, marks)
    seen.close()
    segment = newest_segment(tmp_path)
    size = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(GARBAGE[kind])

    seen = open_seen(tmp_path)
    assert seen.log.torn == (0 if kind.startswith("zeros") else 1)  # zeros: free space
    _assert_cut_at(seen.log, segment, size)
    assert admit_all(seen, marks) == [False, False, False]
    assert admit_all(seen, [("a", 1, 3)]) == [True]
    seen.close()
    seen = open_seen(tmp_path)
    assert seen.log.torn == 0
    assert admit_all(seen, [("a", 1, 3)]) == [False]
    seen.close()


# == damage in an older segment ===========================================


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _outbox_with_segments(directory: Path) -> None:
    outbox = open_outbox(directory, segment_bytes=200)
    for i in range(12):
        outbox.put("r", {"i": i, "pad": "p" * 20}, 5.0)
    outbox.close()
    assert 2 <= len(segment_files(directory)) <= MAX_SEGMENTS + 1


@pytest.mark.parametrize("where", ["length", "check", "payload", "last-payload-byte"])
def test_outbox_flipped_byte_in_older_segment_raises_and_changes_nothing(
        tmp_path: Path, where: str) -> None:
    _outbox_with_segments(tmp_path)
    older = segment_files(tmp_path)[0]
    start, end = record_spans(older)[1]  # the first put after the segment's head
    offset = {"length": start, "check": start + 5, "payload": start + 10,
              "last-payload-byte": end - 1}[where]
    _flip(older, offset)
    before = disk_state(tmp_path)

    with pytest.raises(StoreError, match=re.escape(str(older))):
        open_outbox(tmp_path)
    assert disk_state(tmp_path) == before


def test_seen_and_log_flipped_byte_in_older_segment_raise(tmp_path: Path) -> None:
    seen = open_seen(tmp_path / "seen")
    admit_all(seen, [("a", 1, 1), ("a", 1, 2)])
    seen.commit()
    seen.log.rotate()  # a second segment, the first one kept
    admit_all(seen, [("a", 1, 3)])
    seen.close()
    older = segment_files(tmp_path / "seen")[0]
    _flip(older, older.stat().st_size - 1)
    before = disk_state(tmp_path / "seen")
    with pytest.raises(StoreError, match=re.escape(str(older))):
        open_seen(tmp_path / "seen")
    assert disk_state(tmp_path / "seen") == before

    log = RecordLog(tmp_path / "log", fsync=NEVER)
    log.append(b"one")
    log.rotate()
    log.append(b"two")
    log.close()
    older = segment_files(tmp_path / "log")[0]
    _flip(older, 0)
    before = disk_state(tmp_path / "log")
    with pytest.raises(StoreError, match=re.escape(str(older)) + r".*byte 0 of 11"):
        RecordLog(tmp_path / "log", fsync=NEVER)
    assert disk_state(tmp_path / "log") == before


def test_record_log_reads_back_what_it_appended(tmp_path: Path) -> None:
    log = RecordLog(tmp_path, fsync=NEVER)
    assert list(log.records()) == []
    log.append(b"")
    log.append(b"a" * 1000)
    log.rotate()
    log.append(b"b")
    log.close()
    log = RecordLog(tmp_path, fsync=NEVER)
    assert list(log.records()) == [(1, b""), (1, b"a" * 1000), (2, b"b")]
    assert log.torn == 0
    assert log.segments == [1, 2]
    log.drop_before(2)
    assert [p.name for p in segment_files(tmp_path)] == ["000000000002.log"]
    log.close()


# == ids, store id, compaction =============================================


def test_outbox_ids_and_store_survive_restarts_and_compaction(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path, segment_bytes=256)
    store = outbox.store
    assert store > 0
    last = 0
    most_segments = 0
    for _cycle in range(6):
        for n in range(40):
            message_id = outbox.put(f"r{n % 3}", {"n": n}, 1.0)
            assert message_id == last + 1
            last = message_id
            assert outbox.done(message_id)
            outbox.flush()
            most_segments = max(most_segments, len(segment_files(tmp_path)))
        assert outbox.pending() == []
        outbox.close()
        outbox = open_outbox(tmp_path, segment_bytes=256)
        assert outbox.store == store
        assert outbox.next_id == last + 1
        assert outbox.pending() == []
    outbox.close()
    assert most_segments <= MAX_SEGMENTS + 1
    names = [p.name for p in segment_files(tmp_path)]
    assert "000000000001.log" not in names  # old segments were deleted
    assert int(names[0][:12]) > 10
    # every put record on disk is a recent one: the ids below come from the heads
    outbox = open_outbox(tmp_path, segment_bytes=256)
    assert outbox.put("r", b"next", 1.0) == last + 1
    assert outbox.store == store
    outbox.close()


def test_outbox_id_survives_when_only_a_head_is_left(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path, segment_bytes=64)
    for _ in range(5):
        outbox.done(outbox.put("r", b"0123456789" * 4, 1.0))
    store, next_id = outbox.store, outbox.next_id
    outbox.close()
    # cut the newest segment back to its head: the put that rotated is lost (torn)
    assert len(segment_files(tmp_path)) == 1  # the older ones held only done messages
    segment = newest_segment(tmp_path)
    assert segment.name != "000000000001.log"
    _head_start, head_end = record_spans(segment)[0]
    os.truncate(segment, head_end)
    outbox = open_outbox(tmp_path, segment_bytes=64)
    assert outbox.store == store
    assert outbox.next_id == next_id - 1  # the lost put's id, never handed back
    assert outbox.pending() == []
    outbox.close()


def test_outbox_copies_live_messages_forward_in_id_order(tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path, segment_bytes=200)
    kept: list[Stored] = []
    churn = 0
    for round_ in range(8):
        kept_id = outbox.put("keep", {"round": round_}, 50.0 + round_)
        kept.append(Stored(kept_id, "keep", 50.0 + round_, {"round": round_}))
        for n in range(12):
            outbox.done(outbox.put("churn", {"n": n}, 1.0))
            outbox.flush()
            churn += 1
            assert len(segment_files(tmp_path)) <= MAX_SEGMENTS + 1
        assert outbox.pending() == kept
    names = [p.name for p in segment_files(tmp_path)]
    assert "000000000001.log" not in names  # the first keeper's segment went...
    assert outbox.pending()[0] == kept[0]  # ...after its message was copied forward
    outbox.close()

    outbox = open_outbox(tmp_path, segment_bytes=200)
    assert outbox.pending() == kept
    assert len(outbox) == len(kept)
    assert outbox.held_bytes > 0
    outbox.close()


# == bounds ===============================================================


def _put_by(path: str) -> Callable[[DurableOutbox, str, bytes, float], int]:
    """A put of bytes by one of the outbox's two paths (the hot one returns the envelope
    too: only the id is wanted here)."""
    if path == "mapping-capable":
        return DurableOutbox.put
    return lambda outbox, remote, body, expires: outbox.put_raw(remote, body, expires)[0]


@pytest.mark.parametrize("path", ["mapping-capable", "raw"])
def test_outbox_max_messages_refuses_and_stores_nothing(tmp_path: Path, path: str) -> None:
    put = _put_by(path)
    outbox = open_outbox(tmp_path, max_messages=3)
    for i in range(3):
        put(outbox, "r", bytes([i]), 1.0)
    before, next_id, held = disk_state(tmp_path), outbox.next_id, outbox.held_bytes
    with pytest.raises(BackpressureError, match="3 messages"):
        put(outbox, "r", b"99", 1.0)
    assert outbox.next_id == next_id
    assert outbox.held_bytes == held
    assert len(outbox) == 3
    assert disk_state(tmp_path) == before
    outbox.done(2)
    assert put(outbox, "r", b"3", 1.0) == next_id
    outbox.close()
    outbox = open_outbox(tmp_path, max_messages=3)
    assert [s.id for s in outbox.pending()] == [1, 3, 4]
    outbox.close()


@pytest.mark.parametrize("path", ["mapping-capable", "raw"])
def test_outbox_max_bytes_refuses_and_stores_nothing(tmp_path: Path, path: str) -> None:
    put = _put_by(path)
    outbox = open_outbox(tmp_path, max_bytes=300)
    first = put(outbox, "r", b"a" * 150, 1.0)
    before, next_id, held = disk_state(tmp_path), outbox.next_id, outbox.held_bytes
    assert 150 < held <= 300
    with pytest.raises(BackpressureError, match="300 bytes"):
        put(outbox, "r", b"b" * 150, 1.0)
    with pytest.raises(BackpressureError):
        put(outbox, "r", b"c" * 1000, 1.0)
    assert (outbox.next_id, outbox.held_bytes) == (next_id, held)
    assert disk_state(tmp_path) == before
    outbox.done(first)
    assert outbox.held_bytes == 0
    assert put(outbox, "r", b"b" * 150, 1.0) == next_id
    outbox.close()
    outbox = open_outbox(tmp_path, max_bytes=300)
    assert [(s.id, s.body) for s in outbox.pending()] == [(next_id, b"b" * 150)]
    outbox.close()


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_raw_puts_under_each_policy_rotate_and_read_back(tmp_path: Path,
                                                        policy: FsyncPolicy) -> None:
    """The raw put's in-line append (taken while the open segment has room and no single
    record wants a sync) and its fallback (rotation; ``always``, which syncs each) keep
    the same records."""
    outbox = DurableOutbox(tmp_path, fsync=policy, segment_bytes=1024)
    ids = [outbox.put_raw("r", bytes([n]) * 40, 9.0)[0] for n in range(80)]
    assert len(segment_files(tmp_path)) > 1
    assert outbox.log.dirty is (policy is not FsyncPolicy.ALWAYS)
    for message_id in ids[:70]:
        outbox.done(message_id)
    outbox.close()
    again = DurableOutbox(tmp_path, fsync=policy, segment_bytes=1024)
    assert [(s.id, s.seq, s.body) for s in again.pending()] == [
        (n + 1, n + 1, bytes([n]) * 40) for n in range(70, 80)]
    again.close()


# == the dedup store ======================================================


def test_seen_refuses_a_repeat_after_reopen(tmp_path: Path) -> None:
    seen = open_seen(tmp_path)
    marks: list[Mark] = [("a", 7, i) for i in range(1, 6)] + [("b", 8, 3)]
    assert all(admit_all(seen, marks))
    assert admit_all(seen, [("a", 7, 2)]) == [False]
    seen.commit()
    seen.close()
    seen = open_seen(tmp_path)
    assert seen.senders == 2
    assert admit_all(seen, marks) == [False] * len(marks)
    assert seen.duplicates == len(marks)
    assert admit_all(seen, [("a", 7, 6), ("b", 8, 1)]) == [True, True]
    seen.close()


def test_seen_uncommitted_mark_is_lost_on_kill(tmp_path: Path) -> None:
    seen = open_seen(tmp_path)
    assert all(admit_all(seen, [("a", 1, 1), ("a", 1, 2)]))
    seen.commit()
    assert admit_all(seen, [("a", 1, 3)]) == [True]  # marked in memory only
    seen.log.abandon()  # kill -9: the mark waiting for commit never reached the OS
    seen = open_seen(tmp_path)
    assert admit_all(seen, [("a", 1, 1), ("a", 1, 2)]) == [False, False]
    assert admit_all(seen, [("a", 1, 3)]) == [True]  # admitted again
    seen.commit()
    seen.log.abandon()
    seen = open_seen(tmp_path)
    assert admit_all(seen, [("a", 1, 3)]) == [False]  # committed this time
    seen.close()


def test_seen_new_store_id_starts_a_fresh_window(tmp_path: Path) -> None:
    seen = open_seen(tmp_path)
    assert all(admit_all(seen, [("a", 1, i) for i in range(1, 11)]))
    assert admit_all(seen, [("a", 2, 1), ("a", 2, 2)]) == [True, True]  # a new life
    seen.close()
    seen = open_seen(tmp_path)
    assert admit_all(seen, [("a", 2, 1), ("a", 2, 2)]) == [False, False]
    assert admit_all(seen, [("a", 2, 3)]) == [True]
    seen.close()


def test_seen_checkpoint_keeps_windows_and_drops_old_segments(tmp_path: Path) -> None:
    seen = open_seen(tmp_path)
    first: list[Mark] = [("a", 1, i) for i in range(1, 20) if i != 7] + [("b", 2, 40)]
    assert all(admit_all(seen, first))
    seen.commit()
    seen.log.rotate()
    assert all(admit_all(seen, [("c", 3, 1)]))
    seen.commit()
    assert len(segment_files(tmp_path)) == 2
    seen.checkpoint(None)
    assert [p.name for p in segment_files(tmp_path)] == ["000000000003.log"]
    # the snapshot alone: a record per sender's window, then the one that closes it
    assert len(record_spans(newest_segment(tmp_path))) == seen.senders + 1
    seen.close()

    seen = open_seen(tmp_path)
    assert seen.senders == 3
    assert admit_all(seen, [*first, ("c", 3, 1)]) == [False] * (len(first) + 1)
    assert admit_all(seen, [("a", 1, 7), ("a", 1, 20), ("b", 2, 39)]) == [True] * 3
    seen.close()


def test_seen_checkpoint_position_reaches_journal_marks(tmp_path: Path) -> None:
    asked: list[list[Any]] = []

    def journal_marks(position: list[Any]) -> list[Mark]:
        asked.append(position)
        return [("j", 5, 1), ("j", 5, 2)]

    seen = open_seen(tmp_path, journal_marks=journal_marks)
    assert asked == []  # no snapshot yet: nothing to ask
    assert seen.admit("j", 5, 1, journaled=True)
    seen.checkpoint(["segment-3", 1234])
    seen.close()
    seen = open_seen(tmp_path, journal_marks=journal_marks)
    assert asked == [["segment-3", 1234]]
    assert seen.recovered_from_journal == 2
    assert admit_all(seen, [("j", 5, 1), ("j", 5, 2), ("j", 5, 3)]) == [False, False, True]
    seen.close()


def test_seen_small_segments_checkpoint_on_their_own(tmp_path: Path) -> None:
    seen = open_seen(tmp_path, segment_bytes=256)
    marks: list[Mark] = []
    for i in range(1, 200):
        mark = (f"s{i % 4}", i % 4 + 1, i)
        marks.append(mark)
        assert admit_all(seen, [mark]) == [True]
        seen.commit()
        assert len(segment_files(tmp_path)) <= 2
    seen.close()
    assert segment_files(tmp_path)[0].name != "000000000001.log"
    seen = open_seen(tmp_path, segment_bytes=256)
    assert admit_all(seen, marks) == [False] * len(marks)
    seen.close()


def test_seen_max_senders_evicts_the_least_recently_used(tmp_path: Path) -> None:
    seen = open_seen(tmp_path, max_senders=2)
    assert all(admit_all(seen, [("a", 1, 1), ("b", 1, 1)]))
    assert admit_all(seen, [("a", 1, 2)]) == [True]  # a is now the most recent
    assert admit_all(seen, [("c", 1, 1)]) == [True]  # b goes
    assert seen.senders == 2
    seen.commit()
    seen.close()

    seen = open_seen(tmp_path, max_senders=2)  # the replay evicts the same way
    assert seen.senders == 2
    assert admit_all(seen, [("c", 1, 1), ("a", 1, 1), ("a", 1, 2)]) == [False] * 3
    assert admit_all(seen, [("b", 1, 1)]) == [True]  # forgotten: a fresh window; c goes
    assert admit_all(seen, [("a", 1, 2)]) == [False]  # a stays
    assert admit_all(seen, [("c", 1, 1)]) == [True]  # c was the least recent: forgotten
    seen.close()


# == regressions: bugs these tests found ==


def test_seen_new_store_id_counts_as_recent_use(tmp_path: Path) -> None:
    seen = open_seen(tmp_path, max_senders=2)
    assert all(admit_all(seen, [("a", 1, 1), ("b", 1, 1)]))
    assert admit_all(seen, [("a", 2, 1)]) == [True]  # a restarted: the most recent use
    assert admit_all(seen, [("c", 1, 1)]) == [True]  # should evict b, evicts a
    assert admit_all(seen, [("a", 2, 1)]) == [False]  # a repeat: delivered twice today


def test_outbox_bad_record_before_whole_records_in_newest_segment_raises(
        tmp_path: Path) -> None:
    outbox = open_outbox(tmp_path)
    for i in range(3):
        outbox.put("r", {"i": i}, 1.0)
    outbox.close()
    segment = newest_segment(tmp_path)
    start, _end = record_spans(segment)[1]  # the first put; two whole puts follow
    _flip(segment, start + 12)
    before = disk_state(tmp_path)
    try:
        with pytest.raises(StoreError):
            open_outbox(tmp_path)
    finally:
        assert disk_state(tmp_path) == before  # (today: cut to the head, 3 puts lost)


def test_seen_checkpoint_syncs_the_snapshot_before_dropping_segments(tmp_path: Path) -> None:
    seen = DurableSeen(tmp_path, fsync=FsyncPolicy.INTERVAL, interval=60.0)
    admit_all(seen, [("a", 1, 1)])
    seen.commit()
    seen.checkpoint(None)
    assert "000000000001.log" not in [p.name for p in segment_files(tmp_path)]
    assert not seen.log.dirty  # today: dirty, the only copy of the windows may be lost
    seen.close()


def test_outbox_compaction_syncs_copies_before_dropping_segments(tmp_path: Path) -> None:
    outbox = DurableOutbox(tmp_path, fsync=FsyncPolicy.INTERVAL, interval=60.0)
    outbox.put("keep", b"k" * 50, 1.0)  # live in segment 1
    while "000000000001.log" in [p.name for p in segment_files(tmp_path)]:
        outbox.log.sync(0.0)  # everything so far is on stable storage
        outbox._rotate()  # what a put does when the segment is full
    # segment 1 is gone; its message's only copy is the one just written forward
    assert [s.remote for s in outbox.pending()] == ["keep"]
    assert not outbox.log.dirty  # today: dirty, a power cut may lose the message
    outbox.close()


# == a model-based test ===================================================

_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["a", "b", "c"]),
              st.one_of(st.binary(max_size=40),
                        st.dictionaries(st.text(max_size=3), st.integers(-5, 5),
                                        max_size=3))),
    st.tuples(st.just("put-raw"), st.sampled_from(["a", "b", "c"]), st.binary(max_size=90)),
    st.tuples(st.just("done"), st.integers(0, 50)),
    st.tuples(st.just("done-unknown"), st.integers(1, 1000)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("crash")),
)


@settings(max_examples=300)
@given(st.lists(_op, max_size=60))
def test_outbox_model(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)

        def opener() -> DurableOutbox:
            return open_outbox(directory, segment_bytes=160)

        outbox = opener()
        store = outbox.store
        model: dict[int, tuple[str, Any]] = {}
        unflushed: dict[int, tuple[str, Any]] = {}  # done, record not yet written
        next_id = 1
        for op in ops:
            kind = op[0]
            if kind in {"put", "put-raw"}:
                if kind == "put":
                    message_id = outbox.put(op[1], op[2], 7.0)
                else:  # the hot path: in line while the open segment has room
                    message_id, envelope = outbox.put_raw(op[1], op[2], 7.0)
                    assert envelope == RAW_HEAD.pack(RAW_MAGIC, store,
                                                     outbox.last_seq(op[1])) + op[2]
                assert message_id == next_id
                next_id += 1
                model[message_id] = (op[1], op[2])
            elif kind == "done" and model:
                message_id = sorted(model)[op[1] % len(model)]
                assert outbox.done(message_id)
                unflushed[message_id] = model.pop(message_id)
                assert not outbox.done(message_id)
            elif kind == "done-unknown":
                unknown = next_id + op[1]
                assert not outbox.done(unknown)
            elif kind == "flush":
                outbox.flush()
                unflushed.clear()
            elif kind == "reopen":
                outbox.close()
                unflushed.clear()
                outbox = opener()
                assert outbox.log.torn == 0
            elif kind == "crash":
                outbox.log.abandon()  # done records not yet flushed are lost
                outbox = opener()
                assert outbox.log.torn == 0
                got = {s.id: (s.remote, s.body) for s in outbox.pending()}
                assert model.items() <= got.items()
                assert got.keys() - model.keys() <= unflushed.keys()
                for message_id in got.keys() - model.keys():
                    assert got[message_id] == unflushed[message_id]
                model = got
                unflushed.clear()
            assert outbox.store == store
            assert outbox.next_id == next_id
            assert [(s.id, s.remote, s.body) for s in outbox.pending()] == [
                (i, *model[i]) for i in sorted(model)]
            assert len(segment_files(directory)) <= MAX_SEGMENTS + 1
        outbox.close()
        outbox = opener()
        assert outbox.store == store
        assert outbox.next_id == next_id
        assert [(s.id, s.remote, s.expires, s.body) for s in outbox.pending()] == [
            (i, model[i][0], 7.0, model[i][1]) for i in sorted(model)]
        outbox.close()


# == power cuts: numbers are never given twice =========================================


def test_after_a_reboot_seqs_go_on_from_the_lease_so_none_is_given_twice(
        tmp_path: Path) -> None:
    """A power cut can take puts a receiver already has; numbering on from what survived
    would give new messages numbers the receiver has seen (and would drop).  After a
    reboot (another boot id) the store numbers on from each remote's lease instead."""
    outbox = DurableOutbox(tmp_path, fsync=NEVER, segment_bytes=SMALL, boot_id=lambda: "a")
    for n in range(10):
        outbox.put("r", {"n": n}, 1.0)
    assert outbox.last_seq("r") == 10
    outbox.log.abandon()
    segment = newest_segment(tmp_path)
    cut = record_spans(segment)[-7][0]  # the last 7 puts never reached the disk
    os.truncate(segment, cut)

    same_boot = DurableOutbox(tmp_path, fsync=NEVER, segment_bytes=SMALL,
                              boot_id=lambda: "a")
    assert not same_boot.rebooted
    assert same_boot.last_seq("r") == 3  # a kill loses nothing: numbering is exact
    same_boot.log.abandon()

    after_reboot = DurableOutbox(tmp_path, fsync=NEVER, segment_bytes=SMALL,
                                 boot_id=lambda: "b")
    assert after_reboot.rebooted
    assert after_reboot.last_seq("r") >= 10  # past everything that may have been sent
    after_reboot.put("r", {"n": "new"}, 1.0)
    assert after_reboot.last_seq("r") > 10
    after_reboot.close()
    again = DurableOutbox(tmp_path, fsync=NEVER, segment_bytes=SMALL, boot_id=lambda: "b")
    assert not again.rebooted
    assert again.last_seq("r") == after_reboot.last_seq("r")
    again.close()
