"""Failover times of a multi-main estate over seeded runs on the simulated road.

Each run: two mains, a minion in failover mode, a hot collector subscribed to
its events (tests/multikit.py); the minion streams events and its link to the
active main is cut at a seeded moment.  Prints p50 and max of "presence said
lost -> next main active" and "link cut -> next main active", and events lost
and delivered twice at the collector (docs/multi-main.md quotes them).

    .venv/bin/python tools/multi_main_failover.py [--runs 20] [--loss 0.01] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.multikit import PRESENCE_PERIOD, failover_run, percentile  # noqa: E402
from tests.simlink import Impairment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs (default 20)")
    parser.add_argument("--loss", type=float, default=0.01, help="datagram loss (default 0.01)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # fast-mode fallbacks of the cut link, as expected
    runs = [failover_run(seed, impairment=Impairment(loss=args.loss, jitter=0.003))
            for seed in range(args.runs)]
    switch = [run.switch for run in runs]
    total = [run.total for run in runs]
    sent = sum(run.sent for run in runs)
    lost = sum(1 for run in runs for n in range(1, run.sent + 1) if run.delivered[n] == 0)
    twice = sum(k - 1 for run in runs for k in run.delivered.values() if k > 1)
    figures = {
        "runs": len(runs), "presence_period_s": PRESENCE_PERIOD, "loss": args.loss,
        "lost_to_active_p50_s": round(percentile(switch, 0.5), 3),
        "lost_to_active_max_s": round(max(switch), 3),
        "cut_to_active_p50_s": round(percentile(total, 0.5), 3),
        "cut_to_active_max_s": round(max(total), 3),
        "events_sent": sent, "events_lost": lost, "events_delivered_twice": twice,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{len(runs)} runs, presence period {PRESENCE_PERIOD:g} s, loss {args.loss:g}: "
              f"lost->active p50 {figures['lost_to_active_p50_s']:.3f} s max "
              f"{figures['lost_to_active_max_s']:.3f} s; cut->active p50 "
              f"{figures['cut_to_active_p50_s']:.3f} s max {figures['cut_to_active_max_s']:.3f} s; "
              f"{sent} events, {lost} lost, {twice} delivered twice")
    return 0 if lost == twice == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
