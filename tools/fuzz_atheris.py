"""Coverage-guided fuzzing of the decoders and RoadStack with atheris (libFuzzer).

atheris is not a project dependency; install it by hand into the venv
(``.venv/bin/python -m pip install atheris``: a binary wheel for CPython 3.11
on x86-64 Linux, no compiler needed).  The targets are the byte-level
``feed_*`` functions of ``tests/test_fuzz_wire.py`` plus ``road``: one
datagram (first byte: which estate receives it and from where) into an allowed
main/minion pair on the simulated link.  Anything but the documented
exceptions is a crash; libFuzzer then writes the input to ``crash-*``.

Usage::

    .venv/bin/python tools/fuzz_atheris.py packet -runs=1000000
    .venv/bin/python tools/fuzz_atheris.py road -max_total_time=600 corpus_dir/

Arguments after the target go to libFuzzer unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import atheris  # type: ignore[import-not-found,unused-ignore]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["raetlike", "road", "lane"]):
    from tests.roadkit import MAIN, MINION, OTHER, Pair
    from tests.test_fuzz_stacks import feed_road, road_pair
    from tests.test_fuzz_wire import TARGETS

RENEW_EVERY = 5000  # inputs before the road pair is rebuilt (its state grows with garbage)


class _RoadTarget:
    """Feeds one datagram into an allowed pair, rebuilt now and then."""

    def __init__(self) -> None:
        self.pair: Pair = road_pair("allowed")
        self.fed = 0

    def __call__(self, data: bytes) -> None:
        if self.fed >= RENEW_EVERY:
            self.pair, self.fed = road_pair("allowed"), 0
        self.fed += 1
        selector = data[0] if data else 0
        target = (MAIN, MINION)[selector & 1]
        source = (MAIN, MINION, OTHER)[(selector >> 1) % 3]
        stack = self.pair.stack(target)
        feed_road(stack, data[1:], source, self.pair.net.now)
        if selector & 0x80:
            self.pair.net.step()


def main() -> None:
    """Fuzz the target named by the first argument."""
    targets: dict[str, Callable[[bytes], None]] = dict(TARGETS)
    if len(sys.argv) < 2 or sys.argv[1] not in {*targets, "road"}:
        sys.stderr.write(f"usage: {sys.argv[0]} TARGET [libFuzzer options]\n"
                         f"targets: {', '.join([*targets, 'road'])}\n")
        sys.exit(2)
    name = sys.argv[1]
    target = _RoadTarget() if name == "road" else targets[name]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
