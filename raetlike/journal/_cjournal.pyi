"""The journal's compiled hot path (``_cjournal.c``), used by ``_delivery.PlainLines`` and
``_writer.JournalWriter``."""

from collections.abc import Callable
from typing import Any

from raetlike.journal._delivery import Delivery

def append_kept(buffer: bytearray, prefixes: dict[str, dict[str, bytes]], node: str,
                delivery: Delivery, received: float, resends: int, /) -> int: ...

class Batch:
    """A writer's lines waiting for ``write()``, and its ``record_delivery``."""

    start: float
    end: float
    limit: int
    written: int
    written_records: int
    @property
    def records(self) -> int: ...
    def __init__(self, prefixes: dict[str, dict[str, bytes]],
                 slow: Callable[..., None], full: Callable[[], Any], /) -> None: ...
    def __call__(self, node: str, delivery: Delivery, received: float, *,
                 resends: int = 0) -> None: ...
    def __len__(self) -> int: ...
    def append(self, line: bytes | bytearray | memoryview, /) -> None: ...
    def write(self, fd: int, /) -> int: ...
    def clear(self) -> None: ...
    def getvalue(self) -> bytes: ...
