"""Read journal directories back: whole records, and a report of lines that were skipped."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from raetlike.journal._record import JournalRecord, decode_record
from raetlike.journal._writer import OPEN_SUFFIX, SEALED_SUFFIX

__all__ = ["JournalContents", "SkippedLine", "journal_files", "read_journal", "read_segment"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line of a segment that is not a whole record."""

    path: Path
    """The segment file."""
    line: int
    """1-based line number."""
    reason: str
    """``torn`` for an unterminated last line that does not parse, else why it failed."""


@dataclass(frozen=True, slots=True)
class JournalContents:
    """Everything read from one or more journal directories."""

    records: list[JournalRecord] = field(default_factory=list)
    """Whole records, segment by segment in name order, in file order within a segment."""
    skipped: list[SkippedLine] = field(default_factory=list)
    """Lines that were not records (a torn last record after a crash, garbage)."""
    files: list[Path] = field(default_factory=list)
    """The segment files read."""


def journal_files(directory: Path, *, include_open: bool = True) -> list[Path]:
    """Segment files under a journal directory, sorted by partition and name."""
    suffixes = (SEALED_SUFFIX, OPEN_SUFFIX) if include_open else (SEALED_SUFFIX,)
    found = [p for p in Path(directory).glob("date=*/hour=*/*")
             if p.is_file() and p.name.endswith(suffixes)]
    return sorted(found, key=lambda p: (p.parent.parent.name, p.parent.name,
                                        p.name.removesuffix(".open")))


def read_segment(path: Path, skipped: list[SkippedLine]) -> Iterator[JournalRecord]:
    """The whole records of one segment; lines that are not are appended to ``skipped``."""
    with path.open("rb") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                yield decode_record(line)
            except (ValueError, KeyError, TypeError) as exc:
                reason = "torn" if not line.endswith(b"\n") else f"bad record: {exc}"
                skipped.append(SkippedLine(path, number, reason))
                log.warning("journal: skipped %s line %d (%s)", path, number, reason)


def read_journal(directories: Iterable[Path], *, include_open: bool = True) -> JournalContents:
    """Read every segment under ``directories``; never raises for damaged content."""
    contents = JournalContents()
    for directory in directories:
        for path in journal_files(directory, include_open=include_open):
            contents.files.append(path)
            contents.records.extend(read_segment(path, contents.skipped))
    return contents
