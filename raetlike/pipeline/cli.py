"""The body of ``raetlike pipeline``: options from the command line, run, one-line results."""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from raetlike.pipeline._frames import NoJournalError, find_journals, refuse_pattern
from raetlike.pipeline._job import (
    DRIVER_ROWS,
    PipelineOptions,
    PipelineResult,
    follow_journals,
    run_pipeline,
)
from raetlike.pipeline._store import OutBusyError

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "parse_time", "run_command"]

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def parse_time(text: str) -> float:
    """Epoch seconds from ``1767261600``-style numbers or ISO 8601 (UTC when no zone is given)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"invalid time {text!r}: give ISO 8601 or epoch seconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _say(result: PipelineResult, out: TextIO) -> None:
    out.write(f"{result.records} records ({result.skipped_lines} skipped lines) "
              f"in {result.seconds:.1f} s; tables in {result.report.parent / 'tables'}\n")
    out.write(f"report: {result.report}\n")
    out.flush()


def run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``raetlike pipeline`` with parsed ``args``; returns the exit status."""
    try:
        since = None if args.since is None else parse_time(args.since)
        until = None if args.until is None else parse_time(args.until)
    except ValueError as exc:
        err.write(f"raetlike pipeline: error: {exc} (see --help)\n")
        return EXIT_USAGE
    try:
        refuse_pattern(args.out, "--out")
    except NoJournalError as exc:
        err.write(f"raetlike pipeline: error: {exc} (see --help)\n")
        return EXIT_USAGE
    try:
        journals = find_journals(Path(p) for p in args.journals)
    except NoJournalError as exc:
        err.write(f"raetlike pipeline: error: {exc}\n")
        return EXIT_FAILURE
    logging.getLogger("py4j").setLevel(max(logging.WARNING, logging.getLogger().level))
    options = PipelineOptions(journals=tuple(journals), out=args.out,
                              master=args.master, since=since, until=until,
                              window_seconds=args.window, quiet=args.quiet > 0,
                              driver_rows=(DRIVER_ROWS if args.driver_rows is None
                                           else args.driver_rows),
                              converter=getattr(args, "converter", "arrow"))
    if not args.follow:
        try:
            result = run_pipeline(options)
        except (OutBusyError, NoJournalError) as exc:
            err.write(f"raetlike pipeline: error: {exc}\n")
            return EXIT_FAILURE
        _say(result, out)
        if result.records == 0:
            window = " between --since and --until" if since or until else ""
            err.write(f"raetlike pipeline: error: no records{window} in "
                      f"{', '.join(str(j) for j in journals)}: nothing to audit\n")
            return EXIT_FAILURE
        return EXIT_OK
    try:
        follow_journals(options, rounds=args.rounds, interval=args.interval,
                        on_round=lambda result: _say(result, out))
    except (OutBusyError, NoJournalError) as exc:
        err.write(f"raetlike pipeline: error: {exc}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        log.info("pipeline: interrupted, stopping")
    return EXIT_OK
