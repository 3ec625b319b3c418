"""Helpers for journal and pipeline tests: records with chosen fields."""

from __future__ import annotations

from raetlike.journal import Endpoint, JournalRecord, RecordKind

HOUR_START = 1_767_261_600.0  # 2026-01-01T10:00:00Z


def record(sequence: int | None = 1, *, node: str = "main", source: str = "minion",
           received: float = HOUR_START + 1.0, sent: float | None = HOUR_START + 0.99,
           kind: RecordKind = RecordKind.MESSAGE, topic: str | None = "ping",
           body_bytes: int = 100, segments: int = 1, resends: int = 0) -> JournalRecord:
    """A journal record from ``source`` to ``node`` with the given fields."""
    return JournalRecord(
        node=node, source=Endpoint(source), destination=Endpoint(node, "yard1", None),
        kind=kind, topic=topic, transaction_id=(sequence or 0) + 1, request_id=None,
        sequence=sequence, body_bytes=body_bytes, segments=segments, resends=resends,
        sent=sent, received=received, session_id=7,
    )
