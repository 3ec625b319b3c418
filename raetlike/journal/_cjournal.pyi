"""The journal's compiled hot path (``_cjournal.c``), used by ``_delivery.PlainLines``."""

from raetlike.journal._delivery import Delivery

def append_kept(buffer: bytearray, prefixes: dict[str, dict[str, bytes]], node: str,
                delivery: Delivery, received: float, resends: int, /) -> int: ...
