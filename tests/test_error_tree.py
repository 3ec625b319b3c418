"""One error tree: every exception class raetlike, road and lane define is a RaetError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import lane
import raetlike
import road
from raetlike.errors import RaetError


def _modules() -> list[str]:
    names = [package.__name__ for package in (raetlike, road, lane)]
    for package in (raetlike, road, lane):
        names.extend(info.name for info in pkgutil.walk_packages(
            package.__path__, f"{package.__name__}.") if not info.name.endswith("__main__"))
    return names


def test_every_exception_class_defined_here_is_a_raet_error() -> None:
    outside = [f"{name}.{value.__qualname__}"
               for name in _modules()
               for value in vars(importlib.import_module(name)).values()
               if inspect.isclass(value) and issubclass(value, BaseException)
               and value.__module__ == name and not issubclass(value, RaetError)]
    assert outside == []
