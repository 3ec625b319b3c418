"""The journal's compiled hot path (``_cjournal.c``), used by ``_delivery.PlainLines``."""

from raetlike.journal._delivery import Delivery

def append_plain(buffer: bytearray, prefix: bytes, delivery: Delivery, received: float,
                 resends: int, /) -> int: ...
