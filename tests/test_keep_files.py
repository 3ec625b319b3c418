"""Keep files are owner-only, written atomically, and never silently replaced when corrupt."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import KeepError, UnsafeKeepError
from raetlike.keep import Acceptance, Keep, LocalEstate, RemoteEstate, RemoteRole


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def an_estate() -> LocalEstate:
    return LocalEstate(
        name="alpha", uid=1, host_address=("127.0.0.1", 7530), role="alpha", last_uid=1
    )


def every_file_and_directory(root: Path) -> tuple[list[Path], list[Path]]:
    files, directories = [], [root]
    for parent, dirs, names in os.walk(root):
        directories += [Path(parent, d) for d in dirs]
        files += [Path(parent, n) for n in names]
    return files, directories


def filled_keep(base: Path) -> Keep:
    keep = Keep(base, "alpha")
    keep.create_local(an_estate())
    keep.dump_remote(RemoteEstate(name="beta", uid=2, host_address=("h", 1), role="beta"))
    keep.acceptance_for("beta", SigningKey.generate().verify_key, PrivateKey.generate().public_key)
    return keep


def test_keep_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        filled_keep(tmp_path)
    finally:
        os.umask(old)
    files, directories = every_file_and_directory(tmp_path / "alpha")
    assert len(files) == 4
    assert len(directories) == 6
    assert {mode(d) for d in directories} == {0o700}
    assert {mode(f) for f in files} == {0o600}


def test_a_keep_left_group_readable_by_raet_has_its_directories_tightened_on_open(
        tmp_path: Path) -> None:
    filled_keep(tmp_path)
    files, directories = every_file_and_directory(tmp_path / "alpha")
    for path in files + directories:
        path.chmod(0o755 if path.is_dir() else 0o644)
    keep = Keep(tmp_path, "alpha")
    assert {mode(d) for d in directories} == {0o700}
    assert keep.load_remotes() != {}  # others may read public keys and records: not secret
    with pytest.raises(UnsafeKeepError) as refused:
        keep.load_local_role()  # but not the private keys
    path = keep.local_role_path
    assert str(refused.value) == (f"keep file {path} is mode 0644: group or others may read "
                                  f"the private keys in it: fix: chmod 600 {path}")
    path.chmod(0o600)
    assert keep.load_local_role() is not None


def test_normal_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    for _ in range(3):
        keep.dump_local(an_estate())
        keep.reject("beta")
    files, _ = every_file_and_directory(keep.directory)
    assert sorted(f.name for f in files) == [
        "estate.beta.json",
        "estate.json",
        "role.beta.json",
        "role.json",
    ]


def test_a_half_written_temporary_file_is_ignored(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    before = keep.load_role("beta")
    # What a writer that crashed mid-write leaves behind, beside each kind of file.
    for path in (
        keep.remote_role_path("beta"),
        keep.remote_estate_path("gamma"),
        keep.local_estate_path,
    ):
        (path.parent / f".{path.name}.x1y2z3.tmp").write_text('{"role": "be')
    again = Keep(tmp_path, "alpha")
    assert again.load_role("beta") == before
    assert list(again.load_remotes()) == ["beta"]
    assert [r.role for r in again.list_roles()] == ["beta"]
    assert again.load_local() == an_estate()


def test_a_write_that_fails_before_the_rename_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep = filled_keep(tmp_path)
    before = keep.load_role("beta")
    assert before is not None

    def fail_to_replace(source: object, target: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail_to_replace)
    with pytest.raises(KeepError, match=r"role\.beta\.json"):
        keep.reject("beta")
    monkeypatch.undo()
    assert keep.load_role("beta") == before
    files, _ = every_file_and_directory(keep.directory)
    assert not [f for f in files if f.name.endswith(".tmp")]


@pytest.mark.parametrize("text", ["", "{", '{"role": ', "[1, 2]", "null", "\xff\xfe",
                                  "[" * 100_000])  # nested past the parser
def test_corrupt_json_raises_keep_error_naming_the_file(tmp_path: Path, text: str) -> None:
    keep = filled_keep(tmp_path)
    for path, load in [
        (keep.local_role_path, keep.load_local_role),
        (keep.local_estate_path, keep.load_local),
        (keep.remote_role_path("beta"), lambda: keep.load_role("beta")),
        (keep.remote_estate_path("beta"), lambda: keep.load_remote("beta")),
    ]:
        good = path.read_bytes()
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(KeepError, match=re.escape(str(path))):
            load()
        path.write_bytes(good)
    keep.local_role_path.write_text("{")
    with pytest.raises(KeepError, match=r"role\.json"):
        keep.load_local_role()
    assert keep.local_role_path.read_text() == "{"  # not regenerated behind our back
    with pytest.raises(KeepError, match="already exist"):
        keep.create_local(an_estate())


@pytest.mark.parametrize(
    ("field", "value", "complaint"),
    [
        ("sighex", "zz" * 32, "not valid hex"),
        ("sighex", "ab" * 16, "32 bytes"),
        ("prihex", None, "no keys"),
        ("role", 7, "'role' must be a string"),
    ],
)
def test_a_local_role_file_with_bad_fields_names_file_and_field(
    tmp_path: Path, field: str, value: object, complaint: str
) -> None:
    keep = filled_keep(tmp_path)
    data = json.loads(keep.local_role_path.read_text())
    data[field] = value
    keep.local_role_path.write_text(json.dumps(data))
    with pytest.raises(KeepError, match=complaint) as caught:
        keep.load_local_role()
    assert str(keep.local_role_path) in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("uid", "1"),
        ("uid", True),
        ("ha", ["h"]),
        ("ha", None),
        ("fuid", 1.5),
        ("main", "yes"),
        ("name", "a b"),
    ],
)
def test_a_remote_estate_file_with_bad_fields_raises_keep_error(
    tmp_path: Path, field: str, value: object
) -> None:
    keep = filled_keep(tmp_path)
    path = keep.remote_estate_path("beta")
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(KeepError, match=re.escape(str(path))):
        keep.load_remote("beta")
    with pytest.raises(KeepError, match=re.escape(str(path))):
        keep.load_remotes()


@pytest.mark.parametrize("value", [3, -1, "1", True])
def test_an_unknown_acceptance_raises_keep_error(tmp_path: Path, value: object) -> None:
    keep = filled_keep(tmp_path)
    path = keep.remote_role_path("beta")
    data = json.loads(path.read_text())
    data["acceptance"] = value
    path.write_text(json.dumps(data))
    with pytest.raises(KeepError, match="'acceptance'"):
        keep.acceptance_for(
            "beta", SigningKey.generate().verify_key, PrivateKey.generate().public_key
        )
    assert json.loads(path.read_text())["acceptance"] == value


def test_an_unreadable_keep_file_raises_keep_error_naming_it(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    keep.local_role_path.mkdir()  # a directory where the file should be: unreadable as root too
    with pytest.raises(KeepError, match=re.escape(str(keep.local_role_path))):
        keep.load_local_role()


def test_unknown_keys_written_by_others_are_ignored(tmp_path: Path) -> None:
    keep = filled_keep(tmp_path)
    path = keep.remote_role_path("beta")
    data = json.loads(path.read_text())
    data["comment"] = "added by hand"
    path.write_text(json.dumps(data))
    role = keep.load_role("beta")
    assert role is not None
    assert role.acceptance is Acceptance.ACCEPTED
    assert isinstance(role, RemoteRole)
