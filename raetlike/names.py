"""Which strings may name an estate, a role, a yard or a lane; how to log any string.

Names end up in three places an attacker would like to reach: log lines (an
ANSI escape sequence in a name repaints the operator's terminal), file names
(``estate.<name>.json`` in the keep, ``<lane>.<yard>.uxd`` in a lane
directory) and the wire.  One rule covers them all.  A *valid name*:

- is a ``str`` of 1 to :data:`MAX_NAME_BYTES` bytes in UTF-8 (room for the
  keep's ``.estate.<name>.json.XXXXXXXX.tmp`` within a file system's 255-byte
  file names);
- has only printable characters: no Unicode category ``C*`` (controls such as
  ESC, NUL and newlines, format characters such as the bidi overrides, private
  use, surrogates, unassigned code points) and no ``Z*`` (spaces and line or
  paragraph separators: RAET 0.6.8 refuses whitespace in names too);
- has no path separator, ``/`` or ``\\``;
- does not start with ``.`` (so never ``.``, ``..`` or a hidden file).

Commands and the API refuse an invalid name with :class:`InvalidNameError`
(:func:`check_name`); code that meets a name from the network asks
:func:`is_valid_name` (or :func:`name_problem` for the reason) and drops what
fails.  Log lines that may print a name nobody checked use :func:`safe_name`.
"""

from __future__ import annotations

import unicodedata
from typing import TypeGuard

from raetlike.errors import LocalProtocolError

__all__ = [
    "MAX_NAME_BYTES",
    "InvalidNameError",
    "check_name",
    "is_valid_name",
    "name_problem",
    "quoted_name",
    "safe_name",
]

MAX_NAME_BYTES = 200
"""The longest valid name, in bytes of UTF-8."""

MAX_LOGGED_CHARACTERS = 256
"""What :func:`safe_name` shows of a longer string (then how much it left out)."""

_SEPARATORS = frozenset("/\\")


class InvalidNameError(LocalProtocolError):
    """A name given to a command or the API breaks the rule of :mod:`raetlike.names`."""


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a valid name (a few words), or None when it is one."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    if name.startswith("."):
        return "must not start with '.'"
    for char in name:
        if char in _SEPARATORS:
            return f"must not hold {char!r}"
        category = unicodedata.category(char)
        if category[0] in "CZ":
            kind = "whitespace" if category[0] == "Z" or char.isspace() else "control character"
            return f"must not hold {kind} {char!r} (only printable characters, no whitespace)"
    return None


def is_valid_name(name: object) -> TypeGuard[str]:
    """True when ``name`` may name an estate, a role, a yard or a lane (see the module).

    A type guard: where it returned True, type checkers know ``name`` is a ``str``.
    """
    return name_problem(name) is None


def check_name(name: str, what: str = "name") -> str:
    """``name`` when it is valid; :class:`InvalidNameError` (one line) otherwise.

    ``what`` says which name it is (``"estate name"``, ``"role"``, ...); the
    message shows the name quoted, escaped and cut short, and what is wrong.
    """
    problem = name_problem(name)
    if problem is not None:
        raise InvalidNameError(f"invalid {what} {quoted_name(name)}: {problem}")
    return name


def quoted_name(text: object, limit: int = 64) -> str:
    """``text`` quoted with escapes (as ``repr``), cut after ``limit`` characters."""
    if isinstance(text, str) and len(text) > limit:
        return f"{text[:limit]!r}..."
    return repr(text)


def safe_name(text: object) -> str:
    """``text`` fit for a log line: as is when printable, else quoted with escapes.

    Control characters, line breaks and other unprintable characters come out
    as Python escapes (``'\\x1b[31m'``), so a hostile name can neither paint a
    terminal nor forge a log line; a string longer than
    :data:`MAX_LOGGED_CHARACTERS` is cut there, saying how much was left out.
    """
    if not isinstance(text, str):
        return repr(text)
    shown, rest = text[:MAX_LOGGED_CHARACTERS], len(text) - MAX_LOGGED_CHARACTERS
    if not shown.isprintable():
        shown = repr(shown)
    return shown if rest <= 0 else f"{shown}... ({rest} more characters)"
