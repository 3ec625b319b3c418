"""A keep written by live RAET 0.6.8 loads in raetlike, and RAET 0.6.8 loads ours.

One RAET subprocess does all the RAET work: it writes a keep of its own
(``raetstack``) and opens the keep raetlike wrote (``ourstack``), reporting
what it restored and how its own ``statusRole`` judges keys against it.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from raetlike.crypto import PrivateKey, SigningKey
from raetlike.errors import UnsafeKeepError
from raetlike.keep import (
    Acceptance,
    AutoMode,
    Keep,
    LocalEstate,
    LocalRole,
    RemoteEstate,
    RemoteRole,
)
from tests.raetpeer import run_raet

pytestmark = pytest.mark.interop

SIGNERS = {
    name: SigningKey(bytes([n]) * 32)
    for n, name in enumerate(["raetstack", "beta", "gamma", "delta", "ourstack", "zeta"], start=1)
}
PRIVATES = {name: PrivateKey(bytes([n + 100]) * 32) for n, name in enumerate(SIGNERS, start=1)}


def keys_of(name: str) -> dict[str, str]:
    return {"verhex": SIGNERS[name].verify_key.hex(), "pubhex": PRIVATES[name].public_key.hex()}


RAET_SCRIPT = r"""
import os
from raet.road import stacking, estating
inp = load_input()
out = {}

# --- 1. RAET writes a keep of its own -------------------------------------------
stack = stacking.RoadStack(name="raetstack", ha=("127.0.0.1", 0), basedirpath=inp["raet_base"],
                           sigkey=inp["raetstack"]["sighex"], prikey=inp["raetstack"]["prihex"],
                           role="raetstack-role", uid=1, auto=1)
stack.server.close()
for spec in inp["remotes"]:
    remote = estating.RemoteEstate(stack=stack, name=spec["name"], ha=tuple(spec["ha"]),
                                   fuid=spec["fuid"], main=spec["main"], kind=spec["kind"],
                                   joined=spec["joined"], sid=spec["sid"], role=spec["role"],
                                   verkey=spec["verhex"], pubkey=spec["pubhex"])
    stack.addRemote(remote, dump=True)
    {"accepted": stack.keep.acceptRemote, "pending": stack.keep.pendRemote,
     "rejected": stack.keep.rejectRemote, "none": stack.dumpRemoteRole}[spec["status"]](remote)
    out.setdefault("raet_uids", {})[spec["name"]] = remote.uid
stack.dumpLocal()
out["raet_puid"] = stack.puid

# --- 2. RAET opens the keep raetlike wrote ---------------------------------------
ours = stacking.RoadStack(name="ourstack", ha=("127.0.0.1", 0), basedirpath=inp["our_base"])
ours.server.close()
local = ours.local
out["local"] = {"name": local.name, "uid": local.uid, "ha": list(local.ha), "sid": local.sid,
                "role": local.role, "puid": ours.puid,
                "sighex": local.signer.keyhex.decode(), "prihex": local.priver.keyhex.decode()}
out["remotes"] = {
    r.name: {"uid": r.uid, "fuid": r.fuid, "ha": list(r.ha), "sid": r.sid, "main": r.main,
             "kind": r.kind, "joined": r.joined, "role": r.role, "acceptance": r.acceptance,
             "verhex": r.verfer.keyhex.decode(), "pubhex": r.pubber.keyhex.decode()}
    for r in ours.remotes.values()}
verdicts = []
for auto in (0, 1, 2):
    ours.keep.auto = auto
    for role, keys in inp["probes"]:
        status = ours.keep.statusRole(role, keys["verhex"], keys["pubhex"], dump=False)
        verdicts.append([auto, role, keys["verhex"], status])
out["verdicts"] = verdicts
emit(out)
"""

RAET_REMOTES = [
    {
        "name": "beta",
        "ha": ["10.0.0.2", 7531],
        "fuid": 9,
        "main": True,
        "kind": 3,
        "joined": True,
        "sid": 4,
        "role": "beta-role",
        "status": "accepted",
        **keys_of("beta"),
    },
    {
        "name": "beta.two",
        "ha": ["10.0.0.3", 7532],
        "fuid": 0,
        "main": False,
        "kind": 0,
        "joined": None,
        "sid": 0,
        "role": "beta-role",
        "status": "accepted",
        **keys_of("beta"),
    },
    {
        "name": "gamma",
        "ha": ["10.0.0.4", 7533],
        "fuid": 2,
        "main": False,
        "kind": 1,
        "joined": False,
        "sid": 7,
        "role": "gamma-role",
        "status": "pending",
        **keys_of("gamma"),
    },
    {
        "name": "delta",
        "ha": ["10.0.0.5", 7534],
        "fuid": 3,
        "main": None,
        "kind": None,
        "joined": True,
        "sid": 1,
        "role": "delta-role",
        "status": "rejected",
        **keys_of("delta"),
    },
    {
        "name": "zeta",
        "ha": ["10.0.0.6", 7535],
        "fuid": 0,
        "main": False,
        "kind": 0,
        "joined": None,
        "sid": 0,
        "role": "zeta-role",
        "status": "none",
        **keys_of("zeta"),
    },
]

OUR_LOCAL = LocalEstate(
    name="ourstack",
    uid=2,
    host_address=("127.0.0.1", 7540),
    role="ourstack-role",
    last_uid=9,
    session_id=3,
    listen_host_address=("127.0.0.1", 0),
)
OUR_REMOTES = [
    RemoteEstate(
        name="beta",
        fqdn="beta.example.com",
        uid=5,
        host_address=("10.0.0.2", 7531),
        role="beta-role",
        far_uid=9,
        session_id=4,
        main=True,
        kind=3,
        joined=True,
    ),
    RemoteEstate(
        name="gamma",
        fqdn="gamma.example.com",
        uid=6,
        host_address=("10.0.0.4", 7533),
        role="gamma-role",
        far_uid=2,
        session_id=7,
        main=False,
        kind=1,
        joined=False,
    ),
    RemoteEstate(
        name="delta",
        fqdn="delta.example.com",
        uid=7,
        host_address=("10.0.0.5", 7534),
        role="delta-role",
        far_uid=3,
        session_id=1,
        main=False,
        kind=0,
        joined=None,
    ),
]
OUR_ROLES = {
    "beta-role": ("beta", Acceptance.ACCEPTED),
    "gamma-role": ("gamma", Acceptance.PENDING),
    "delta-role": ("delta", Acceptance.REJECTED),
}


def write_our_keep(base: Path) -> Keep:
    keep = Keep(base, "ourstack", auto=AutoMode.NEVER)
    keep.dump_local(OUR_LOCAL)
    keep.dump_local_role(LocalRole("ourstack-role", SIGNERS["ourstack"], PRIVATES["ourstack"]))
    for remote in OUR_REMOTES:
        keep.dump_remote(remote)
    for role, (owner, acceptance) in OUR_ROLES.items():
        keep.dump_role(
            RemoteRole(role, acceptance, SIGNERS[owner].verify_key, PRIVATES[owner].public_key)
        )
    return keep


# Keys each role presents in the acceptance probes: its own, and an impostor's.
PROBES = [
    (role, keys_of(who))
    for role in [*OUR_ROLES, "new-role"]
    for who in (OUR_ROLES.get(role, ("beta", None))[0], "raetstack")
]


@pytest.fixture(scope="module")
def raet_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("keeps")
    our_base, raet_base, pristine = root / "ours", root / "raet", root / "pristine"
    write_our_keep(our_base)
    shutil.copytree(our_base, pristine)
    payload = {
        "raet_base": str(raet_base),
        "our_base": str(our_base),
        "remotes": RAET_REMOTES,
        "raetstack": {"sighex": SIGNERS["raetstack"].hex(), "prihex": PRIVATES["raetstack"].hex()},
        "probes": PROBES,
    }
    result: dict[str, Any] = run_raet(RAET_SCRIPT, payload)
    result.update(root=root, our_base=our_base, raet_base=raet_base, pristine=pristine)
    return result


def test_a_keep_written_by_raet_loads_with_its_names_uids_and_keys(
    raet_run: dict[str, Any],
) -> None:
    keep = Keep(raet_run["raet_base"], "raetstack")
    local = keep.load_local()
    assert local is not None
    assert (local.name, local.uid, local.role) == ("raetstack", 1, "raetstack-role")
    assert local.last_uid == raet_run["raet_puid"]
    # RAET writes its private keys with the umask's mode (0644 under the usual 022):
    # raetlike refuses them, saying how to fix it, as OpenSSH does with a private key
    keep.local_role_path.chmod(0o644)
    with pytest.raises(UnsafeKeepError, match=r"is mode 0644: .* fix: chmod 600 "):
        keep.load_local_role()
    keep.local_role_path.chmod(0o600)
    assert keep.load_local_role() == LocalRole(
        "raetstack-role", SIGNERS["raetstack"], PRIVATES["raetstack"]
    )
    remotes = keep.load_remotes()
    assert sorted(remotes) == sorted(spec["name"] for spec in RAET_REMOTES)
    for spec in RAET_REMOTES:
        remote = remotes[spec["name"]]
        assert remote.uid == raet_run["raet_uids"][spec["name"]]
        assert remote.host_address == tuple(spec["ha"])
        assert (
            remote.far_uid,
            remote.main,
            remote.kind,
            remote.joined,
            remote.session_id,
            remote.role,
        ) == (spec["fuid"], spec["main"], spec["kind"], spec["joined"], spec["sid"], spec["role"])


def test_a_keep_written_by_raet_loads_with_its_acceptances(raet_run: dict[str, Any]) -> None:
    keep = Keep(raet_run["raet_base"], "raetstack")
    assert keep.list_roles() == [
        RemoteRole(
            "beta-role",
            Acceptance.ACCEPTED,
            SIGNERS["beta"].verify_key,
            PRIVATES["beta"].public_key,
        ),
        RemoteRole(
            "delta-role",
            Acceptance.REJECTED,
            SIGNERS["delta"].verify_key,
            PRIVATES["delta"].public_key,
        ),
        RemoteRole(
            "gamma-role",
            Acceptance.PENDING,
            SIGNERS["gamma"].verify_key,
            PRIVATES["gamma"].public_key,
        ),
        RemoteRole("zeta-role", None, SIGNERS["zeta"].verify_key, PRIVATES["zeta"].public_key),
    ]
    beta = keep.load_role("beta-role")
    assert beta is not None
    assert (
        keep.acceptance_for("beta-role", SIGNERS["beta"].verify_key, PRIVATES["beta"].public_key)
        is Acceptance.ACCEPTED
    )


def test_raet_loads_the_local_estate_and_keys_raetlike_wrote(raet_run: dict[str, Any]) -> None:
    assert raet_run["local"] == {
        "name": "ourstack",
        "uid": 2,
        "ha": ["127.0.0.1", 7540],
        "sid": 3,
        "role": "ourstack-role",
        "puid": 9,
        "sighex": SIGNERS["ourstack"].hex(),
        "prihex": PRIVATES["ourstack"].hex(),
    }


def test_raet_loads_the_remotes_and_roles_raetlike_wrote(raet_run: dict[str, Any]) -> None:
    expected = {
        remote.name: {
            "uid": remote.uid,
            "fuid": remote.far_uid,
            "ha": list(remote.host_address),
            # RAET starts a new session with every kept remote when it restarts.
            "sid": remote.session_id + 1,
            "main": remote.main,
            "kind": remote.kind,
            "joined": remote.joined,
            "role": remote.role,
            "acceptance": int(OUR_ROLES[remote.role][1]),
            **keys_of(OUR_ROLES[remote.role][0]),
        }
        for remote in OUR_REMOTES
    }
    assert raet_run["remotes"] == expected


def test_raet_rewriting_our_keep_changes_nothing_raetlike_reads(
    raet_run: dict[str, Any],
) -> None:
    rewritten, pristine = (
        Keep(raet_run["our_base"], "ourstack"),
        Keep(raet_run["pristine"], "ourstack"),
    )
    assert rewritten.load_local_role() == pristine.load_local_role()
    assert rewritten.load_remotes() == {
        name: replace(remote, session_id=remote.session_id + 1)
        for name, remote in pristine.load_remotes().items()
    }
    assert rewritten.list_roles() == pristine.list_roles()
    local = rewritten.load_local()
    assert local is not None
    assert (local.name, local.uid, local.role, local.last_uid, local.session_id) == (
        "ourstack",
        2,
        "ourstack-role",
        9,
        3,
    )


def test_raetlike_and_raet_judge_keys_against_a_keep_alike(
    raet_run: dict[str, Any],
    tmp_path: Path,
) -> None:
    verdicts = raet_run["verdicts"]
    assert len(verdicts) == 3 * len(PROBES)
    for auto, role, verhex, raet_status in verdicts:
        copy = tmp_path / f"{auto}-{role}-{verhex[:8]}"
        shutil.copytree(raet_run["pristine"], copy)
        keep = Keep(copy, "ourstack", auto=AutoMode(auto))
        who = next(name for name in SIGNERS if SIGNERS[name].verify_key.hex() == verhex)
        ours = keep.acceptance_for(role, SIGNERS[who].verify_key, PRIVATES[who].public_key)
        assert (auto, role, who, ours) == (auto, role, who, Acceptance(raet_status))
