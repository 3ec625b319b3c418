"""Make RAET 0.6.8 importable on Python 3.11.

Imported *only* inside a RAET peer subprocess (never in the test process):
RAET 0.6.8 and ioflo 2.0.3 use the pre-3.10 ``collections`` aliases and the
removed ``encoding=`` keywords of ``json.loads`` and msgpack.
"""

import collections
import collections.abc
import json
from typing import Any

for _name in (
    "Mapping", "MutableMapping", "Sequence", "MutableSet", "Set", "Iterable",
    "Callable", "Hashable", "MutableSequence",
):
    setattr(collections, _name, getattr(collections.abc, _name))

_json_loads = json.loads


def _loads(s: Any, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("encoding", None)
    return _json_loads(s, *args, **kwargs)


json.loads = _loads

import msgpack  # noqa: E402

_packb, _unpackb = msgpack.packb, msgpack.unpackb


def _packb_shim(obj: Any, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("encoding", None)
    return _packb(obj, *args, **kwargs)


def _unpackb_shim(data: Any, *args: Any, **kwargs: Any) -> Any:
    kwargs.pop("encoding", None)
    kwargs.setdefault("raw", False)
    return _unpackb(data, *args, **kwargs)


msgpack.packb, msgpack.unpackb = _packb_shim, _unpackb_shim
msgpack.dumps, msgpack.loads = _packb_shim, _unpackb_shim  # RAET's lanes call these names

import logging  # noqa: E402

logging.getLogger("raet").setLevel(logging.ERROR)
try:  # ioflo's own console: keep it quiet
    from ioflo.base import consoling

    consoling.getConsole().reinit(verbosity=consoling.Console.Wordage.mute)
except Exception:  # noqa: BLE001, S110 - cosmetic only
    pass
