"""Read journal directories back: whole records, and a report of lines that were skipped."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from raetlike.journal._record import JournalRecord, decode_record
from raetlike.journal._writer import _ANY_SEGMENT_NAME, OPEN_SUFFIX, SEALED_SUFFIX

__all__ = ["JournalContents", "SkippedLine", "durable_marks_after", "journal_files",
           "read_journal", "read_segment"]

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
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
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


def durable_marks_after(directory: Path, node: str,
                        position: list[int | str]) -> Iterator[tuple[str, int, int]]:
    """``(durable_from, durable_store, durable_seq)`` of every line ``node``'s writer
    journaled after ``position`` (:meth:`JournalWriter.position`) that carries a durable
    id; a torn or bad line is skipped (it was never a delivery the writer finished).

    Segments are taken in the order of their serial numbers, which a writer continues
    from the highest in the node's journal, never by the wall-clock stamps in their
    names (a clock that steps back names a later segment earlier): those of the
    position's process id from the position's segment on.  Of the segments with the
    position's serial, the one with its stamp is the position's; when the position was
    taken with no segment open (offset 0) a later stamp is the segment the writer opened
    next.  Any other (an older run's, from a journal written before serials continued
    across runs, or a second writer of the node in the same process, which is not
    supported) is left out."""
    pid, stamp, serial, offset = int(position[0]), str(position[1]), int(position[2]), \
        int(position[3])
    segments = []
    for path in Path(directory).glob(f"date=*/hour=*/{glob_escape(node)}.*"):
        match = _ANY_SEGMENT_NAME.match(path.name)
        if (match is None or match["node"] != node or int(match["pid"]) != pid
                or int(match["serial"]) < serial
                or (int(match["serial"]) == serial and match["stamp"] != stamp
                    and (offset > 0 or match["stamp"] < stamp))):
            continue
        segments.append(((int(match["serial"]), match["stamp"]), path))
    for key, path in sorted(segments):
        with path.open("rb") as stream:
            if key == (serial, stamp):
                stream.seek(offset)
            for line in stream:
                if not line.endswith(b"\n"):
                    break
                try:
                    fields = orjson.loads(line)
                    sender = fields.get("durable_from")
                    store, seq = fields.get("durable_store"), fields.get("durable_seq")
                    if type(sender) is str and type(store) is int and type(seq) is int:
                        yield sender, store, seq
                except (orjson.JSONDecodeError, KeyError, AttributeError):
                    continue


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters escaped."""
    return re.sub(r"([*?\[])", r"[\1]", name)
