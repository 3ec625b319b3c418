"""The ``raetlike`` command's entry point: the CLI, or one line when it cannot start.

Importing the CLI imports the stacks and so libsodium (through libnacl); when
the system has no libsodium, that is one line naming the package, not a
ctypes traceback.
"""

from __future__ import annotations

import sys

from raetlike.errors import LibsodiumMissingError

__all__ = ["main"]


def main() -> int:
    """Run ``raetlike`` with ``sys.argv``; returns the exit status."""
    try:
        from raetlike.cli import main as run  # noqa: PLC0415 - the import is what may fail
    except LibsodiumMissingError as exc:
        command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
        sys.stderr.write(f"raetlike{'' if command is None else ' ' + command}: error: {exc}\n")
        return 1
    return run()
