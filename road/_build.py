"""Which build of fast mode runs: the modules mypyc compiled at install, or their sources.

setup.py compiles road's fast mode with mypyc when it can and records a digest of each
source it compiled (``road/_compiled_sources.json``).  Before any of those modules is
imported, :func:`choose` decides: the sources run instead of the compiled modules when
``RAETLIKE_PURE_PYTHON`` is set, or when a source no longer matches its record (an edit
since the install: the compiled module would be stale).  docs/performance.md, "The
compiled build".
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["build", "choose"]

log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
_RECORD = _HERE / "_compiled_sources.json"
_PURE_FINDER: _SourcesFirst | None = None


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the listed road modules as their .py sources, ahead of compiled extensions."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object = None,  # noqa: ARG002 - the protocol's
                  target: ModuleType | None = None,  # noqa: ARG002
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(
            fullname, _HERE / f"{fullname.rpartition('.')[2]}.py")


def _stale(record: dict[str, str], directory: Path) -> list[str]:
    """The recorded modules whose source no longer has the recorded digest."""
    stale = []
    for name, digest in record.items():
        try:
            source = (directory / f"{name}.py").read_bytes()
        except OSError:
            stale.append(name)
            continue
        if hashlib.sha256(source).hexdigest() != digest:
            stale.append(name)
    return stale


def choose() -> None:
    """Make the sources of the compiled modules run instead of them, if they should."""
    global _PURE_FINDER  # noqa: PLW0603 - decided once, at road's import
    if _PURE_FINDER is not None:
        return
    try:
        record: dict[str, str] = json.loads(_RECORD.read_text())
    except (OSError, ValueError):
        return  # nothing was compiled: the sources are all there is
    if not os.environ.get("RAETLIKE_PURE_PYTHON"):
        stale = _stale(record, _HERE)
        if not stale:
            return
        log.warning("road: %s changed since the compiled build; running the Python "
                    "sources (reinstall to compile them again)", ", ".join(sorted(stale)))
    _PURE_FINDER = _SourcesFirst({f"road.{name}" for name in record})
    sys.meta_path.insert(0, _PURE_FINDER)


def build() -> str:
    """``"mypyc"`` when road's fast mode runs compiled, else ``"pure Python"``."""
    from road import _fast_link  # noqa: PLC0415 - asks what was actually imported

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return "mypyc" if str(_fast_link.__file__).endswith(suffixes) else "pure Python"
