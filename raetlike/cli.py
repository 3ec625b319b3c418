"""The ``raetlike`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from raetlike import __version__

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raetlike",
        description="A secure, reliable, asynchronous event transport (RAET 0.6.8 compatible).",
    )
    parser.add_argument("--version", action="version", version=f"raetlike {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="less log output")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.INFO - 10 * args.verbose + 10 * args.quiet
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0
