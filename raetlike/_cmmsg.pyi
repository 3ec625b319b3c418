"""Batched UNIX datagram syscalls (``_cmmsg.c``: recvmmsg, sendmmsg), used by ``raetlike.uxd``."""

SEND_ALONE: int
MAX_COUNT: int
MAX_SIZE: int

class Receiver:
    """A receive buffer of its own for recv_batch and take (one per driver)."""

    def recv_batch(self, fd: int, count: int, size: int, /) -> list[str | bytes | None]: ...
    def take(self, index: int, /) -> bytes: ...

def send_batch(fd: int, datagrams: list[tuple[bytes, str]], start: int, /) -> tuple[int, int]: ...
