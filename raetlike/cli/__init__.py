"""The ``raetlike`` command line and its commands' bodies.

:func:`main` and :func:`build_parser` (``raetlike/cli/_main.py``) parse and dispatch;
each command that runs something lives in its own module: :mod:`raetlike.cli.estate`
(``raetlike estate``), :mod:`raetlike.cli.yard`, :mod:`raetlike.cli.ping` and
:mod:`raetlike.cli.keys`.  Programs embed :mod:`raetlike.aio` (``aio.Estate``) or the
stacks instead: these modules are for the command line.
"""

from __future__ import annotations

from raetlike.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
