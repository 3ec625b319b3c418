"""road.persist: remote records are written by the keep's writer thread, off the loop.

Real files in tmp_path; a write that waits on an event holds the writer still
where a test needs saves to pile up, and every check waits on ``flush()``.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from raetlike.keep import Keep, RemoteEstate
from road.config import RoadConfig
from road.persist import FileRoadKeep, open_estate
from road.remote import Remote
from road.stack import RoadStack

MAIN = ("127.0.0.1", 7630)
MINION = ("127.0.0.1", 7631)


class RecordingKeep(Keep):
    """A real keep on disk that also notes the order of remote-record writes."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[tuple[str, str]] = []

    def dump_remote(self, estate: RemoteEstate) -> None:
        super().dump_remote(estate)
        self.calls.append(("dump", estate.name))

    def remove_remote(self, name: str) -> bool:
        self.calls.append(("remove", name))
        return super().remove_remote(name)


def _keep(tmp_path: Path, limit: int = 4096) -> tuple[FileRoadKeep, RecordingKeep]:
    open_estate(tmp_path, "main", main=True, host_address=MAIN)  # the local estate's files
    keep = RecordingKeep(tmp_path, "main")
    return FileRoadKeep(keep, max_pending_saves=limit), keep


def _hold(file_keep: FileRoadKeep) -> threading.Event:
    """Keep the writer busy until the returned event is set (once it has started)."""
    started, release = threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        release.wait(30)

    file_keep.writer.submit("held", held)
    assert started.wait(30)
    return release


def _record(tmp_path: Path, name: str) -> Path:
    return tmp_path / "main" / "remote" / f"estate.{name}.json"


def test_saves_of_one_remote_still_pending_are_coalesced_into_the_latest(tmp_path: Path) -> None:
    file_keep, keep = _keep(tmp_path)
    remote = Remote(uid=2, name="minion", host_address=MINION)
    release = _hold(file_keep)
    for session in range(1, 6):
        remote.session_id = session
        file_keep.save_remote(remote)
    assert file_keep.writer.pending == 2  # the remote's record and the local estate's last uid
    release.set()
    file_keep.flush()
    assert file_keep.writer.coalesced == 4
    assert keep.calls == [("dump", "minion")]
    kept = keep.load_remote("minion")
    assert kept is not None
    assert kept.session_id == 5
    local = keep.load_local()
    assert local is not None
    assert local.last_uid == 2


def test_a_removal_after_a_pending_save_of_the_same_name_wins(tmp_path: Path) -> None:
    file_keep, keep = _keep(tmp_path)
    remote = Remote(uid=2, name="minion", host_address=MINION)
    release = _hold(file_keep)
    file_keep.save_remote(remote)
    file_keep.remove_remote(remote)
    release.set()
    file_keep.flush()
    assert not _record(tmp_path, "minion").exists()
    assert keep.calls == [("remove", "minion")]
    file_keep.save_remote(remote)  # and a save after the removal brings it back
    file_keep.flush()
    assert _record(tmp_path, "minion").exists()


def test_a_rename_removes_the_former_name_after_writing_the_new_one(tmp_path: Path) -> None:
    file_keep, keep = _keep(tmp_path)
    remote = Remote(uid=2, name="before", host_address=MINION)
    file_keep.save_remote(remote)
    file_keep.flush()
    release = _hold(file_keep)
    file_keep.save_remote(remote)  # a save of the former name still pending: replaced
    remote.name = "after"
    file_keep.save_remote(remote)
    release.set()
    file_keep.flush()
    assert keep.calls == [("dump", "before"), ("dump", "after"), ("remove", "before")]
    assert not _record(tmp_path, "before").exists()
    assert _record(tmp_path, "after").exists()


@pytest.mark.parametrize("limit", [0, 4096])
def test_a_rename_whose_write_fails_keeps_the_former_record(tmp_path: Path, limit: int) -> None:
    """The remote is never left with no record on disk: the former name's file goes only
    once the new name's is written (the next save that writes it), inline or threaded."""
    file_keep, keep = _keep(tmp_path, limit)
    remote = Remote(uid=2, name="before", host_address=MINION)
    file_keep.save_remote(remote)
    file_keep.flush()
    _record(tmp_path, "after").mkdir()  # the new name's file cannot be written
    remote.name = "after"
    file_keep.save_remote(remote)
    file_keep.flush()
    _record(tmp_path, "after").rmdir()
    assert sorted(Keep(tmp_path, "main").load_remotes()) == ["before"]
    remote.session_id = 7  # the next save writes the new name, then drops the former
    file_keep.save_remote(remote)
    file_keep.flush()
    assert sorted(Keep(tmp_path, "main").load_remotes()) == ["after"]
    assert keep.calls[-2:] == [("dump", "after"), ("remove", "before")]


def test_saving_a_renamed_remote_again_never_removes_the_former_file_first(
        tmp_path: Path) -> None:
    file_keep, keep = _keep(tmp_path)
    remote = Remote(uid=2, name="before", host_address=MINION)
    file_keep.save_remote(remote)
    file_keep.flush()
    release = _hold(file_keep)
    remote.name = "after"
    file_keep.save_remote(remote)
    remote.session_id = 3  # a later save of the renamed remote while the rename is pending
    file_keep.save_remote(remote)
    release.set()
    file_keep.flush()
    assert keep.calls == [("dump", "before"), ("dump", "after"), ("remove", "before")]
    assert sorted(Keep(tmp_path, "main").load_remotes()) == ["after"]


def test_renamed_back_and_removed_leaves_no_file(tmp_path: Path) -> None:
    file_keep, _ = _keep(tmp_path)
    remote = Remote(uid=2, name="before", host_address=MINION)
    file_keep.save_remote(remote)
    file_keep.flush()
    release = _hold(file_keep)
    for name in ("after", "before", "third"):
        remote.name = name
        file_keep.save_remote(remote)
    release.set()
    file_keep.flush()
    assert sorted(Keep(tmp_path, "main").load_remotes()) == ["third"]
    file_keep.remove_remote(remote)
    file_keep.flush()
    assert Keep(tmp_path, "main").load_remotes() == {}


def test_a_writer_thread_that_cannot_start_writes_inline(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    file_keep, _ = _keep(tmp_path, limit=2)
    size = threading.stack_size()
    threading.stack_size(1 << 44)  # no thread can be made with this stack
    try:
        with caplog.at_level(logging.ERROR, logger="road.persist"):
            for uid in range(2, 7):  # more than the bound: nothing waits for a thread
                file_keep.save_remote(Remote(uid=uid, name=f"m{uid}", host_address=MINION))
    finally:
        threading.stack_size(size)
    assert "keep writer thread not started" in caplog.text
    file_keep.flush()
    file_keep.close()
    assert sorted(Keep(tmp_path, "main").load_remotes()) == [f"m{uid}" for uid in range(2, 7)]


def test_a_write_that_fails_is_logged_not_raised_and_the_writer_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    file_keep, _ = _keep(tmp_path)
    remote_dir = tmp_path / "main" / "remote"
    remote_dir.rmdir()
    remote_dir.write_text("not a directory")
    remote = Remote(uid=2, name="minion", host_address=MINION)
    with caplog.at_level(logging.ERROR, logger="road.persist"):
        file_keep.save_remote(remote)
        file_keep.flush()
    assert "main: cannot keep remote 'minion'" in caplog.text
    remote_dir.unlink()
    remote_dir.mkdir(mode=0o700)
    file_keep.save_remote(remote)
    file_keep.flush()
    assert _record(tmp_path, "minion").exists()


def test_close_writes_what_is_pending_and_later_saves_are_written_at_once(
        tmp_path: Path) -> None:
    file_keep, _ = _keep(tmp_path)
    remote = Remote(uid=2, name="minion", host_address=MINION)
    release = _hold(file_keep)
    file_keep.save_remote(remote)
    assert not _record(tmp_path, "minion").exists()
    release.set()
    file_keep.close()
    assert _record(tmp_path, "minion").exists()
    thread = file_keep.writer._thread
    assert thread is not None
    assert not thread.is_alive()
    other = Remote(uid=3, name="other", host_address=("127.0.0.1", 7632))
    file_keep.save_remote(other)  # no flush: written inline
    assert _record(tmp_path, "other").exists()


def test_past_the_bound_a_save_waits_for_room_and_nothing_is_dropped(tmp_path: Path) -> None:
    file_keep, keep = _keep(tmp_path, limit=1)
    release = _hold(file_keep)

    def save_both() -> None:  # the first record fills the bound; the rest wait for room
        file_keep.save_remote(Remote(uid=2, name="first", host_address=MINION))
        file_keep.save_remote(Remote(uid=3, name="second", host_address=MINION))

    saver = threading.Thread(target=save_both)
    saver.start()
    deadline = time.monotonic() + 30
    while file_keep.writer.waited < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert file_keep.writer.waited >= 1, "a save past the bound did not wait"
    assert file_keep.writer.pending == 1
    release.set()
    saver.join(30)
    assert not saver.is_alive()
    file_keep.flush()
    assert [name for kind, name in keep.calls if kind == "dump"] == ["first", "second"]
    local = keep.load_local()
    assert local is not None
    assert local.last_uid == 3


def test_a_negative_bound_is_refused_and_zero_writes_on_the_callers_thread(
        tmp_path: Path) -> None:
    open_estate(tmp_path, "main", main=True, host_address=MAIN)
    with pytest.raises(ValueError, match="max_pending_saves must be at least 0, not -1"):
        FileRoadKeep(Keep(tmp_path, "main"), max_pending_saves=-1)
    file_keep = FileRoadKeep(Keep(tmp_path, "main"))  # the default: 0, no thread
    assert file_keep.writer is None
    file_keep.save_remote(Remote(uid=2, name="minion", host_address=MINION))
    assert _record(tmp_path, "minion").exists()  # no flush: written before the call returned


def _exchange(a: RoadStack, b: RoadStack, now: float) -> None:
    for _ in range(20):
        moved = False
        for sender, receiver, source in ((a, b, MAIN), (b, a, MINION)):
            for data, _address in sender.datagrams_to_send(now):
                receiver.receive_datagram(data, source, now)
                moved = True
        if not moved:
            return


def test_a_main_restarted_after_close_restores_the_latest_record(tmp_path: Path) -> None:
    main_local, main_keep = open_estate(tmp_path / "m", "main", main=True, host_address=MAIN,
                                        max_pending_saves=64)
    assert main_keep.writer is not None
    minion_local, minion_keep = open_estate(tmp_path / "n", "minion", main=False,
                                            host_address=MINION)
    main = RoadStack(main_local, RoadConfig(), keep=main_keep)
    minion = RoadStack(minion_local, keep=minion_keep)
    minion.join(MAIN, now=0.0)
    _exchange(main, minion, 0.0)
    assert minion.remote("main").allowed
    remote = main.remote("minion")
    remote.session_id += 7  # a later save (as a move or allow makes) replaces the earlier
    main_keep.save_remote(remote)
    latest = (remote.uid, remote.far_uid, remote.session_id)
    main.close(now=1.0)
    local, keep = open_estate(tmp_path / "m", "main", main=True, host_address=MAIN)
    restarted = RoadStack(local, RoadConfig(), keep=keep, now=2.0)
    (restored,) = keep.restore_remotes(restarted)
    assert (restored.uid, restored.far_uid, restored.session_id - 1) == latest
    assert restored.verify_key == remote.verify_key
