"""Lane and keep directories, and keep files, that another local user could change are refused.

The rules of :mod:`raetlike.localfiles`: owned by the running user, not
writable by group or others, private keys not readable by them either; the
refusal is one line naming the path and the fix.  Ownership by another user
is tested two ways: through the check's ``uid`` parameter (any user), and
with a directory really chowned to another uid (only as root).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane import LaneStack, LocalYard
from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import KeepError, UnsafeKeepError, UnsafePathError
from raetlike.keep import Acceptance, Keep, LocalEstate
from raetlike.localfiles import check_private, default_lane_dir, make_private_directory
from raetlike.uxd import UxdDriver
from road.persist import FileRoadKeep

OTHER_UID = 54321  # no such user needed: root can chown to any uid
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can chown to another uid")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def a_directory(parent: Path, name: str, directory_mode: int) -> Path:
    path = parent / name
    path.mkdir()
    path.chmod(directory_mode)
    return path


# -- the check ----------------------------------------------------------------------------

def test_a_directory_of_our_own_that_others_cannot_write_passes(tmp_path: Path) -> None:
    for directory_mode in (0o700, 0o750, 0o755):
        path = a_directory(tmp_path, f"d{directory_mode:o}", directory_mode)
        assert check_private(path, "lane directory").st_uid == os.geteuid()


@pytest.mark.parametrize("directory_mode", [0o777, 0o770, 0o730, 0o703, 0o1777])
def test_a_directory_group_or_others_may_write_is_refused_naming_chmod_700(
        tmp_path: Path, directory_mode: int) -> None:
    path = a_directory(tmp_path, "lanes", directory_mode)
    with pytest.raises(UnsafePathError) as refused:
        check_private(path, "lane directory")
    assert str(refused.value) == (
        f"lane directory {path} is mode {directory_mode:04o}, writable by group or others: "
        f"fix: chmod 700 {path}")
    assert refused.value.path == str(path)


def test_a_directory_owned_by_another_uid_is_refused_naming_chown(tmp_path: Path) -> None:
    path = a_directory(tmp_path, "lanes", 0o700)
    expected = os.geteuid() + 1
    with pytest.raises(UnsafePathError) as refused:
        check_private(path, "keep directory", uid=expected)
    assert str(refused.value) == (
        f"keep directory {path} is owned by uid {os.geteuid()}, not by uid {expected} "
        f"(the running user): fix: chown {expected} {path} (or use a directory of your own)")


@as_root
def test_as_root_a_directory_chowned_to_another_uid_is_refused(tmp_path: Path) -> None:
    path = a_directory(tmp_path, "planted", 0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafePathError, match=f"owned by uid {OTHER_UID}, not by uid 0 "):
        check_private(path, "lane directory")


def test_a_file_of_private_keys_others_may_read_is_refused_naming_chmod_600(
        tmp_path: Path) -> None:
    path = tmp_path / "role.json"
    path.write_text("{}")
    path.chmod(0o640)
    check_private(path, "keep file")  # readable by the group: fine for a public record
    with pytest.raises(UnsafePathError) as refused:
        check_private(path, "keep file", secret=True)
    assert str(refused.value).endswith(f"fix: chmod 600 {path}")
    path.chmod(0o620)
    with pytest.raises(UnsafePathError, match="writable by group or others: fix: chmod 600 "):
        check_private(path, "keep file")


def test_a_path_with_a_control_character_is_shown_escaped(tmp_path: Path) -> None:
    path = a_directory(tmp_path, "bad\x1b[31m", 0o777)
    with pytest.raises(UnsafePathError) as refused:
        check_private(path, "lane directory")
    assert "\x1b" not in str(refused.value)
    assert "\\x1b[31m" in str(refused.value)


def test_a_shell_unsafe_path_is_quoted_in_the_fix(tmp_path: Path) -> None:
    path = a_directory(tmp_path, "my lanes", 0o777)
    with pytest.raises(UnsafePathError) as refused:
        check_private(path, "lane directory")
    assert str(refused.value).endswith(f"fix: chmod 700 '{path}'")


# -- making directories -------------------------------------------------------------------

def test_a_missing_directory_is_made_0700_whatever_the_umask(
        tmp_path: Path, loose_umask: None) -> None:
    path = tmp_path / "parent" / "lanes"
    make_private_directory(path, "lane directory")
    assert mode(path) == 0o700


def test_an_existing_unsafe_directory_is_refused_not_adopted(tmp_path: Path) -> None:
    path = a_directory(tmp_path, "lanes", 0o777)
    with pytest.raises(UnsafePathError, match="chmod 700"):
        make_private_directory(path, "lane directory")
    assert mode(path) == 0o777  # refused, not silently changed


def test_a_file_where_a_directory_should_be_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lanes"
    path.write_text("")
    path.chmod(0o600)
    with pytest.raises(UnsafePathError, match="is not a directory"):
        make_private_directory(path, "lane directory")


# -- the default lane directory -----------------------------------------------------------

def test_the_default_lane_directory_is_under_xdg_runtime_dir_when_it_is_safe(
        tmp_path: Path) -> None:
    runtime = a_directory(tmp_path, "run", 0o700)
    assert default_lane_dir({"XDG_RUNTIME_DIR": str(runtime)}) == str(runtime / "raetlike")


@pytest.mark.parametrize("runtime", ["", "relative/run", "/nonexistent/run", "UNSAFE"])
def test_otherwise_the_default_lane_directory_is_per_uid_under_tmp(
        tmp_path: Path, runtime: str) -> None:
    if runtime == "UNSAFE":
        runtime = str(a_directory(tmp_path, "run", 0o777))
    chosen = default_lane_dir({"XDG_RUNTIME_DIR": runtime} if runtime else {})
    assert Path(chosen).name == f"raetlike-{os.geteuid()}"
    assert default_lane_dir({}, uid=1234).endswith("/raetlike-1234")


def test_a_runtime_dir_of_another_user_is_not_used(tmp_path: Path) -> None:
    runtime = a_directory(tmp_path, "run", 0o700)
    chosen = default_lane_dir({"XDG_RUNTIME_DIR": str(runtime)}, uid=os.geteuid() + 1)
    assert chosen.endswith(f"/raetlike-{os.geteuid() + 1}")


def test_a_yard_without_a_directory_uses_the_default_lane_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = a_directory(tmp_path, "run", 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    yard = LocalYard("worker", "jobs")
    assert yard.path == str(runtime / "raetlike" / "jobs.worker.uxd")


# -- the lane driver ----------------------------------------------------------------------

@pytest.mark.parametrize("directory_mode", [0o777, 0o770])
def test_a_yard_refuses_a_lane_directory_others_may_write(
        tmp_path: Path, directory_mode: int) -> None:
    lanes = a_directory(tmp_path, "lanes", directory_mode)
    stack = LaneStack(LocalYard("worker", "jobs", str(lanes)))
    with pytest.raises(UnsafePathError, match=f"lane directory {lanes} is mode "):
        UxdDriver(stack)
    assert list(lanes.iterdir()) == []  # no socket was bound there


@as_root
def test_a_yard_refuses_a_lane_directory_another_user_made_first(tmp_path: Path) -> None:
    lanes = a_directory(tmp_path, "lanes", 0o700)
    os.chown(lanes, OTHER_UID, OTHER_UID)  # another user won the race to create it
    stack = LaneStack(LocalYard("worker", "jobs", str(lanes)))
    with pytest.raises(UnsafePathError, match=f"owned by uid {OTHER_UID}"):
        UxdDriver(stack)


def test_a_yard_makes_a_missing_lane_directory_0700_and_binds_there(
        tmp_path: Path, loose_umask: None) -> None:
    lanes = tmp_path / "lanes"
    driver = UxdDriver(LaneStack(LocalYard("worker", "jobs", str(lanes))))
    try:
        assert mode(lanes) == 0o700
        assert (lanes / "jobs.worker.uxd").is_socket()
    finally:
        driver.close()


# -- the keep -----------------------------------------------------------------------------

def filled_keep(base: Path) -> Keep:
    keep = Keep(base, "main")
    keep.create_local(LocalEstate(name="main", uid=1, host_address=("127.0.0.1", 7530),
                                  role="main", last_uid=1))
    return keep


@pytest.mark.parametrize("directory_mode", [0o777, 0o770])
def test_a_keep_base_directory_others_may_write_is_refused(
        tmp_path: Path, directory_mode: int) -> None:
    base = a_directory(tmp_path, "keep", directory_mode)
    with pytest.raises(UnsafeKeepError, match=f"keep directory {base} is mode "):
        Keep(base, "main")
    assert list(base.iterdir()) == []


@pytest.mark.parametrize("where", [".", "local", "role/local", "role/remote"])
def test_a_keep_directory_others_may_write_is_refused_not_tightened(
        tmp_path: Path, where: str) -> None:
    keep = filled_keep(tmp_path)
    unsafe = (keep.directory / where).resolve()
    unsafe.chmod(0o770)
    with pytest.raises(UnsafeKeepError) as refused:
        Keep(tmp_path, "main")
    assert str(refused.value).endswith(f"fix: chmod 700 {unsafe}")
    assert isinstance(refused.value, KeepError)  # whoever handles keep errors handles this
    assert mode(unsafe) == 0o770


def test_a_private_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    keep.local_role_path.chmod(0o604)
    with pytest.raises(UnsafeKeepError, match="may read the private keys in it: fix: chmod 600"):
        Keep(tmp_path, "main").load_local_role()


def test_a_role_file_others_may_write_is_not_trusted_to_accept_keys(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    verify_key, public_key = SigningKey.generate().verify_key, PrivateKey.generate().public_key
    keep.acceptance_for("minion", verify_key, public_key)
    keep.accept("minion")
    keep.remote_role_path("minion").chmod(0o666)  # anyone could have written "accepted"
    with pytest.raises(UnsafeKeepError, match="writable by group or others"):
        keep.load_role("minion")
    road_keep = FileRoadKeep(keep)
    assert road_keep.acceptance_for("minion", verify_key, public_key) is Acceptance.REJECTED


@as_root
def test_as_root_a_keep_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    planted = filled_keep(tmp_path)  # as if another user had made it under a shared base
    for parent, dirs, files in os.walk(planted.directory):
        for name in [".", *dirs, *files]:
            os.chown(Path(parent, name), OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeKeepError) as refused:
        Keep(tmp_path, "main")
    assert str(refused.value) == (
        f"keep directory {planted.directory} is owned by uid {OTHER_UID}, not by uid 0 "
        f"(the running user): fix: chown 0 {planted.directory} (or use a directory of your "
        f"own)")


@as_root
def test_as_root_a_keep_file_of_another_user_is_refused(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    os.chown(keep.local_estate_path, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeKeepError, match=f"keep file .* is owned by uid {OTHER_UID}"):
        keep.load_local()
