"""The admission of keys, on its own: the keep's verdict by role within its bounds."""

from __future__ import annotations

from raetlike.crypto import PrivateKey, PublicKey, SigningKey, VerifyKey
from raetlike.wire.kinds import Acceptance, AutoMode
from road.config import RoadConfig
from road.keeping import Admission, MemoryKeep


def _keys() -> tuple[VerifyKey, PublicKey]:
    return SigningKey.generate().verify_key, PrivateKey.generate().public_key


def test_at_most_max_pending_wait_and_they_expire_after_the_ttl() -> None:
    config = RoadConfig(max_pending_keys=2, pending_key_ttl=10.0)
    admission = Admission(MemoryKeep(AutoMode.NEVER), config)
    verdicts = [admission.verdict(f"r{n}", *_keys(), now=float(n)) for n in range(3)]
    assert verdicts == [Acceptance.PENDING, Acceptance.PENDING, None]  # one too many
    assert list(admission.since) == ["r0", "r1"]
    assert admission.verdict("r2", *_keys(), now=10.5) is Acceptance.PENDING
    assert admission.expired == 1  # r0 waited past the ttl and went (a sweep, lazily)
    assert list(admission.since) == ["r1", "r2"]
    config.max_pending_keys = 3  # read at each use, as the stack's config
    assert admission.verdict("r3", *_keys(), now=11.0) is Acceptance.PENDING


def test_a_role_first_accepted_by_a_join_is_forgotten_unless_proven() -> None:
    keep = MemoryKeep(AutoMode.ONCE)
    admission = Admission(keep, RoadConfig(unallowed_reap_after=60.0))
    unproven, proven = _keys(), _keys()
    assert admission.verdict("stranger", *unproven, now=0.0) is Acceptance.ACCEPTED
    assert admission.verdict("member", *proven, now=0.0) is Acceptance.ACCEPTED
    admission.proven("member")
    admission.forget_unproven(59.9)
    assert keep.role_status("stranger") is Acceptance.ACCEPTED  # held until its time
    admission.forget_unproven(60.0)
    assert keep.role_status("stranger") is None
    assert keep.role_status("member") is Acceptance.ACCEPTED


def test_a_join_that_claims_an_unproven_role_again_holds_it_longer() -> None:
    """Two strangers with one role and keys: the role stays as long as the later one may
    (``unallowed_reap_after`` after its join), not only as long as the first."""
    keep = MemoryKeep(AutoMode.ONCE)
    admission = Admission(keep, RoadConfig(unallowed_reap_after=60.0))
    keys = _keys()
    assert admission.verdict("shared", *keys, now=0.0) is Acceptance.ACCEPTED
    assert admission.verdict("shared", *keys, now=30.0) is Acceptance.ACCEPTED
    admission.forget_unproven(60.0)
    assert keep.role_status("shared") is Acceptance.ACCEPTED
    admission.forget_unproven(90.0)
    assert keep.role_status("shared") is None


def test_at_most_max_unproven_roles_are_held_the_one_due_first_goes_early() -> None:
    keep = MemoryKeep(AutoMode.ONCE)
    admission = Admission(keep, RoadConfig(max_unproven_roles=2))
    for n in range(3):
        assert admission.verdict(f"r{n}", *_keys(), now=float(n)) is Acceptance.ACCEPTED
    assert list(admission.unproven) == ["r1", "r2"]
    assert keep.role_status("r0") is None
