"""One journal record: what a node delivered, as a frozen dataclass and a JSON line."""

from __future__ import annotations

import enum
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["SCHEMA_VERSION", "Endpoint", "JournalRecord", "RecordKind", "decode_record",
           "encode_fields",
           "encode_record"]

SCHEMA_VERSION = 1
"""Written as ``version`` in every record; bumped only for incompatible changes."""


class RecordKind(enum.Enum):
    """What sort of traffic a delivered message was."""

    MESSAGE = "message"
    REQUEST = "request"
    RESPONSE = "response"
    EVENT = "event"
    SURVEY = "survey"
    SURVEY_RESPONSE = "survey_response"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A place on the network: an estate, optionally a yard in it and a share in that."""

    estate: str
    """The estate's name."""
    yard: str | None = None
    """The yard's name, when the traffic was addressed to or from a yard."""
    share: str | None = None
    """The share (application endpoint) name, when known."""


@dataclass(frozen=True, slots=True)
class JournalRecord:
    """One delivered message as the journaling node saw it."""

    node: str
    """The node that journaled the delivery (usually the destination estate)."""
    source: Endpoint
    """Who sent the message."""
    destination: Endpoint
    """To whom it was delivered."""
    kind: RecordKind
    """Message, request, response, event, survey or survey response."""
    topic: str | None
    """The topic or method, when the message names one."""
    transaction_id: int
    """The sender's transaction id for the message."""
    request_id: int | None
    """The request or survey id (pairs a response with its request)."""
    sequence: int | None
    """The sender's per-source sequence number (body key ``_seq``)."""
    body_bytes: int
    """Size of the body (raw bytes, or its compact JSON encoding)."""
    segments: int
    """How many segments (packets) carried it."""
    resends: int
    """Resend requests attributed to it (see docs/journal.md)."""
    sent: float | None
    """Sender's wall clock when sent, seconds since the epoch (body key ``_sent``)."""
    received: float
    """Receiver's wall clock when delivered, seconds since the epoch."""
    session_id: int
    """The sender's session id the message travelled in."""


def _endpoint_fields(prefix: str, endpoint: Endpoint) -> dict[str, Any]:
    return {f"{prefix}_estate": endpoint.estate, f"{prefix}_yard": endpoint.yard,
            f"{prefix}_share": endpoint.share}


def encode_record(record: JournalRecord) -> bytes:
    """One JSON line (UTF-8, ending in a newline) for ``record``; flat, see docs/journal.md."""
    fields: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "node": record.node,
        **_endpoint_fields("source", record.source),
        **_endpoint_fields("destination", record.destination),
        "kind": record.kind.value,
        "topic": record.topic,
        "transaction_id": record.transaction_id,
        "request_id": record.request_id,
        "sequence": record.sequence,
        "body_bytes": record.body_bytes,
        "segments": record.segments,
        "resends": record.resends,
        "sent": record.sent,
        "received": record.received,
        "session_id": record.session_id,
    }
    return encode_fields(fields)


def encode_fields(fields: dict[str, Any]) -> bytes:
    """The JSON line of a record's flat fields, in the schema's key order.

    orjson writes it (UTF-8, compact, floats in their shortest round-trip
    form).  A string with a lone surrogate (a peer's JSON may carry ``"\\ud800"``,
    which no UTF-8 holds) is written with U+FFFD in its place, so every line is
    UTF-8 that every reader takes (orjson refuses the escape; Spark does not);
    an integer past 64 bits goes through the standard library.  A journal never
    refuses a record for what its text holds.
    """
    try:
        return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        clean = {key: _LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value
                 for key, value in fields.items()}
        try:
            return orjson.dumps(clean, option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError:  # an integer past 64 bits
            return (json.dumps(clean, separators=(",", ":")) + "\n").encode()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    return value


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, not {type(value).__name__}")
    return value


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds")
    return float(value)


def _optional_text(value: object, name: str) -> str | None:
    return None if value is None else _text(value, name)


def _optional_integer(value: object, name: str) -> int | None:
    return None if value is None else _integer(value, name)


def _optional_seconds(value: object, name: str) -> float | None:
    return None if value is None else _seconds(value, name)


def _endpoint(fields: dict[str, Any], prefix: str) -> Endpoint:
    return Endpoint(_text(fields.get(f"{prefix}_estate"), f"{prefix}_estate"),
                    _optional_text(fields.get(f"{prefix}_yard"), f"{prefix}_yard"),
                    _optional_text(fields.get(f"{prefix}_share"), f"{prefix}_share"))


def decode_record(line: bytes) -> JournalRecord:
    """Parse one JSON line; raises :class:`ValueError` for anything but a whole record."""
    fields = json.loads(line)  # the standard library: any integer reads as one
    if not isinstance(fields, dict):
        raise ValueError("a record is a JSON object")
    if fields.get("version") != SCHEMA_VERSION:
        raise ValueError(f"unknown record version {fields.get('version')!r}")
    return JournalRecord(
        node=_text(fields.get("node"), "node"),
        source=_endpoint(fields, "source"),
        destination=_endpoint(fields, "destination"),
        kind=RecordKind(fields.get("kind")),
        topic=_optional_text(fields.get("topic"), "topic"),
        transaction_id=_integer(fields.get("transaction_id"), "transaction_id"),
        request_id=_optional_integer(fields.get("request_id"), "request_id"),
        sequence=_optional_integer(fields.get("sequence"), "sequence"),
        body_bytes=_integer(fields.get("body_bytes"), "body_bytes"),
        segments=_integer(fields.get("segments"), "segments"),
        resends=_integer(fields.get("resends"), "resends"),
        sent=_optional_seconds(fields.get("sent"), "sent"),
        received=_seconds(fields.get("received"), "received"),
        session_id=_integer(fields.get("session_id"), "session_id"),
    )
