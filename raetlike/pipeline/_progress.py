"""A one-line progress display of a Spark run, for a terminal.

A thread polls Spark's status tracker (no UI, no listener) a few times a
second and rewrites one line on stderr::

    pipeline: 2 stages running, 7 done; stage 9: 31/40 tasks; 999,000 records

The records figure appears once the first count is in (the job sets it);
before that, the line shows the journal's size being read.  Nothing is shown
when stderr is not a terminal (a log file, CI) or with ``-q``.
"""

from __future__ import annotations

import threading
from typing import TextIO

from pyspark import SparkContext

__all__ = ["Progress"]

POLL = 0.25  # seconds between looks at the status tracker


class Progress:
    """Show the progress of ``context``'s jobs on ``stream`` until :meth:`close`."""

    def __init__(self, context: SparkContext, stream: TextIO, *, input_bytes: int = 0) -> None:
        self.context = context
        self.stream = stream
        self.input_bytes = input_bytes
        self._records: int | None = None
        self.stages_done: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one writer of the line at a time
        self._width = 0
        self._thread = threading.Thread(target=self._run, name="pipeline progress", daemon=True)
        self._thread.start()

    @property
    def records(self) -> int | None:
        """The run's record count, once known (shown at once: the rest of a run may take
        less than a poll)."""
        return self._records

    @records.setter
    def records(self, count: int | None) -> None:
        self._records = count
        self._refresh()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            if not self._refresh():
                return

    def _refresh(self) -> bool:
        """Show the current line; False when Spark cannot be asked any more."""
        try:
            line = self.line()
        except Exception:  # noqa: BLE001 - the context may be stopping; stop showing
            return False
        if line and not self._stop.is_set():
            self._show(line)
        return True

    def line(self) -> str:
        """The current line (also what a test reads)."""
        tracker = self.context.statusTracker()
        active = []
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                active.append((stage_id, info.numCompletedTasks, info.numTasks))
        for job_id in tracker.getJobIdsForGroup(None):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                info = tracker.getStageInfo(stage_id)
                if info is not None and info.numTasks and info.numCompletedTasks == info.numTasks:
                    self.stages_done.add(stage_id)
        parts = [f"{len(active)} stage(s) running, {len(self.stages_done)} done"]
        if active:
            stage_id, done, total = max(active)
            parts.append(f"stage {stage_id}: {done}/{total} tasks")
        if self._records is not None:
            parts.append(f"{self._records:,} records")
        elif self.input_bytes:
            parts.append(f"reading {_size(self.input_bytes)} of journal")
        return "pipeline: " + "; ".join(parts)

    def _show(self, line: str) -> None:
        with self._lock:
            padding = " " * max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write(f"\r{line}{padding}")
            self.stream.flush()

    def close(self) -> None:
        """Stop polling and clear the line."""
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"  # pragma: no cover
