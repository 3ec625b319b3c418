"""The layers of docs/design.md: imports point down only, and cores have no IO.

The stacks and the foundations never touch sockets, selectors, asyncio or a
clock (``time``): only the drivers do.  The messaging layer talks to channels,
never to sockets or drivers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

IO = {"socket", "select", "selectors", "asyncio", "time", "signal", "subprocess"}
DRIVERS = {"raetlike.udp", "raetlike.uxd", "raetlike.run", "raetlike.aio", "raetlike.flo",
           "raetlike.cli", "raetlike.estate", "raetlike.yard", "raetlike.ping",
           "raetlike.bench", "raetlike.chaos", "raetlike.demo", "raetlike.manor",
           "raetlike.swarm"}
FOUNDATIONS = {"raetlike.errors", "raetlike.wire", "raetlike.crypto", "raetlike.keep",
               "raetlike.dedup", "raetlike.names", "raetlike.localfiles"}
MESSAGING = {"raetlike.sp", "raetlike.bus"}

# layer -> (source paths, module prefixes it must not import)
RULES: dict[str, tuple[list[str], set[str]]] = {
    "foundations": (["raetlike/errors.py", "raetlike/wire", "raetlike/crypto.py",
                     "raetlike/keep", "raetlike/dedup.py", "raetlike/names.py",
                     "raetlike/localfiles.py"],
                    IO | DRIVERS | MESSAGING | {"road", "lane", "raetlike.journal",
                                                "raetlike.pipeline", "raetlike.channels"}),
    "stacks": (["road", "lane"],
               IO | DRIVERS | MESSAGING | {"raetlike.journal", "raetlike.pipeline",
                                           "raetlike.channels"}),
    "messaging": (["raetlike/sp"],
                  IO | DRIVERS | {"road", "lane", "raetlike.journal", "raetlike.pipeline"}),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in paths:
        path = ROOT / name
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return out


def _forbidden(module: str, banned: set[str]) -> bool:
    return any(module == b or module.startswith(b + ".") for b in banned)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_a_layer_imports_nothing_above_it_and_no_io(layer: str) -> None:
    paths, banned = RULES[layer]
    files = _files(paths)
    assert files, f"no sources found for {layer}"
    offences = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for line, module in _imports(path)
        if _forbidden(module, banned)
    ]
    assert not offences, "\n".join(offences)


def test_the_rule_catches_an_offending_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import socket\nfrom raetlike.run import Loop\nfrom road import stack\n")
    modules = [module for _, module in _imports(bad)]
    assert [m for m in modules if _forbidden(m, RULES["foundations"][1])] == [
        "socket", "raetlike.run", "road"]
