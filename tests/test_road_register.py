"""The register of remotes, on its own: three indexes kept consistent, uids handed out."""

from __future__ import annotations

import pytest

from raetlike.errors import LocalProtocolError
from road._register import Register
from road.remote import Remote


def _remote(register: Register, name: str, port: int) -> Remote:
    return Remote(uid=register.next_uid(), name=name, host_address=("127.0.0.1", port))


def test_add_rename_drop_keep_the_indexes_consistent() -> None:
    register = Register(local_uid=1)
    first, second = _remote(register, "a", 1), _remote(register, "b", 2)
    assert (first.uid, second.uid) == (2, 3)  # never ours
    register.add(first)
    register.add(second)
    with pytest.raises(LocalProtocolError, match="exists already"):
        register.add(Remote(uid=register.next_uid(), name="a", host_address=("::1", 3)))
    register.rename(first, "c")
    assert register.named("c") is first
    with pytest.raises(LocalProtocolError, match="no remote estate named 'a'"):
        register.named("a")
    register.joinees[("127.0.0.1", 1)] = first
    assert register.at(("127.0.0.1", 2)) is second
    register.drop(first)
    assert (register.by_uid, register.by_name, register.joinees) == (
        {second.uid: second}, {"b": second}, {})


def test_uids_wrap_past_the_top_and_skip_ours_and_taken_ones() -> None:
    register = Register(local_uid=1)
    register._last_uid = 0xFFFFFFFE
    assert register.next_uid() == 0xFFFFFFFF
    register.add(Remote(uid=2, name="x", host_address=("127.0.0.1", 9)))
    assert register.next_uid() == 3  # 1 is ours, 2 is taken
