"""The layers of docs/design.md: imports point down only, and cores have no IO.

The stacks and the foundations never touch sockets, selectors, asyncio or a
clock (``time``): only the drivers do.  The messaging layer talks to channels,
never to sockets or drivers.  Inside the stacks no module imports, at run time, one
that imports it back (a cycle); imports for type checking only do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

IO = {"socket", "select", "selectors", "asyncio", "time", "signal", "subprocess"}
DRIVERS = {"raetlike.udp", "raetlike.uxd", "raetlike.run", "raetlike.aio", "raetlike.flo",
           "raetlike.cli", "raetlike.bench", "raetlike.chaos", "raetlike.demo", "raetlike.manor",
           "raetlike.swarm", "raetlike.hosting"}
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
    # the bus attaches to the stacks' events (raetlike/bus/_glue.py); hosting it on a
    # loop, a manor or sockets is the drivers' (raetlike/hosting.py)
    "bus": (["raetlike/bus"], IO | DRIVERS | {"raetlike.journal", "raetlike.pipeline"}),
    # the several-mains policy wraps a RoadStack, sans-IO like it (docs/multi-main.md)
    "multimain": (["raetlike/multimain.py"],
                  IO | DRIVERS | MESSAGING | {"lane", "raetlike.journal", "raetlike.pipeline",
                                              "raetlike.channels"}),
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


def _type_only(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports when run (not under
    ``if TYPE_CHECKING:``); ``from pkg import sub`` counts as ``pkg.sub``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_only(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                named = [f"{child.module}.{alias.name}" for alias in child.names]
                found.update(name for name in named if name in modules)
                if not all(name in modules for name in named):
                    found.add(child.module)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found & modules


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", ["road", "lane"])
def test_a_stack_s_modules_import_each_other_in_one_direction_only(package: str) -> None:
    files = _files([package])
    modules = {_module_name(path) for path in files}
    graph = {_module_name(path): _runtime_imports(path, modules) - {_module_name(path)}
             for path in files}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle_and_ignores_type_only_imports(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from pkg import a\n")
    modules = {"pkg.a", "pkg.b"}
    graph = {"pkg.a": _runtime_imports(tmp_path / "a.py", modules),
             "pkg.b": _runtime_imports(tmp_path / "b.py", modules)}
    assert _cycles(graph) == []
    graph["pkg.b"].add("pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]


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
