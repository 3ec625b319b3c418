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
    names = []
    for package in (raetlike, road, lane):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def test_every_exception_class_defined_here_is_a_raet_error() -> None:
    outside = []
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == name and not issubclass(value, RaetError)):
                outside.append(f"{name}.{value.__qualname__}")
    assert outside == []
