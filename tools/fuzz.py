"""Long-run fuzzing: the Hypothesis fuzz tests with many more examples.

Runs ``tests/test_fuzz_wire.py`` and ``tests/test_fuzz_stacks.py`` with
``RAETLIKE_FUZZ_EXAMPLES`` set, so each fuzz test tries that many inputs
(the default run tries a few hundred).  Stops at the first failure, which
Hypothesis prints shrunk, with the input to paste into a regression test.

Usage::

    .venv/bin/python tools/fuzz.py --examples 1000000            # everything, ~hours
    .venv/bin/python tools/fuzz.py --examples 20000 --target packet --target road
    .venv/bin/python tools/fuzz.py --list

For coverage-guided fuzzing of the same targets with atheris (when it is
installed), see ``tools/fuzz_atheris.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("tests/test_fuzz_wire.py", "tests/test_fuzz_stacks.py")
TARGETS = {
    "packet": "test_packet_decoding",
    "body": "test_body_decoding",
    "uncoat": "test_uncoating",
    "reassembly": "test_reassembly",
    "page": "test_page_decoding",
    "binder": "test_binding",
    "tags": "test_tag_stack_splitting",
    "tag-mapping": "test_tag_mapping_splitting",
    "dedup": "test_the_seen_window",
    "road": "test_road_stacks",
    "lane": "test_lane_stacks",
}
"""Target name -> the start of its fuzz test's name."""


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz tests; returns pytest's exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000,
                        help="inputs per fuzz test (default: 100000)")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), default=[],
                        help="fuzz only this target (repeatable; default: all)")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, test in TARGETS.items():
            sys.stdout.write(f"{name:12} {test}\n")
        return 0
    if args.examples < 1:
        parser.error("--examples must be at least 1")
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
               "-W", "ignore::DeprecationWarning", *FILES]
    if args.target:
        command += ["-k", " or ".join(TARGETS[name] for name in args.target)]
    env = {**os.environ, "RAETLIKE_FUZZ_EXAMPLES": str(args.examples),
           "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    sys.stdout.write(f"fuzzing with {args.examples} examples per test: {' '.join(command)}\n")
    sys.stdout.flush()
    code = subprocess.call(command, cwd=ROOT, env=env)
    sys.stdout.write(f"fuzzing {'passed' if code == 0 else 'FAILED'} after "
                     f"{time.monotonic() - started:.0f} s\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
