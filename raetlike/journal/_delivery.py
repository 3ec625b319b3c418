"""Map a delivered message (a road ``MessageReceived`` or alike) to a journal record.

Optional body keys a sender may set so the journal (and the pipeline's audit and
latency figures) know more; see docs/journal.md:

``_seq``   per-source sequence number (int)      ``_sent``  sender's wall clock (epoch s)
``_kind``  a :class:`RecordKind` value            ``_topic`` topic or method name
``_id``    request or survey id (int)             ``route``  ``{"src": [estate, yard, share],
                                                              "dst": [estate, yard, share]}``
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Protocol

from raetlike.journal._record import Endpoint, JournalRecord, RecordKind

__all__ = ["BODY_KEYS", "Delivery", "body_size", "record_from_delivery"]

BODY_KEYS = ("_seq", "_sent", "_kind", "_topic", "_id", "route")
"""Body keys the journal reads when present; everything else is only counted in size."""

_KINDS = {kind.value: kind for kind in RecordKind}


class Delivery(Protocol):
    """What the journal needs of a delivery event (``road.events.MessageReceived`` fits)."""

    @property
    def remote(self) -> str: ...
    @property
    def body(self) -> Any: ...
    @property
    def session_id(self) -> int: ...
    @property
    def transaction_id(self) -> int: ...
    @property
    def segments(self) -> int: ...


def body_size(body: object) -> int:
    """Bytes of a raw body, or of a mapping's compact JSON encoding."""
    if isinstance(body, bytes | bytearray | memoryview):
        return len(body)
    return len(json.dumps(body, separators=(",", ":"), default=str).encode())


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _route_end(route: object, key: str) -> Endpoint | None:
    if not isinstance(route, Mapping):
        return None
    triple = route.get(key)
    if not isinstance(triple, list | tuple) or len(triple) != 3 or not isinstance(triple[0], str):
        return None
    return Endpoint(triple[0], _text(triple[1]), _text(triple[2]))


_BUS_KINDS = {"event": RecordKind.EVENT, "request": RecordKind.REQUEST,
              "response": RecordKind.RESPONSE}


def _kind_and_topic(fields: Mapping[str, Any]) -> tuple[RecordKind, str | None]:
    """The record's kind and topic: the body's ``_kind``/``_topic`` keys when it has them,
    else what a bus message says of itself (``{"bus": {"ty": ..., "to": ...}}``), else the
    ``_kind`` inside an SP message's body (``{"sp": [...], "body": {...}}``), else a message."""
    topic = _text(fields.get("_topic"))
    kind = _KINDS.get(_text(fields.get("_kind")) or "")
    if kind is not None:
        return kind, topic
    bus = fields.get("bus")
    if isinstance(bus, Mapping):
        kind = _BUS_KINDS.get(_text(bus.get("ty")) or "")
        if kind is not None:
            return kind, topic or _text(bus.get("to"))
    inner = fields.get("body")
    if isinstance(fields.get("sp"), list) and isinstance(inner, Mapping):
        kind = _KINDS.get(_text(inner.get("_kind")) or "")
        if kind is not None:
            return kind, topic or _text(inner.get("_topic"))
    return RecordKind.MESSAGE, topic


def record_from_delivery(node: str, delivery: Delivery, received: float, *,
                         resends: int = 0) -> JournalRecord:
    """The journal record for ``delivery`` as journaled by ``node`` at wall time ``received``.

    The source is the remote estate (or the body's ``route.src`` triple), the
    destination ``node`` (or ``route.dst``).  Unknown or ill-typed body keys
    are ignored, never raised: a journal must not refuse traffic.
    """
    body = delivery.body
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    route = fields.get("route")
    kind, topic = _kind_and_topic(fields)
    return JournalRecord(
        node=node,
        source=_route_end(route, "src") or Endpoint(delivery.remote),
        destination=_route_end(route, "dst") or Endpoint(node),
        kind=kind,
        topic=topic,
        transaction_id=delivery.transaction_id,
        request_id=_integer(fields.get("_id")),
        sequence=_integer(fields.get("_seq")),
        body_bytes=body_size(body),
        segments=delivery.segments,
        resends=resends,
        sent=_seconds(fields.get("_sent")),
        received=received,
        session_id=delivery.session_id,
    )
