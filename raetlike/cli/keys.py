"""``raetlike keys``: list, accept, reject or delete remote keys in a keep (like salt-key).

Exit codes as every subcommand: 0 success, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raetlike.cli.estate import default_keep_dir
from raetlike.errors import KeepError
from raetlike.keep import Acceptance, Keep

__all__ = ["run_keys"]

EXIT_OK = 0


def _open_keep(directory: Path | None, estate: str | None) -> Keep:
    """The keep named by ``--keep`` (and ``--estate``), which must exist already."""
    base = (directory or default_keep_dir()).expanduser()
    if estate is not None:
        if not (base / estate / "local").is_dir():
            raise KeepError(f"{base / estate}: no keep of estate {estate!r}")
        return Keep(base, estate)
    if (base / "local").is_dir() and (base / "role").is_dir():
        return Keep(base.parent, base.name)
    if not base.is_dir():
        raise KeepError(f"{base}: no such keep directory")
    found = sorted(p.name for p in base.iterdir() if (p / "local").is_dir())
    if not found:
        raise KeepError(f"{base}: holds no estate keep")
    if len(found) > 1:
        raise KeepError(f"{base}: holds the keeps of {', '.join(found)}; pick one with --estate")
    return Keep(base, found[0])


def _role_of(keep: Keep, name: str, *, unknown_ok: bool = False) -> str:
    """``name`` as a role: a kept role, else the role of the remote estate so named."""
    if keep.load_role(name) is not None:
        return name
    remote = keep.load_remote(name)
    if remote is not None:
        return remote.role
    if unknown_ok:
        return name
    raise KeepError(f"{keep.directory}: no role or remote estate named {name!r}")


_STATUS = {
    Acceptance.PENDING: "pending",
    Acceptance.ACCEPTED: "accepted",
    Acceptance.REJECTED: "rejected",
    None: "pending",
}


def run_keys(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    keep = _open_keep(args.keep, args.estate)
    if args.action == "list":
        return _keys_list(keep, as_json=args.json)
    done: list[str] = []
    for role in _roles_to_change(keep, args, parser):
        if args.action == "accept":
            keep.accept(role)
        elif args.action == "reject":
            keep.reject(role)
        elif not keep.delete(role):
            raise KeepError(f"{keep.remote_role_path(role)}: no such role")
        done.append(role)
    verb = {"accept": "accepted", "reject": "rejected", "delete": "deleted"}[args.action]
    if args.json:
        print(json.dumps({"estate": keep.stack_name, verb: done}))
    else:
        for role in done:
            print(f"{verb} {role}")
        if not done:
            print(f"no pending roles to {args.action}")
    return EXIT_OK


def _roles_to_change(keep: Keep, args: argparse.Namespace,
                     parser: argparse.ArgumentParser) -> list[str]:
    if args.all and args.action in {"accept", "reject"}:
        if args.role is not None:
            parser.error(f"keys {args.action}: give NAME or --all, not both")
        return [r.role for r in keep.list_roles() if _STATUS[r.acceptance] == "pending"]
    if args.role is None:
        parser.error(f"keys {args.action}: NAME|ROLE is required")
    return [_role_of(keep, args.role, unknown_ok=args.action == "reject")]


def _keys_list(keep: Keep, *, as_json: bool) -> int:
    groups: dict[str, list[dict[str, str]]] = {"pending": [], "accepted": [], "rejected": []}
    for record in keep.list_roles():
        groups[_STATUS[record.acceptance]].append({
            "role": record.role,
            "verify_key": "" if record.verify_key is None else record.verify_key.hex(),
        })
    if as_json:
        print(json.dumps({"estate": keep.stack_name,
                          **{status: [r["role"] for r in rows] for status, rows in groups.items()},
                          "keys": groups}))
        return EXIT_OK
    for status, rows in groups.items():
        print(f"{status.capitalize()} roles:")
        for row in rows:
            print(f"  {row['role']}  {row['verify_key'][:16]}")
    return EXIT_OK
