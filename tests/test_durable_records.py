"""No record past the durable log's largest (``MAX_RECORD``, 64 MiB) is ever written.

Opening the log takes a longer length for damage: a torn tail in the newest segment (cut
away, its data lost), a StoreError in an older one.  Before, ``RecordLog.append`` wrote
one without complaint, the dedup store wrote every mark that waited as one record (marks
pile up while rounds are held), and a raw-bytes put took the in-line path past the bound
when ``segment_bytes`` was larger than it."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from raetlike.durable import _outbox
from raetlike.durable._log import HEAD, MAX_RECORD, RecordLog, frame
from raetlike.durable._outbox import DurableOutbox
from raetlike.durable._seen import DurableSeen
from raetlike.errors import LocalProtocolError
from raetlike.journal import FsyncPolicy


def test_the_log_refuses_a_record_past_its_largest_and_writes_nothing(
        tmp_path: Path) -> None:
    log = RecordLog(tmp_path, fsync=FsyncPolicy.NEVER, segment_bytes=1 << 20)
    list(log.records())
    log.append(b"small")
    size = log.size
    with pytest.raises(LocalProtocolError, match="largest"):
        log.append(b"m" * (MAX_RECORD + 1))
    payload = b"n" * (MAX_RECORD + 1)  # framed by hand, as frame() refuses it too
    with pytest.raises(LocalProtocolError, match="largest"):
        log.write(frame(b"ok") + HEAD.pack(len(payload), 0) + payload)
    assert log.size == size
    log.append(b"after")
    log.close()
    again = RecordLog(tmp_path, fsync=FsyncPolicy.NEVER, segment_bytes=1 << 20)
    assert [payload for _, payload in again.records()] == [b"small", b"after"]
    assert again.torn == 0
    again.close()


def test_marks_past_the_largest_record_are_split_and_all_survive_a_reopen(
        tmp_path: Path) -> None:
    """320,000 marks of a sender with a 200-byte name: 69 MB as one record.  Before, it
    was written, and the reopened store had cut it away as torn: every mark lost.  (The
    segment is larger than the record here; in a smaller one the commit starts a new
    segment with a snapshot at once, and a crash, or a write error, before that is
    whole had the same effect.)"""
    sender, store, count = "s" * 200, 1 << 62, 320_000
    seen = DurableSeen(tmp_path, fsync=FsyncPolicy.NEVER, segment_bytes=MAX_RECORD + (32 << 20))
    for seq in range(1, count + 1):
        assert seen.admit(sender, store, seq, journaled=False)
    seen.commit()
    seen.log.abandon()  # (as a kill -9: only what was written)
    again = DurableSeen(tmp_path, fsync=FsyncPolicy.NEVER)
    assert again.log.torn == 0
    assert not again.admit(sender, store, 1, journaled=False)
    assert not again.admit(sender, store, count, journaled=False)
    assert again.admit(sender, store, count + 1, journaled=False)
    again.close()


def test_done_ids_are_split_into_records(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """(The split itself, with a small bound: a done record past 64 MiB needs 7 million
    ids waiting.)"""
    monkeypatch.setattr(_outbox, "DONE_PER_RECORD", 3)
    outbox = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, boot_id=lambda: "boot")
    ids = [outbox.put("r", {"n": n}, 2e9) for n in range(10)]
    for message_id in ids[:8]:
        outbox.done(message_id)
    records = outbox.log.size
    outbox.flush()
    assert outbox.log.size > records
    outbox.log.abandon()
    log = RecordLog(tmp_path, fsync=FsyncPolicy.NEVER)
    done = [msgpack.unpackb(payload) for _, payload in log.records()
            if payload[:1] != b"\0" and msgpack.unpackb(payload)[0] == 1]
    log.close()
    assert done == [[1, *ids[0:3]], [1, *ids[3:6]], [1, *ids[6:8]]]
    again = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, boot_id=lambda: "boot")
    assert [stored.id for stored in again.pending()] == ids[8:]
    again.close()


def test_a_raw_put_past_the_largest_record_is_refused_in_a_large_segment(
        tmp_path: Path) -> None:
    """With ``segment_bytes`` past 64 MiB the in-line path had room for it."""
    outbox = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, boot_id=lambda: "boot",
                           segment_bytes=MAX_RECORD + (4 << 20))
    outbox.put_raw("r", b"first", 2e9)  # (the lease: the next one may go in line)
    with pytest.raises(LocalProtocolError):
        outbox.put_raw("r", b"x" * (MAX_RECORD + 1), 2e9)
    assert len(outbox) == 1
    outbox.put_raw("r", b"after", 2e9)
    outbox.log.abandon()
    again = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, boot_id=lambda: "boot")
    assert again.log.torn == 0
    assert [stored.body for stored in again.pending()] == [b"first", b"after"]
    again.close()
