"""Owner-only directories and atomic, fsynced JSON files for the keep.

Only the running user may change a keep (:mod:`raetlike.localfiles`): a
directory or file that someone else owns or may write, and a file of private
keys that someone else may read, is refused with
:class:`~raetlike.errors.UnsafeKeepError`, one line naming the fix.  A
directory group or others may only read (RAET 0.6.8 makes its keep with the
umask's 0755) is tightened to 0700, with a warning.

Every write goes to a temporary file in the target's own directory, is
fsynced, renamed over the target and followed by an fsync of the directory, so
a reader (RAET, the CLI, a running stack) sees either the old file or the new
one, never a torn one.  Temporary names start with a dot and end in ``.tmp``,
so neither raetlike nor RAET 0.6.8 ever mistakes one for a keep file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from raetlike.errors import KeepError, UnsafeKeepError
from raetlike.localfiles import check_private, make_private_directory

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "TEMP_SUFFIX",
    "ensure_private_directory",
    "read_json",
    "remove_file",
    "write_json",
]

logger = logging.getLogger(__name__)

DIRECTORY_MODE = 0o700
"""Keep directories: owner only."""
FILE_MODE = 0o600
"""Keep files: owner only."""
TEMP_SUFFIX = ".tmp"
"""How the names of in-flight temporary files end."""

_GROUP_OR_OTHER = stat.S_IRWXG | stat.S_IRWXO


def ensure_private_directory(path: Path, *, tighten: bool = True) -> None:
    """Create ``path`` (and parents) if missing, owner-only (0700); refuse an unsafe one.

    An existing directory must be owned by the running user and not writable
    by group or others (:class:`UnsafeKeepError`).  With ``tighten``, one
    that group or others may only read or search (RAET creates its keep
    directories with the default umask) is made 0700, with a warning.
    """
    try:
        info = make_private_directory(path, "keep directory", error=UnsafeKeepError)
        mode = stat.S_IMODE(info.st_mode)
        if tighten and mode & _GROUP_OR_OTHER:
            logger.warning("keep directory %s was mode %04o; making it owner-only", path, mode)
            path.chmod(DIRECTORY_MODE)
    except OSError as exc:
        raise KeepError(f"{path}: cannot make an owner-only keep directory: {exc}") from exc


def read_json(path: Path, *, secret: bool = False) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` only when the file does not exist.

    The open file must be owned by the running user and not writable by
    group or others, nor readable by them when it is ``secret`` (it holds
    private keys): :class:`UnsafeKeepError` otherwise.  Unreadable or corrupt
    files, and files holding anything but a JSON object, raise
    :class:`KeepError` naming the file.
    """
    try:
        with path.open("rb") as handle:
            check_private(path, "keep file", secret=secret,
                          info=os.fstat(handle.fileno()), error=UnsafeKeepError)
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeepError(f"{path}: cannot read keep file: {exc}") from exc
    try:
        value: object = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise KeepError(f"{path}: keep file is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise KeepError(f"{path}: keep file must hold a JSON object, not {type(value).__name__}")
    return value


def write_json(path: Path, value: object) -> None:
    """Atomically replace ``path`` with ``value`` as JSON (RAET's 2-space indent)."""
    try:
        text = json.dumps(value, indent=2)
    except (TypeError, ValueError) as exc:
        raise KeepError(f"{path}: cannot encode keep data: {exc}") from exc
    data = text.encode("utf-8")
    directory = path.parent
    try:
        descriptor, temp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=directory
        )
    except OSError as exc:
        raise KeepError(f"{path}: cannot create a temporary file: {exc}") from exc
    temp = Path(temp_name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise KeepError(f"{path}: cannot write keep file: {exc}") from exc
    _sync_directory(directory)


def remove_file(path: Path) -> bool:
    """Remove ``path`` durably; False when it did not exist."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise KeepError(f"{path}: cannot remove keep file: {exc}") from exc
    _sync_directory(path.parent)
    return True


def _sync_directory(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise KeepError(f"{directory}: cannot open keep directory to sync it: {exc}") from exc
    try:
        os.fsync(descriptor)
    except OSError as exc:
        raise KeepError(f"{directory}: cannot sync keep directory: {exc}") from exc
    finally:
        os.close(descriptor)
