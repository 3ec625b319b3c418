"""Log output for the ``raetlike`` commands: one line per record, as text or JSON.

Text (the default) reads ``2026-11-24 02:10:30,123 WARNING road._transaction:
minion: join with main failed: timed out``: time, level, the logger's name
(which module spoke), then the message.  ``--log-format json`` writes one
JSON object per line instead, for log shippers::

    {"ts": "2026-11-24T02:10:30.123456+00:00", "level": "WARNING",
     "logger": "road._transaction", "msg": "minion: join with main failed: timed out"}

with ``exc`` (the formatted traceback) when the record carries one.  Messages
that quote the network are already made safe by :func:`raetlike.names.safe_name`
where they are logged; JSON escaping keeps every line one line regardless.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

__all__ = ["FORMATS", "JsonFormatter", "TEXT_FORMAT", "setup_logging"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (ISO 8601, UTC), ``level``, ``logger``, ``msg``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


class _Handler(logging.StreamHandler[TextIO]):
    """A stream handler of ours: to ``stream``, or to whatever ``sys.stderr`` is at the time."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__(sys.stderr if stream is None else stream)
        self.follow_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self.follow_stderr:
            self.stream = sys.stderr  # a caller (or a test) may have swapped it since
        super().emit(record)


def setup_logging(level: int, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Send the root logger's records at ``level`` and above to ``stream`` (stderr).

    Replaces the handler an earlier call installed; handlers others installed
    (an embedding program's, pytest's) stay.
    """
    if log_format not in FORMATS:
        raise ValueError(f"unknown log format {log_format!r}: choose from {', '.join(FORMATS)}")
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else
                         logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, _Handler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
