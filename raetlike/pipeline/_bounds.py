"""A journal line's fields, what a valid record is bounded by, and the windows the tables
are cut into.

Plain Python, no PySpark: :mod:`raetlike.pipeline._frames` and ``_tables`` use these in
Spark's expressions, and :mod:`raetlike.pipeline._arrow` in a Spark task's worker, which
converts a unit without importing PySpark's SQL modules.
"""

from __future__ import annotations

import math

from raetlike.journal import RecordKind
from raetlike.journal._delivery import MAX_TEXT

__all__ = ["CORRUPT_COLUMN", "DOUBLE_FIELDS", "KINDS", "LONG_FIELDS", "MOST_COUNT", "MOST_MS",
           "MOST_SEQUENCE", "MOST_TEXT", "MOST_WINDOWS", "RECEIVED_RANGE", "STRING_FIELDS",
           "WINDOW_STEPS", "choose_window", "fine_step"]

STRING_FIELDS = ("node", "source_estate", "source_yard", "source_share",
                 "destination_estate", "destination_yard", "destination_share", "kind", "topic")
LONG_FIELDS = ("version", "transaction_id", "request_id", "sequence", "body_bytes",
               "segments", "resends", "session_id")
DOUBLE_FIELDS = ("sent", "received")
"""A journal line's fields by type (docs/journal.md), in the order the pipeline reads them."""
CORRUPT_COLUMN = "_corrupt_record"
"""Where Spark's JSON reader puts a line it cannot parse (always null from pyarrow)."""
RECEIVED_RANGE = (0.0, 1e11)
"""Receive times (epoch seconds) a valid record has: from 1970 to about the year 5138.
Times outside (a clock's garbage or a forged line) would overflow the report's dates."""
MOST_COUNT = 1 << 32
"""The most ``body_bytes``, ``segments`` and ``resends`` a valid record has (none is
negative): the tables' sums of them stay exact up to 2**31 records a group."""
MOST_SEQUENCE = 1 << 62
"""The largest ``sequence`` (in magnitude) a valid record has: the audit's differences of
two numbers stay within a long."""
MOST_TEXT = MAX_TEXT
"""The most characters a valid record's text field has (node, endpoints, kind, topic): the
journal writer keeps a peer's text to as many (``raetlike.journal._delivery.MAX_TEXT``),
and the report's tables and plots are laid out from them."""
KINDS = tuple(kind.value for kind in RecordKind)
"""The kinds a valid record has (or none)."""
MOST_MS = 1e12
"""Latencies (ms) past this either way, about 31 years, are a clock's garbage: the latency
partial clamps them there."""

WINDOW_STEPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0,
                300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0)
"""Round window widths (seconds) the rate plot picks from."""

MOST_WINDOWS = 60
"""The rate plot's most windows; the fitted width gives at least 24 for a run of 1 s or more
(each round width is at most 2.5 times the one before it)."""


def choose_window(span_seconds: float, most: int = MOST_WINDOWS) -> float:
    """The smallest round width that cuts ``span_seconds`` into at most ``most`` windows.

    Windows are aligned to the epoch, so a span of ``k`` widths can touch
    ``k + 1`` of them: the width is chosen so that even then there are no
    more than ``most``.  A 12 s run gets 0.5 s windows (25 of them), a
    minute 2 s ones, an hour 2 min ones, a week 3 h ones.
    """
    for width in WINDOW_STEPS:
        if span_seconds / width + 1 <= most:
            return width
    days = WINDOW_STEPS[-1]
    return days * (span_seconds // (days * (most - 1)) + 1)


def fine_step(span_seconds: float) -> float:
    """A window width that divides every width :func:`choose_window` can give for a span
    of at least ``span_seconds`` (a run holding these records spans at least as long), so
    ``_tables.fine_sums`` at it roll up to the run's window: the greatest common divisor of the
    round widths from ``choose_window(span_seconds)`` up (and of whole days past them).
    An hour of records (span up to 3600 s, window 2 min or wider) gets 60 s."""
    chosen = round(choose_window(span_seconds) * 1000)
    step = round(WINDOW_STEPS[-1] * 1000)  # past the round widths: whole days
    for width in WINDOW_STEPS:
        if round(width * 1000) >= chosen:
            step = math.gcd(step, round(width * 1000))
    return step / 1000
