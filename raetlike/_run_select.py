"""What the cooperative loop sleeps in: the selector interface and an epoll one."""

from __future__ import annotations

import contextlib
import math
import select
import selectors
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Selector", "EpollSelector"]


class Selector(Protocol):
    """The part of :class:`selectors.BaseSelector` the loop uses (a fake one runs tests)."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> Any: ...
    def unregister(self, fileobj: Any) -> Any: ...
    def modify(self, fileobj: Any, events: int, data: Any = None) -> Any: ...
    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]: ...
    def close(self) -> None: ...


class EpollSelector:
    """The :class:`Selector` the loop uses by default on Linux: epoll, without the
    key objects of :mod:`selectors` (the loop asks :meth:`ready` for the data of
    each ready descriptor, one list per round and nothing else allocated)."""

    __slots__ = ("_data", "_epoll")

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._data: dict[int, Any] = {}

    @staticmethod
    def _mask(events: int) -> int:
        return (select.EPOLLIN if events & selectors.EVENT_READ else 0) \
            | (select.EPOLLOUT if events & selectors.EVENT_WRITE else 0)

    def register(self, fileobj: Any, events: int, data: Any = None) -> Any:
        """Watch the descriptor ``fileobj`` for ``events`` (selectors' EVENT_ flags)."""
        self._epoll.register(fileobj, self._mask(events))
        self._data[fileobj] = data
        return data

    def unregister(self, fileobj: Any) -> Any:
        """Stop watching ``fileobj``; returns its data."""
        with contextlib.suppress(OSError, ValueError):  # closed already: epoll forgot it
            self._epoll.unregister(fileobj)
        return self._data.pop(fileobj, None)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> Any:
        """Watch ``fileobj`` for other ``events``."""
        self._epoll.modify(fileobj, self._mask(events))
        self._data[fileobj] = data
        return data

    def ready(self, timeout: float) -> list[Any]:
        """The data of every ready descriptor, after waiting at most ``timeout`` seconds."""
        # epoll counts milliseconds: round up, or a wait under 1 ms would be a busy poll
        timeout = math.ceil(timeout * 1e3) * 1e-3 if timeout > 0 else 0.0
        data = self._data
        return [data.get(fd) for fd, _ in self._epoll.poll(timeout)]

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        """:meth:`selectors.BaseSelector.select`'s shape (keys are the data here)."""
        wait = -1.0 if timeout is None else timeout
        return [(_Key(item), selectors.EVENT_READ) for item in self.ready(wait)]

    def close(self) -> None:
        """Close the epoll descriptor."""
        self._epoll.close()
        self._data.clear()


@dataclass(frozen=True, slots=True)
class _Key:
    data: Any
