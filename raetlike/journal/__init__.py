"""A durable journal of delivered traffic: append-only JSON-line segments, hour-partitioned.

See docs/journal.md for the layout, the record schema and the fsync policy.
"""

from raetlike.journal._delivery import BODY_KEYS, Delivery, body_size, record_from_delivery
from raetlike.journal._reader import (
    JournalContents,
    SkippedLine,
    durable_marks_after,
    journal_files,
    read_journal,
    read_segment,
)
from raetlike.journal._record import (
    SCHEMA_VERSION,
    Endpoint,
    JournalRecord,
    RecordKind,
    decode_record,
    encode_record,
)
from raetlike.journal._writer import (
    DEFAULT_FSYNC,
    DEFAULT_FSYNC_INTERVAL,
    DEFAULT_MAX_AGE,
    DEFAULT_MAX_BYTES,
    OPEN_SUFFIX,
    SEALED_SUFFIX,
    FsyncPolicy,
    JournalWriter,
    partition_of,
)

__all__ = [
    "BODY_KEYS",
    "DEFAULT_FSYNC",
    "DEFAULT_FSYNC_INTERVAL",
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_BYTES",
    "OPEN_SUFFIX",
    "SCHEMA_VERSION",
    "SEALED_SUFFIX",
    "durable_marks_after",
    "Delivery",
    "Endpoint",
    "FsyncPolicy",
    "JournalContents",
    "JournalRecord",
    "JournalWriter",
    "RecordKind",
    "SkippedLine",
    "body_size",
    "decode_record",
    "encode_record",
    "journal_files",
    "partition_of",
    "read_journal",
    "read_segment",
    "record_from_delivery",
]
