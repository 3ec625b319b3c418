"""Map a delivered message (a road ``MessageReceived`` or alike) to a journal record.

Optional body keys a sender may set so the journal (and the pipeline's audit and
latency figures) know more; see docs/journal.md:

``_seq``   per-source sequence number (int)      ``_sent``  sender's wall clock (epoch s)
``_kind``  a :class:`RecordKind` value            ``_topic`` topic or method name
``_id``    request or survey id (int)             ``route``  ``{"src": [estate, yard, share],
                                                              "dst": [estate, yard, share]}``

A bus message's body is the bus's own (``{"bus": {...}}``), and an SP message
wraps the application's body: ``_sent`` is also read from a bus message's
payload (``bus.pl``) or an SP message's inner body when the outer body has none.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from raetlike._native import compiled
from raetlike.journal._record import (
    SCHEMA_VERSION,
    Endpoint,
    JournalRecord,
    RecordKind,
    encode_fields,
)

__all__ = ["BODY_KEYS", "COMPILED", "MAX_TEXT", "PLAIN_ROOM", "Delivery", "PlainLines", "body_size",
           "delivery_line", "record_from_delivery"]

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


_RAW = (bytes, bytearray, memoryview)


def body_size(body: object) -> int:
    """Bytes of a raw body, or of its compact JSON encoding in UTF-8, where a bytes value
    inside (msgpack's bin) counts its own length and anything else JSON has no form for
    counts as its ``str``.  Never raises: a body the encoders refuse (nested deeper than
    they go, integers past 64 bits, lone surrogates) is measured part by part
    (:func:`_walked_size`), without recursion."""
    if isinstance(body, _RAW):
        return len(body)
    try:
        return len(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS))  # the usual
    except (orjson.JSONEncodeError, TypeError):
        pass
    raw = [0]

    def default(value: object) -> object:
        if isinstance(value, _RAW):  # its length, not its repr (5x the bytes, and slow)
            raw[0] += len(value) - 4  # written as null
            return None
        return str(value)

    try:
        return len(orjson.dumps(body, default=default, option=orjson.OPT_NON_STR_KEYS)) + raw[0]
    except (orjson.JSONEncodeError, TypeError):  # too deep, integers past 64 bits, surrogates
        return _walked_size(body)


def _leaf_size(value: object) -> int:
    """Compact JSON bytes of one value that is not a container (bytes: their length)."""
    if isinstance(value, _RAW):
        return len(value)
    try:
        return len(orjson.dumps(value, default=str))
    except (orjson.JSONEncodeError, TypeError):  # an integer past 64 bits, a lone surrogate
        text = json.dumps(value, default=str, ensure_ascii=False)
        return len(text.encode(errors="surrogatepass"))


def _walked_size(body: object) -> int:
    """:func:`body_size` of a body the encoders refuse, walked with a stack of its own (a
    peer's msgpack may nest a thousand deep): each container's brackets, separators and
    keys, and each leaf's own encoding.  Linear in the body's parts."""
    total = 0
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            total += 2 + max(len(value) - 1, 0)  # braces and commas
            for key, item in value.items():
                total += _leaf_size(key if isinstance(key, str) else str(key)) + 1  # and ':'
                stack.append(item)
        elif isinstance(value, list | tuple):
            total += 2 + max(len(value) - 1, 0)
            stack.extend(value)
        else:
            total += _leaf_size(value)
    return total


_LONG = 1 << 63
_ULONG = 1 << 64  # orjson writes ints from -_LONG to below this
_NUMBERS = (int, float)
_SEQUENCES = (list, tuple)


def _integer(value: object) -> int | None:
    """A body's integer, if it fits the schema's 64-bit longs (Spark reads them so)."""
    if isinstance(value, int) and not isinstance(value, bool) and -_LONG <= value < _LONG:
        return value
    return None


def _seconds(value: object) -> float | None:
    """A body's time in seconds, if it is a finite number (an integer too big for a float
    is none)."""
    if type(value) is float:  # the usual
        return value if math.isfinite(value) else None
    if isinstance(value, _NUMBERS) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    return None


MAX_TEXT = 1024
"""The most characters of a peer's text a record keeps (a topic, a route's estate, yard and
share): a longer one is cut to its first ``MAX_TEXT``.  With JSON's escapes (six bytes for
a control character) a field is at most 6 KiB of its line."""


def _text(value: object) -> str | None:
    """A peer's string as a record keeps it (:data:`MAX_TEXT`), or None for anything else."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT]


def _route_end(route: object, key: str) -> Endpoint | None:
    if not isinstance(route, Mapping):
        return None
    triple = route.get(key)
    if not isinstance(triple, _SEQUENCES) or len(triple) != 3:
        return None
    estate = _text(triple[0])
    return None if estate is None else Endpoint(estate, _text(triple[1]), _text(triple[2]))


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


def _sent(fields: Mapping[str, Any]) -> float | None:
    """The body's ``_sent``, else the one in a bus message's payload or an SP message's body."""
    if "_sent" in fields:
        return _seconds(fields["_sent"])
    bus = fields.get("bus")
    inner = bus.get("pl") if isinstance(bus, Mapping) else (
        fields.get("body") if isinstance(fields.get("sp"), list) else None)
    return _seconds(inner.get("_sent")) if isinstance(inner, Mapping) else None


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
        sent=_sent(fields),
        received=received,
        session_id=delivery.session_id,
    )


_EMPTY: Mapping[str, Any] = {}
_MESSAGE = RecordKind.MESSAGE.value

@functools.lru_cache(maxsize=256)
def _plain_fields(node: str, remote: str) -> dict[str, Any]:
    """A raw-bytes delivery's line as a mapping, its six numbers to be filled in: such a
    body (the commonest) has no fields to read, so all else is fixed by (node, remote)."""
    return {
        "version": SCHEMA_VERSION, "node": node,
        "source_estate": remote, "source_yard": None, "source_share": None,
        "destination_estate": node, "destination_yard": None, "destination_share": None,
        "kind": _MESSAGE, "topic": None, "transaction_id": 0, "request_id": None,
        "sequence": None, "body_bytes": 0, "segments": 0, "resends": 0, "sent": None,
        "received": 0.0, "session_id": 0,
    }


def _fill_plain(line: dict[str, Any], delivery: Delivery, received: float, resends: int,
                fields: Mapping[str, Any]) -> bytes:
    """A plain delivery's line: its (node, remote)'s kept ``line`` refilled in place
    (``fields``: the body when it is a dict, else empty)."""
    body = delivery.body
    get = fields.get
    line["topic"] = _text(get("_topic"))
    line["transaction_id"] = delivery.transaction_id
    line["request_id"] = _integer(get("_id"))
    line["sequence"] = _integer(get("_seq"))
    line["body_bytes"] = len(body) if type(body) is bytes else body_size(body)
    line["segments"] = delivery.segments
    line["resends"] = resends
    line["sent"] = _seconds(get("_sent"))
    line["received"] = float(received)
    line["session_id"] = delivery.session_id
    return encode_fields(line)


_APPEND_PLAIN: Callable[[bytearray, dict[str, dict[str, bytes]], str, Delivery, float, int],
                        int] | None = compiled("raetlike.journal._cjournal", "append_kept")
"""The C hot path (``_cjournal.c``), unless missing or ``RAETLIKE_PURE_PYTHON`` is set."""
COMPILED = _APPEND_PLAIN is not None
"""Whether raw-bytes deliveries are journaled by the compiled path (the same bytes)."""

PLAIN_ROOM = 4096
"""The longest line :class:`PlainLines` appends (the compiled path's: names of at most
:data:`_PLAIN_NAMES` bytes, numbers of at most 20 digits)."""
_PLAIN_NAMES = 3072
_TAIL_ROOM = 512  # a raw-bytes line's numbers and keys after its prefix, at most (as in C)
_TRANSACTION_KEY = b'"transaction_id":'


_ROUTING = frozenset(("route", "_kind", "bus", "sp"))
"""Body keys that make a delivery's line more than its (node, remote) and numbers."""


class PlainLines:
    """Plain deliveries appended to a batch as :func:`delivery_line` writes them, byte
    for byte, without building a record.  A delivery is plain when its body is raw
    bytes (the commonest), or a dict with none of the keys that route or classify it
    (:data:`_ROUTING`): its line then differs from its (node, remote)'s only in a few
    numbers and its ``_topic``, so the rest is kept, for at most :attr:`MOST` of them.

    The compiled path writes a raw-bytes line's numbers after a kept prefix; otherwise
    a kept mapping is refilled in place.  One per
    :class:`~raetlike.journal.JournalWriter` (used, like it, from one thread).
    """

    MOST = 256

    def __init__(self, *, compiled: bool = True) -> None:
        self._append = _APPEND_PLAIN if compiled else None
        self._kept: dict[tuple[str, str], dict[str, Any]] = {}  # a pair's fields
        self._prefixes: dict[str, dict[str, bytes]] = {}  # node -> remote -> line prefix
        self._time = -1.0  # the last received time a raw-bytes line had, and its digits
        self._time_text = b""

    @property
    def prefixes(self) -> dict[str, dict[str, bytes]]:
        """Each kept pair's line up to its numbers (``b""``: names too long to keep), by
        node and remote: the compiled batch reads it (the same dict, cleared with the rest
        past :attr:`MOST` pairs)."""
        return self._prefixes

    def append(self, batch: bytearray, node: str, delivery: Delivery,  # noqa: PLR0912
               received: float, resends: int) -> int:
        """Append ``delivery``'s line to ``batch``; the bytes appended, at most
        :data:`PLAIN_ROOM`.  0, appending nothing, for a delivery this does not write:
        one that is not plain, a longer line, or a number the compiled path leaves to
        the general one."""
        if self._append is not None:
            # a raw-bytes body whose pair is kept: all of it in C, prefix lookup included
            size = self._append(batch, self._prefixes, node, delivery, received, resends)
            if size > 0:
                return size
        else:
            # the same in Python: a raw-bytes body whose pair is kept, its numbers
            # formatted here (ints that orjson takes, which it writes as %d does; a
            # received float where repr writes orjson's digits)
            body = delivery.body
            prefix = self._prefixes.get(node, _NO_PREFIXES).get(delivery.remote)
            if (prefix and type(body) is bytes and type(received) is float
                    and 1e-4 <= received < 1e16):
                transaction_id, segments, session_id = (
                    delivery.transaction_id, delivery.segments, delivery.session_id)
                if (type(transaction_id) is int and type(segments) is int
                        and type(session_id) is int and type(resends) is int
                        and -_LONG <= transaction_id < _ULONG and -_LONG <= segments < _ULONG
                        and -_LONG <= session_id < _ULONG and -_LONG <= resends < _ULONG):
                    if received != self._time:  # an estate's round has one time: once
                        self._time, self._time_text = received, repr(received).encode()
                    line = _RAW_LINE % (prefix, transaction_id, len(body), segments, resends,
                                        self._time_text, session_id)
                    if len(line) <= PLAIN_ROOM:
                        batch += line
                        return len(line)
        key = (node, delivery.remote)
        fields = self._kept.get(key)
        if fields is None:
            if len(self._kept) >= self.MOST:
                self._kept.clear()
                self._prefixes.clear()
            fields, prefix = _plain(node, delivery.remote)
            self._kept[key] = fields
            self._prefixes.setdefault(node, {})[delivery.remote] = prefix
            if prefix:  # the next time, the raw-bytes path above (C or Python) takes it
                return self.append(batch, node, delivery, received, resends)
        body = delivery.body
        if type(body) is bytes:
            line = _fill_plain(fields, delivery, received, resends, _EMPTY)
        elif type(body) is dict and _ROUTING.isdisjoint(body):
            line = _fill_plain(fields, delivery, received, resends, body)
        else:
            return 0
        if len(line) > PLAIN_ROOM:
            return 0
        batch += line
        return len(line)


_NO_PREFIXES: dict[str, bytes] = {}
_RAW_LINE = (b'%s%d,"request_id":null,"sequence":null,"body_bytes":%d,"segments":%d,'
             b'"resends":%d,"sent":null,"received":%s,"session_id":%d}\n')
"""A raw-bytes delivery's line after its pair's prefix (which ends ``"transaction_id":``)."""


def _plain(node: str, remote: str) -> tuple[dict[str, Any], bytes]:
    """A (node, remote)'s kept fields and line prefix (empty: names too long to keep, or
    whose escapes make the prefix too long for a line within PLAIN_ROOM)."""
    fields = _plain_fields(node, remote).copy()
    if len(node.encode(errors="replace")) + len(remote.encode(errors="replace")) > _PLAIN_NAMES:
        return fields, b""
    line = encode_fields(fields)
    prefix = line[:line.index(_TRANSACTION_KEY) + len(_TRANSACTION_KEY)]
    return fields, prefix if len(prefix) <= PLAIN_ROOM - _TAIL_ROOM else b""


def delivery_line(node: str, delivery: Delivery, received: float, *, resends: int = 0) -> bytes:
    """The JSON line of :func:`record_from_delivery`'s record, without making the record.

    The journal's hot path: the same fields and values as
    ``encode_record(record_from_delivery(...))``, byte for byte (a test holds
    the two to it), built straight into the flat mapping the line is.
    """
    body = delivery.body
    if type(body) is bytes:
        return _fill_plain(_plain_fields(node, delivery.remote).copy(), delivery, received,
                           resends, _EMPTY)
    fields = body if isinstance(body, dict) else (body if isinstance(body, Mapping) else _EMPTY)
    get = fields.get
    route = get("route")
    source = None if route is None else _route_end(route, "src")
    destination = None if route is None else _route_end(route, "dst")
    if "_kind" in fields or "bus" in fields or "sp" in fields:
        kind, topic = _kind_and_topic(fields)
        kind_value, sent = kind.value, _sent(fields)
    else:
        kind_value, topic, sent = _MESSAGE, _text(get("_topic")), _seconds(get("_sent"))
    line: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "node": node,
        "source_estate": delivery.remote if source is None else source.estate,
        "source_yard": None if source is None else source.yard,
        "source_share": None if source is None else source.share,
        "destination_estate": node if destination is None else destination.estate,
        "destination_yard": None if destination is None else destination.yard,
        "destination_share": None if destination is None else destination.share,
        "kind": kind_value,
        "topic": topic,
        "transaction_id": delivery.transaction_id,
        "request_id": _integer(get("_id")),
        "sequence": _integer(get("_seq")),
        "body_bytes": body_size(body),
        "segments": delivery.segments,
        "resends": resends,
        "sent": sent,
        "received": float(received),
        "session_id": delivery.session_id,
    }
    return encode_fields(line)
