"""Local directories and files that only their owner may change: lanes and keeps.

A lane directory holds the yards' sockets, and a socket's file permissions are
the lane's only authentication; a keep directory holds the estate's private
keys and which remote keys it accepts.  Whoever may write either directory
(or owns it) can take the estate's place.  So, as OpenSSH's ``StrictModes``
and ssh-agent's socket directory do, raetlike refuses:

- a lane or keep directory that is not owned by the running user, or that
  group or others may write;
- a keep file that is not owned by the running user or that group or others
  may write, and a file of private keys that group or others may even read.

Each refusal is an :class:`~raetlike.errors.UnsafePathError` (in a keep an
:class:`~raetlike.errors.UnsafeKeepError`) whose message is one line naming
the path and the fix.  Directories raetlike creates itself are created 0700.

The default lane directory is per user (:func:`default_lane_dir`):
``$XDG_RUNTIME_DIR/raetlike`` when ``XDG_RUNTIME_DIR`` names a directory that
passes the same check, else ``<tmp>/raetlike-<uid>``.
"""

from __future__ import annotations

import logging
import os
import shlex
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from raetlike.errors import UnsafePathError

__all__ = [
    "DIRECTORY_MODE",
    "check_private",
    "default_lane_dir",
    "make_private_directory",
    "shown_path",
]

log = logging.getLogger(__name__)

DIRECTORY_MODE = 0o700
"""Directories raetlike creates: owner only."""

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_OTHERS_ANY = stat.S_IRWXG | stat.S_IRWXO

StrPath = str | os.PathLike[str]


def shown_path(path: StrPath) -> str:
    """``path`` for a message and a shell: quoted as the shell needs, escaped if unprintable."""
    text = os.fspath(path)
    return shlex.quote(text) if text.isprintable() else repr(text)


def check_private(path: StrPath, what: str, *, uid: int | None = None, secret: bool = False,
                  info: os.stat_result | None = None,
                  error: type[UnsafePathError] = UnsafePathError) -> os.stat_result:
    """Refuse ``path`` unless only ``uid`` (default: the running user) may change it.

    ``what`` names it in the message (``"lane directory"``, ``"keep file"``).
    ``secret``: it holds private keys, so group and others may not read it
    either.  ``info`` is its ``stat`` when the caller has it (an ``fstat`` of
    an open file, free of races); otherwise ``path`` is stat'ed, following
    symbolic links.  Returns that ``stat``; raises ``error`` (one line naming
    the path and the fix) or :class:`FileNotFoundError`.
    """
    if uid is None:
        uid = os.geteuid()
    if info is None:
        info = os.stat(path)
    shown = shown_path(path)
    is_dir = stat.S_ISDIR(info.st_mode)
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != uid:
        raise error(f"{what} {shown} is owned by uid {info.st_uid}, not by uid {uid} "
                    f"(the running user): fix: chown {uid} {shown} (or use a "
                    f"{'directory' if is_dir else 'file'} of your own)", os.fspath(path))
    if mode & _OTHERS_WRITE:
        raise error(f"{what} {shown} is mode {mode:04o}, writable by group or others: "
                    f"fix: chmod {'700' if is_dir else '600'} {shown}", os.fspath(path))
    if secret and mode & _OTHERS_ANY:
        raise error(f"{what} {shown} is mode {mode:04o}: group or others may read the private "
                    f"keys in it: fix: chmod 600 {shown}", os.fspath(path))
    return info


def make_private_directory(path: StrPath, what: str, *, uid: int | None = None,
                           error: type[UnsafePathError] = UnsafePathError) -> os.stat_result:
    """Create ``path`` mode 0700 if it is missing, then :func:`check_private` it.

    Missing parents are created as ``os.makedirs`` does (the umask's mode).
    An existing directory is used only when it passes the check; one that is
    not a directory is refused with ``error`` too.
    """
    try:
        os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
        os.mkdir(path, DIRECTORY_MODE)
    except FileExistsError:
        pass  # made before (by us, we hope: the check says)
    else:
        os.chmod(path, DIRECTORY_MODE)  # mkdir's mode is filtered by the umask
    info = check_private(path, what, uid=uid, error=error)
    if not stat.S_ISDIR(info.st_mode):
        raise error(f"{what} {shown_path(path)} is not a directory: fix: remove it or "
                    f"give another directory", os.fspath(path))
    return info


def default_lane_dir(environ: Mapping[str, str] | None = None, uid: int | None = None) -> str:
    """The running user's lane directory: ``$XDG_RUNTIME_DIR/raetlike`` or ``<tmp>/raetlike-<uid>``.

    ``XDG_RUNTIME_DIR`` counts only when it is an absolute path to a
    directory that passes :func:`check_private` (a ``sudo`` shell may still
    name the invoking user's); otherwise the per-uid directory under the
    system's temporary directory.  Nothing is created here: the driver that
    binds a yard creates the directory 0700 (:func:`make_private_directory`).
    """
    environ = os.environ if environ is None else environ
    uid = os.geteuid() if uid is None else uid
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        try:
            info = check_private(runtime, "XDG_RUNTIME_DIR", uid=uid)
        except (OSError, UnsafePathError) as exc:
            log.debug("not using XDG_RUNTIME_DIR for lanes: %s", exc)
        else:
            if stat.S_ISDIR(info.st_mode):
                return str(Path(runtime) / "raetlike")
    return str(Path(tempfile.gettempdir()) / f"raetlike-{uid}")
