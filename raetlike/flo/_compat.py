"""Let ioflo 2.0.3 import on Python 3.11; imported by :mod:`raetlike.flo` before ioflo.

ioflo 2.0.3 does ``import collections`` and then names
``collections.abc.MutableSet`` (in ``ioflo.aid.osetting``) and
``collections.abc.Mapping``.  The attribute ``collections.abc`` only exists
once the submodule ``collections.abc`` has been imported somewhere, which on
Python 3.11 nothing does for ioflo before that line runs.  Importing the
submodule is all ioflo itself needs: it uses none of the pre-3.10
``collections.Mapping``-style aliases and none of the removed ``encoding=``
keywords of ``json``/``msgpack`` that RAET 0.6.8 needs, so nothing is
patched here.
"""

from __future__ import annotations

import collections.abc

__all__ = ["IOFLO_READY"]

IOFLO_READY = hasattr(collections, "abc")
"""True once ``collections.abc`` is reachable as an attribute (always, after this import)."""
