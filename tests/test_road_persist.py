"""road.persist: a road stack's keep on disk (FileRoadKeep, open_estate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raetlike.errors import KeepError
from raetlike.keep import Keep
from raetlike.wire.kinds import Acceptance, AutoMode
from raetlike.wire.packet import parse_packet
from road import events
from road.persist import FileRoadKeep, open_estate
from road.stack import RoadConfig, RoadStack


def _pair(tmp_path: Path, auto: AutoMode = AutoMode.ONCE) -> tuple[RoadStack, RoadStack,
                                                                    FileRoadKeep, FileRoadKeep]:
    main_local, main_keep = open_estate(tmp_path / "m", "main", main=True,
                                        host_address=("127.0.0.1", 7530), auto=auto)
    minion_local, minion_keep = open_estate(tmp_path / "n", "minion", main=False,
                                            host_address=("127.0.0.1", 7531))
    main = RoadStack(main_local, RoadConfig(auto=auto), keep=main_keep)
    minion = RoadStack(minion_local, keep=minion_keep)
    main_keep.restore_remotes(main)
    minion_keep.restore_remotes(minion)
    return main, minion, main_keep, minion_keep


def _exchange(a: RoadStack, b: RoadStack, now: float, rounds: int = 20) -> None:
    """Carry datagrams between two stacks (perfect link) until both are quiet."""
    addresses = {a: ("127.0.0.1", 7530), b: ("127.0.0.1", 7531)}
    for _ in range(rounds):
        moved = False
        for sender, receiver in ((a, b), (b, a)):
            for data, _ in sender.datagrams_to_send(now):
                receiver.receive_datagram(data, addresses[sender], now)
                moved = True
        if not moved:
            return


def _events(stack: RoadStack) -> list[events.Event]:
    out = []
    while (event := stack.next_event()) is not None:
        out.append(event)
    return out


def test_open_estate_creates_keys_once_and_loads_them_after(tmp_path: Path) -> None:
    first, _ = open_estate(tmp_path, "alpha", main=True, host_address=("127.0.0.1", 1))
    again, _ = open_estate(tmp_path, "alpha", main=True, host_address=("127.0.0.1", 2))
    assert again.signing_key.verify_key == first.signing_key.verify_key
    assert again.private_key.public_key == first.private_key.public_key
    assert again.main is True
    assert Keep(tmp_path, "alpha").load_local().host_address == ("127.0.0.1", 2)  # type: ignore[union-attr]


def test_open_estate_names_the_corrupt_file_and_never_regenerates_keys(tmp_path: Path) -> None:
    open_estate(tmp_path, "alpha", main=False, host_address=("127.0.0.1", 1))
    role_file = tmp_path / "alpha" / "role" / "local" / "role.json"
    role_file.write_text("{not json")
    with pytest.raises(KeepError, match=r"role\.json"):
        open_estate(tmp_path, "alpha", main=False, host_address=("127.0.0.1", 1))
    assert role_file.read_text() == "{not json"


def test_open_estate_refuses_new_keys_for_a_known_estate(tmp_path: Path) -> None:
    open_estate(tmp_path, "alpha", main=False, host_address=("127.0.0.1", 1))
    (tmp_path / "alpha" / "role" / "local" / "role.json").unlink()
    with pytest.raises(KeepError, match="refusing to generate new keys"):
        open_estate(tmp_path, "alpha", main=False, host_address=("127.0.0.1", 1))


def test_a_join_writes_raet_layout_remote_records_on_both_sides(tmp_path: Path) -> None:
    main, minion, _, _ = _pair(tmp_path)
    minion.join(("127.0.0.1", 7530), now=0.0)
    _exchange(main, minion, 0.0)
    assert any(isinstance(e, events.Allowed) for e in _events(minion))
    record = json.loads((tmp_path / "n" / "minion" / "remote" / "estate.main.json").read_text())
    assert list(record) == ["name", "uid", "fuid", "ha", "iha", "natted", "fqdn", "dyned",
                            "sid", "main", "kind", "joined", "role"]
    assert record["name"] == "main"
    assert record["main"] is True
    assert record["fuid"] == main.remote("minion").uid
    role = Keep(tmp_path / "m", "main").load_role("minion")
    assert role is not None
    assert role.acceptance is Acceptance.ACCEPTED


def test_restored_remotes_keep_uids_and_advance_session_ids(tmp_path: Path) -> None:
    main, minion, _, _ = _pair(tmp_path)
    minion.join(("127.0.0.1", 7530), now=0.0)
    _exchange(main, minion, 0.0)
    kept = minion.remote("main")
    minion.keep.flush()
    _, minion_keep = open_estate(tmp_path / "n", "minion", main=False,
                                 host_address=("127.0.0.1", 7531))
    (restored,) = minion_keep.kept_remotes()
    assert (restored.uid, restored.far_uid, restored.name) == (kept.uid, kept.far_uid, "main")
    assert restored.session_id == kept.session_id + 1
    assert restored.verify_key == kept.verify_key


def test_a_restarted_minion_rejoins_its_main_non_vacuously(tmp_path: Path) -> None:
    main, minion, _, _ = _pair(tmp_path)
    minion.join(("127.0.0.1", 7530), now=0.0)
    _exchange(main, minion, 0.0)
    main_uid_for_minion = main.remote("minion").uid
    _events(main)
    minion.keep.flush()  # a stop, not a crash: what it kept is on disk (docs/keep.md)
    local, keep = open_estate(tmp_path / "n", "minion", main=False,
                              host_address=("127.0.0.1", 7531))
    restarted = RoadStack(local, keep=keep, now=1.0)
    keep.restore_remotes(restarted)
    restarted.join(("127.0.0.1", 7530), now=1.0)
    (request, _), *_ = restarted.datagrams_to_send(1.0)
    assert parse_packet(request).head.destination_uid == main_uid_for_minion  # not vacuous
    main.receive_datagram(request, ("127.0.0.1", 7531), 1.0)
    _exchange(main, restarted, 1.0)
    assert main.remote("minion").uid == main_uid_for_minion
    assert len(main.remotes) == 1
    assert any(isinstance(e, events.Allowed) for e in _events(restarted))


def test_an_operator_accept_in_the_keep_lets_a_pending_join_finish(tmp_path: Path) -> None:
    main, minion, _, _ = _pair(tmp_path, auto=AutoMode.NEVER)
    minion.join(("127.0.0.1", 7530), now=0.0)
    _exchange(main, minion, 0.0)
    assert any(isinstance(e, events.JoinPending) for e in _events(main))
    assert not minion.remote(next(iter(minion.names))).joined
    Keep(tmp_path / "m", "main").accept("minion")  # as `raetlike keys accept` does
    now = 0.0
    while now < 10.0 and not minion.remote(next(iter(minion.names))).allowed:
        now += 0.25
        main.handle_timer(now)
        minion.handle_timer(now)
        _exchange(main, minion, now)
    assert minion.remote("main").allowed


def test_a_remote_that_is_removed_loses_its_record(tmp_path: Path) -> None:
    main, minion, main_keep, _ = _pair(tmp_path)
    minion.join(("127.0.0.1", 7530), now=0.0)
    _exchange(main, minion, 0.0)
    path = tmp_path / "m" / "main" / "remote" / "estate.minion.json"
    main_keep.flush()
    assert path.exists()
    main_keep.remove_remote(main.remote("minion"))
    main_keep.flush()
    assert not path.exists()


def test_a_save_that_changes_nothing_on_disk_writes_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every keep file costs two fsyncs: a main of thousands of estates spent a third of its
    # time in them, re-writing records and capabilities that had not changed
    main, minion, main_keep, _ = _pair(tmp_path, AutoMode.ALWAYS)
    minion.join(("127.0.0.1", 7530), now=1.0)
    _exchange(main, minion, 1.0)
    remote = main.remote("minion")
    assert remote.allowed
    written: list[str] = []
    real = main_keep.keep.dump_remote
    real_traits = main_keep.keep.dump_remote_traits
    monkeypatch.setattr(main_keep.keep, "dump_remote",
                        lambda record: (written.append("record"), real(record))[1])
    monkeypatch.setattr(main_keep.keep, "dump_remote_traits",
                        lambda name, traits: (written.append("traits"),
                                              real_traits(name, traits))[1])
    main_keep.flush()  # (the join's own saves)
    written.clear()
    main_keep.save_remote(remote)
    main_keep.flush()
    assert written == []  # the same record, the same capabilities
    remote.session_id += 1
    main_keep.save_remote(remote)
    main_keep.flush()
    # the record changed: both files, as one write the keep writer may coalesce with a later
    assert written == ["record", "traits"]
    again = FileRoadKeep(Keep(tmp_path / "m", "main"))
    assert again.keep.load_remote("minion").session_id == remote.session_id
