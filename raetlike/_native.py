"""The compiled hot paths: each is optional and has a pure-Python twin that makes the
same bytes.  ``RAETLIKE_PURE_PYTHON`` (any non-empty value) turns all of them off."""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["compiled"]


def compiled(module: str, name: str) -> Any:
    """``module.name`` from a compiled extension, or None when it was not built (no C
    compiler at install) or ``RAETLIKE_PURE_PYTHON`` is set."""
    if os.environ.get("RAETLIKE_PURE_PYTHON"):
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None
