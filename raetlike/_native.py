"""The compiled hot paths, and which build of them runs.

Two kinds, each optional, each with a pure-Python twin that makes the same bytes:

- hand-written C (``raetlike.journal._cjournal``, ``raetlike.durable._cdurable``,
  ``raetlike._csodium``, the lane driver's batched syscalls ``raetlike._cmmsg``), looked up
  by :func:`compiled`;
- modules mypyc compiled from their own Python sources at install (road's fast mode, the
  durable store; setup.py lists them).  setup.py records each source's digest in
  ``raetlike/_compiled_sources.json``; :func:`choose` (run by ``raetlike/__init__``,
  before any of them can be imported) makes the sources run instead when
  ``RAETLIKE_PURE_PYTHON`` is set, or when a source changed since the build (the compiled
  module would be stale).

``RAETLIKE_PURE_PYTHON`` (any non-empty value) turns all of them off.  docs/performance.md,
"The compiled build".
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["build", "choose", "compiled"]

log = logging.getLogger(__name__)

_ROOT = Path(__file__).resolve().parent.parent  # where the raetlike and road packages are
_RECORD = Path(__file__).resolve().parent / "_compiled_sources.json"
_PURE_FINDER: _SourcesFirst | None = None


def compiled(module: str, name: str) -> Any:
    """``module.name`` from a hand-written C extension, or None when it was not built (no C
    compiler at install) or ``RAETLIKE_PURE_PYTHON`` is set."""
    if os.environ.get("RAETLIKE_PURE_PYTHON"):
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules as their .py sources, ahead of the compiled extensions."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: object = None,  # noqa: ARG002 - the protocol's
                  target: ModuleType | None = None,  # noqa: ARG002
                  ) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname,
                                                                                  source)


def _source(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _stale(record: dict[str, str], root: Path) -> list[str]:
    """The recorded modules whose source no longer has the recorded digest."""
    stale = []
    for module, digest in record.items():
        try:
            source = _source(root, module).read_bytes()
        except OSError:
            stale.append(module)
            continue
        if hashlib.sha256(source).hexdigest() != digest:
            stale.append(module)
    return stale


def choose() -> None:
    """Make the sources of the mypyc-compiled modules run instead of them, if they should."""
    global _PURE_FINDER  # noqa: PLW0603 - decided once, when raetlike is first imported
    if _PURE_FINDER is not None:
        return
    try:
        record: dict[str, str] = json.loads(_RECORD.read_text())
    except (OSError, ValueError):
        return  # nothing was compiled: the sources are all there is
    if not os.environ.get("RAETLIKE_PURE_PYTHON"):
        stale = _stale(record, _ROOT)
        if not stale:
            return
        log.warning("raetlike: %s changed since the compiled build; running the Python "
                    "sources (reinstall to compile them again)", ", ".join(sorted(stale)))
    _PURE_FINDER = _SourcesFirst({module: _source(_ROOT, module) for module in record})
    sys.meta_path.insert(0, _PURE_FINDER)


def build() -> str:
    """``"mypyc"`` when the mypyc-compiled modules run, else ``"pure Python"``."""
    from road import _fast_link  # noqa: PLC0415 - asks what was actually imported

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return "mypyc" if str(_fast_link.__file__).endswith(suffixes) else "pure Python"
