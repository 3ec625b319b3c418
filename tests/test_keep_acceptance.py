"""Acceptance by role under each auto mode, and the operator's accept/reject/delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from raetlike.crypto import PrivateKey, PublicKey, SigningKey, VerifyKey
from raetlike.errors import KeepError
from raetlike.keep import Acceptance, AutoMode, Keep, RemoteRole

Keys = tuple[VerifyKey, PublicKey]


def new_keys() -> Keys:
    return SigningKey.generate().verify_key, PrivateKey.generate().public_key


@pytest.mark.parametrize(
    ("auto", "first"),
    [
        (AutoMode.NEVER, Acceptance.PENDING),
        (AutoMode.ONCE, Acceptance.ACCEPTED),
        (AutoMode.ALWAYS, Acceptance.ACCEPTED),
    ],
)
def test_first_sighting_is_decided_by_the_auto_mode_and_stored(
    tmp_path: Path, auto: AutoMode, first: Acceptance
) -> None:
    keep = Keep(tmp_path, "main", auto=auto)
    keys = new_keys()
    assert keep.acceptance_for("minion", *keys) is first
    assert keep.load_role("minion") == RemoteRole("minion", first, *keys)
    assert keep.acceptance_for("minion", *keys) is first


def test_never_keeps_a_role_pending_until_an_operator_accepts(tmp_path: Path) -> None:
    stack = Keep(tmp_path, "main", auto=AutoMode.NEVER)
    keys = new_keys()
    assert stack.acceptance_for("minion", *keys) is Acceptance.PENDING
    operator = Keep(tmp_path, "main")  # e.g. the CLI, in another process
    assert operator.list_roles() == [RemoteRole("minion", Acceptance.PENDING, *keys)]
    assert operator.accept("minion") == RemoteRole("minion", Acceptance.ACCEPTED, *keys)
    assert stack.reload_role("minion") == RemoteRole("minion", Acceptance.ACCEPTED, *keys)
    assert stack.acceptance_for("minion", *keys) is Acceptance.ACCEPTED


@pytest.mark.parametrize("auto", [AutoMode.NEVER, AutoMode.ONCE])
@pytest.mark.parametrize("stored", [Acceptance.PENDING, Acceptance.ACCEPTED])
def test_changed_keys_are_rejected_and_the_stored_keys_stay(
    tmp_path: Path, auto: AutoMode, stored: Acceptance
) -> None:
    keep = Keep(tmp_path, "main", auto=auto)
    keys = new_keys()
    keep.dump_role(RemoteRole("minion", stored, *keys))
    impostor = new_keys()
    assert keep.acceptance_for("minion", *impostor) is Acceptance.REJECTED
    assert keep.acceptance_for("minion", keys[0], impostor[1]) is Acceptance.REJECTED
    assert keep.load_role("minion") == RemoteRole("minion", stored, *keys)


def test_once_promotes_a_pending_role_with_the_same_keys(tmp_path: Path) -> None:
    keys = new_keys()
    assert Keep(tmp_path, "main", AutoMode.NEVER).acceptance_for("m", *keys) is Acceptance.PENDING
    once = Keep(tmp_path, "main", AutoMode.ONCE)
    assert once.acceptance_for("m", *keys) is Acceptance.ACCEPTED
    assert once.load_role("m") == RemoteRole("m", Acceptance.ACCEPTED, *keys)


@pytest.mark.parametrize("auto", [AutoMode.NEVER, AutoMode.ONCE])
def test_a_rejected_role_stays_rejected_even_with_its_own_keys(
    tmp_path: Path, auto: AutoMode
) -> None:
    keep = Keep(tmp_path, "main", auto=auto)
    keys = new_keys()
    keep.acceptance_for("minion", *keys)
    assert keep.reject("minion") == RemoteRole("minion", Acceptance.REJECTED, *keys)
    assert keep.acceptance_for("minion", *keys) is Acceptance.REJECTED
    assert keep.acceptance_for("minion", *new_keys()) is Acceptance.REJECTED
    assert keep.load_role("minion") == RemoteRole("minion", Acceptance.REJECTED, *keys)


def test_a_role_rejected_before_it_is_seen_is_refused_on_sight(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main", auto=AutoMode.ONCE)
    assert keep.reject("intruder") == RemoteRole("intruder", Acceptance.REJECTED)
    assert keep.acceptance_for("intruder", *new_keys()) is Acceptance.REJECTED


def test_always_accepts_changed_keys_and_stores_them(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main", auto=AutoMode.ALWAYS)
    keep.acceptance_for("minion", *new_keys())
    keep.reject("minion")
    changed = new_keys()
    assert keep.acceptance_for("minion", *changed) is Acceptance.ACCEPTED
    assert keep.load_role("minion") == RemoteRole("minion", Acceptance.ACCEPTED, *changed)


def test_delete_forgets_a_role_so_its_next_sighting_is_a_first_one(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main", auto=AutoMode.ONCE)
    keep.acceptance_for("minion", *new_keys())
    assert keep.delete("minion") is True
    assert keep.delete("minion") is False
    assert keep.list_roles() == []
    fresh = new_keys()
    assert keep.acceptance_for("minion", *fresh) is Acceptance.ACCEPTED
    assert keep.load_role("minion") == RemoteRole("minion", Acceptance.ACCEPTED, *fresh)


def test_accepting_a_role_without_keys_is_an_error(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main")
    with pytest.raises(KeepError, match="no keys"):
        keep.accept("nobody")
    keep.reject("banned")
    with pytest.raises(KeepError, match="no keys"):
        keep.accept("banned")


def test_a_role_stored_without_a_decision_counts_as_a_first_sighting(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main", auto=AutoMode.NEVER)
    keep.dump_role(RemoteRole("minion", None, *new_keys()))
    keys = new_keys()
    assert keep.acceptance_for("minion", *keys) is Acceptance.PENDING
    assert keep.load_role("minion") == RemoteRole("minion", Acceptance.PENDING, *keys)


def test_list_roles_shows_every_role_sorted(tmp_path: Path) -> None:
    keep = Keep(tmp_path, "main", auto=AutoMode.NEVER)
    for role in ("zeta", "alpha", "mu"):
        keep.acceptance_for(role, *new_keys())
    keep.reject("mu")
    listed = keep.list_roles()
    assert [(r.role, r.acceptance) for r in listed] == [
        ("alpha", Acceptance.PENDING),
        ("mu", Acceptance.REJECTED),
        ("zeta", Acceptance.PENDING),
    ]
    assert all(r.verify_key is not None and r.public_key is not None for r in listed)
