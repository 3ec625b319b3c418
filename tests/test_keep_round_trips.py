"""Keep records survive a dump and a load, and the keep lays files out as RAET does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import KeepError
from raetlike.keep import (
    Acceptance,
    Keep,
    LocalEstate,
    LocalRole,
    RemoteEstate,
    RemoteRole,
    StackTraits,
)


def a_local_estate() -> LocalEstate:
    return LocalEstate(
        name="alpha",
        uid=3,
        host_address=("10.0.0.1", 7530),
        role="alpha-role",
        last_uid=7,
        session_id=12,
        inner_host_address=("192.168.1.5", 7530),
        natted=True,
        fqdn="alpha.example.com",
        dynamic=False,
        listen_host_address=("127.0.0.2", 7530),
    )


def a_remote_estate(name: str = "beta", role: str = "beta-role") -> RemoteEstate:
    return RemoteEstate(
        name=name,
        uid=4,
        host_address=("10.0.0.2", 7531),
        role=role,
        far_uid=9,
        session_id=5,
        main=True,
        kind=2,
        joined=True,
        fqdn="beta.example.com",
    )


def test_local_estate_and_keys_round_trip(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    estate = a_local_estate()
    keys = LocalRole("alpha-role", SigningKey.generate(), PrivateKey.generate())
    keep.dump_local(estate)
    keep.dump_local_role(keys)
    again = Keep(tmp_path, "alpha")
    assert again.load_local() == estate
    assert again.load_local_role() == keys


def test_an_empty_keep_has_no_local_estate_keys_remotes_or_roles(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    assert keep.load_local() is None
    assert keep.load_local_role() is None
    assert keep.load_remotes() == {}
    assert keep.list_roles() == []
    assert keep.load_role("nobody") is None
    assert keep.load_stack_traits() == StackTraits()


def test_files_are_where_raet_puts_them_with_raets_keys(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    keep.dump_local(a_local_estate())
    keep.create_local(a_local_estate(), replace=True)
    keep.dump_remote(a_remote_estate())
    keep.acceptance_for(
        "beta-role", SigningKey.generate().verify_key, PrivateKey.generate().public_key
    )
    base = tmp_path / "alpha"
    local = json.loads((base / "local" / "estate.json").read_text())
    assert list(local) == [
        "name",
        "uid",
        "ha",
        "iha",
        "natted",
        "fqdn",
        "dyned",
        "sid",
        "puid",
        "aha",
        "role",
    ]
    assert local["ha"] == ["10.0.0.1", 7530]
    assert local["puid"] == 7
    role = json.loads((base / "role" / "local" / "role.json").read_text())
    assert list(role) == ["role", "sighex", "prihex"]
    remote = json.loads((base / "remote" / "estate.beta.json").read_text())
    assert list(remote) == [
        "name",
        "uid",
        "fuid",
        "ha",
        "iha",
        "natted",
        "fqdn",
        "dyned",
        "sid",
        "main",
        "kind",
        "joined",
        "role",
    ]
    assert remote["fuid"] == 9
    remote_role = json.loads((base / "role" / "remote" / "role.beta-role.json").read_text())
    assert list(remote_role) == ["role", "acceptance", "verhex", "pubhex"]
    assert remote_role["acceptance"] == 1


def test_listen_address_defaults_to_the_host_address() -> None:
    estate = LocalEstate(name="a", uid=1, host_address=("h", 1), role="a", last_uid=1)
    assert estate.listen_host_address == ("h", 1)
    assert estate.to_json()["aha"] == ["h", 1]


def test_remote_estates_round_trip_list_and_remove(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    beta, gamma = a_remote_estate("beta"), a_remote_estate("gamma.example.com", "gamma")
    keep.dump_remote(beta)
    keep.dump_remote(gamma)
    assert keep.load_remote("beta") == beta
    assert keep.load_remotes() == {"beta": beta, "gamma.example.com": gamma}
    assert keep.remove_remote("beta") is True
    assert keep.remove_remote("beta") is False
    assert keep.load_remote("beta") is None
    assert list(keep.load_remotes()) == ["gamma.example.com"]


def test_remote_roles_round_trip_with_and_without_keys(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    signer, private = SigningKey.generate(), PrivateKey.generate()
    full = RemoteRole("beta", Acceptance.PENDING, signer.verify_key, private.public_key)
    bare = RemoteRole("gamma")
    keep.dump_role(full)
    keep.dump_role(bare)
    assert keep.load_role("beta") == full
    assert keep.load_role("gamma") == bare
    assert keep.list_roles() == [full, bare]
    assert json.loads(keep.remote_role_path("gamma").read_text())["verhex"] == ""


def test_stack_traits_round_trip_beside_the_estate(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    traits = StackTraits(main=True, kind=4, mutable=False)
    keep.dump_stack_traits(traits)
    assert Keep(tmp_path, "alpha").load_stack_traits() == traits


def test_create_local_generates_keys_once_and_refuses_to_replace_them(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "alpha")
    keys = keep.create_local(a_local_estate())
    assert keys.role == "alpha-role"
    assert keep.load_local_role() == keys
    assert keep.load_local() == a_local_estate()
    with pytest.raises(KeepError, match="already exist"):
        keep.create_local(a_local_estate())
    assert keep.load_local_role() == keys
    replaced = keep.create_local(a_local_estate(), replace=True)
    assert replaced != keys
    assert keep.load_local_role() == replaced


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "a\\b", "a\x00b"])
def test_names_that_cannot_name_a_file_are_refused(tmp_path: Path, name: str) -> None:
    keep = Keep(tmp_path, "alpha")
    with pytest.raises(KeepError, match="invalid"):
        keep.load_remote(name)
    with pytest.raises(KeepError, match="invalid"):
        keep.reject(name)
    with pytest.raises(KeepError, match="invalid"):
        Keep(tmp_path, name)
