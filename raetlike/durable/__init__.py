"""Durable delivery: an outbox on disk and receive-side dedup that survive a crash.

:class:`DurableRoad` wraps a :class:`road.stack.RoadStack`: what ``transmit`` accepted is
on disk before it returns and is sent again after a restart until acknowledged; what was
received is handed over once, however often either side restarted.  See
docs/reliability.md, "Durable delivery".
"""

from raetlike.durable._api import DurableMessageReceived
from raetlike.durable._log import RecordLog
from raetlike.durable._outbox import DurableOutbox, Stored
from raetlike.durable._road import (
    DURABLE_KEY,
    DurableConfig,
    DurableRoad,
    is_durable_envelope,
)
from raetlike.durable._seen import DurableSeen

__all__ = [
    "DURABLE_KEY",
    "DurableConfig",
    "DurableMessageReceived",
    "DurableOutbox",
    "DurableRoad",
    "DurableSeen",
    "RecordLog",
    "Stored",
    "is_durable_envelope",
]
