"""How long a real joiner waits while spoofed joins stream at a main (simulated link,
virtual clock): the figures of docs/road.md, "A main under a join storm".

The main's 256 join places are filled at t=0 (20 joins from each spoofed host, its
burst), then forged joins stream at RATE a second from RATE / 2 hosts in turn (each at
the per-source rate, 2 a second), none ever answered; the minion starts joining at
--start and the run ends --window seconds later.  ``--grace 10`` gives the policy before
eviction (no place is unproven that long: every handshake times out first).  ``--delay D``
delays each datagram between the minion and the main by D seconds (a round trip of 2 D;
the spoofed joins come at once); then the run waits for the main to see the minion
allowed (its join completed there, not only the minion's belief that it joined).

    .venv/bin/python tools/handshake_storm_sim.py --rates 400 800 --grace 10 0.5
    .venv/bin/python tools/handshake_storm_sim.py --rates 400 --grace 0.5 --delay 0.4 1.75
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from raetlike.wire.kinds import TransactionKind  # noqa: E402
from road import events  # noqa: E402
from road.stack import RoadConfig  # noqa: E402
from road.stats import Drop  # noqa: E402
from tests.roadkit import MAIN, MINION, make_pair  # noqa: E402
from tests.simlink import Impairment  # noqa: E402
from tests.spoofkit import BURST, JoinStream, Spoofer  # noqa: E402


def run(rate: float, grace: float, start: float, window: float, delay: float) -> str:
    """One run's line of figures."""
    pair = make_pair(main_config=RoadConfig(fast=False, handshake_grace=grace),
                     impairment=Impairment(delay=delay) if delay else None)
    places = pair.main.config.max_open_handshakes
    opened = pair.main._handshakes[TransactionKind.JOIN]
    stream = JoinStream(pair, rate, start=1.0)
    filler = Spoofer(-(-places // BURST))
    while len(opened) < places and filler.send(pair):
        pass
    stream.run_until(start)
    pair.minion.join(MAIN, now=pair.net.now)
    began = pair.net.now
    if delay:
        done = stream.run_until(began + window, lambda: any(
            e.remote == "minion" for e in pair.events(MAIN, events.Allowed)))
        what = "allowed (at the main)"
    else:
        done = stream.run_until(began + window, lambda: bool(pair.events(MINION, events.Joined)))
        what = "joined"
    waited = f"{pair.net.now - began:.3f} s" if done else f"over {window:g} s"
    stats = pair.main.stats
    return (f"rate {rate:g}/s from {len(stream.hosts)} hosts, grace {grace:g} s, "
            f"start {start:g} s, rtt {2 * delay:g} s: {what} after {waited}; "
            f"late acks {stats.late_join_acks}, evicted "
            f"{stats.handshakes_evicted}, shed {stats.dropped[Drop.HANDSHAKES_BUSY]}, "
            f"rate-limited {stats.dropped[Drop.JOIN_RATE_LIMITED]}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad argument: one line, no usage."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> None:
    """Parse the arguments, print a line per run."""
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[400.0, 800.0],
                        help="spoofed joins a second (default: 400 800)")
    parser.add_argument("--grace", type=float, nargs="+", default=[10.0, 0.5],
                        help="handshake_grace values to run (default: 10 0.5)")
    parser.add_argument("--start", type=float, nargs="+", default=[10.0],
                        help="when the real joiner starts, seconds (default: 10)")
    parser.add_argument("--delay", type=float, nargs="+", default=[0.0],
                        help="one-way delay minion<->main, seconds (default: 0)")
    parser.add_argument("--window", type=float, default=30.0,
                        help="seconds the joiner is given (default: 30)")
    args = parser.parse_args()
    logging.getLogger("road").setLevel(logging.ERROR)  # (every 100th failed join warns)
    if any(rate <= 0 for rate in args.rates):
        parser.error("--rates must be above 0")
    if any(start < 1.0 for start in args.start) or args.window <= 0:
        parser.error("--start must be at least 1 (the stream starts then), --window above 0")
    if any(delay < 0 for delay in args.delay):
        parser.error("--delay must be 0 or more")
    for rate in args.rates:
        for start in args.start:
            for grace in args.grace:
                for delay in args.delay:
                    print(run(rate, grace, start, args.window, delay), flush=True)


if __name__ == "__main__":
    main()
