"""Settings checked against their annotations when set: a user's wrong type is a one-line
error naming the setting, never a TypeError deep in a compiled module (mypyc holds the
compiled code to its annotations at run time; docs/performance.md, "The compiled build")."""

from __future__ import annotations

import enum
import functools
import typing
from typing import Any

from raetlike.errors import LocalProtocolError

__all__ = ["checked", "field_types"]


@functools.cache
def field_types(owner: type) -> dict[str, Any]:
    """The resolved annotations of a settings class's fields (resolved once per class)."""
    return typing.get_type_hints(owner)


def checked(owner: str, types: dict[str, Any], name: str, value: object) -> object:
    """``value`` as setting ``name`` of ``owner`` holds it: an int for an int (not a bool),
    a float for a float (an int becomes one), a bool for a bool, a member for an enum;
    LocalProtocolError naming the setting otherwise.  Other annotations pass unchecked."""
    kind = types.get(name)
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind is bool:
        if isinstance(value, bool):
            return value
    elif isinstance(kind, type) and issubclass(kind, enum.Enum):
        if isinstance(value, kind):
            return value
    else:
        return value
    expected = kind.__name__ if isinstance(kind, type) else str(kind)
    raise LocalProtocolError(f"{owner}.{name} must be {_article(expected)} {expected}, "
                             f"not {value!r}")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"
