"""The UXD driver: pumps one sans-IO lane stack over one UNIX datagram socket.

The socket is bound at the yard's path (``<dir>/<lane>.<yard>.uxd``).  The
directory is created owner-only (0700) and the socket file is made 0600.  A
socket file left by a dead process is replaced; one a live yard listens on is
never taken (:class:`YardRunningError`).  Datagrams the kernel refuses are
reported to the stack (``send_failed``), which keeps and retries them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
from typing import Protocol

from raetlike.errors import RaetError

__all__ = ["LaneLike", "UxdDriver", "YardRunningError", "claim_socket_path", "socket_is_live"]

log = logging.getLogger(__name__)

BUFFER_SIZE = 4 * 1024 * 1024  # room for many 64 KB pages each way
MAX_DATAGRAM = 65535
BATCH = 256  # datagrams drained per readiness, so one busy socket cannot starve the rest
DIRECTORY_MODE = 0o700
SOCKET_MODE = 0o600


class YardRunningError(RaetError):
    """A live yard already listens on the socket path we were asked to bind."""


class LaneLike(Protocol):
    """The sans-IO side a UXD driver pumps (``lane.LaneStack``)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    def receive_datagram(self, data: bytes, source: str | None, now: float) -> None: ...
    def datagrams_to_send(self, now: float) -> list[tuple[bytes, str]]: ...
    def send_failed(self, address: str, data: bytes, error: int, now: float) -> None: ...
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...


def socket_is_live(path: str) -> bool:
    """True when something listens on the datagram socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.connect(path)
    except OSError as exc:
        if exc.errno in {errno.ECONNREFUSED, errno.ENOENT}:
            return False
        raise
    finally:
        probe.close()
    return True


def _make_directory(directory: str) -> None:
    """Create ``directory`` owner-only if it is missing (an existing one is left as is)."""
    if os.path.isdir(directory):
        return
    os.makedirs(directory, mode=DIRECTORY_MODE, exist_ok=True)
    os.chmod(directory, DIRECTORY_MODE)  # makedirs' mode is filtered by the umask


def claim_socket_path(path: str, yard: str) -> None:
    """Make ``path`` free to bind: remove a stale socket, refuse a live one or a non-socket."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise YardRunningError(f"cannot start yard {yard}: {path} exists and is not a socket")
    if socket_is_live(path):
        raise YardRunningError(f"yard {yard} already running at {path}")
    log.info("yard %s: removing stale socket %s", yard, path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _set_buffer(sock: socket.socket, option: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError:  # pragma: no cover - capped by the kernel; the default still fits a page
        log.debug("could not set socket buffer option %s to %d", option, size)


class UxdDriver:
    """One bound UNIX datagram socket serving one lane stack."""

    def __init__(self, stack: LaneLike, path: str | None = None) -> None:
        self.stack = stack
        self.path = path or stack.path
        _make_directory(os.path.dirname(self.path) or ".")
        claim_socket_path(self.path, stack.name)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        _set_buffer(self.sock, socket.SO_RCVBUF, BUFFER_SIZE)
        _set_buffer(self.sock, socket.SO_SNDBUF, BUFFER_SIZE)
        try:
            self.sock.bind(self.path)
        except OSError as exc:
            self.sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise YardRunningError(
                    f"yard {stack.name} already running at {self.path}") from None
            raise OSError(exc.errno, f"cannot bind {self.path}: {exc.strerror}") from None
        os.chmod(self.path, SOCKET_MODE)
        self._inode = os.lstat(self.path).st_ino
        self.send_errors = 0
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self, now: float) -> int:
        """Drain up to a batch of datagrams into the stack; returns how many."""
        count = 0
        while count < BATCH:
            try:
                data, source = self.sock.recvfrom(MAX_DATAGRAM + 1)
            except BlockingIOError:
                break
            except OSError as exc:
                log.debug("%s: recvfrom: %s", self.stack.name, exc)
                break
            self.stack.receive_datagram(data, source or None, now)
            count += 1
        return count

    def send(self, now: float) -> int:
        """Send what the stack has; report each refused datagram back to the stack.

        After one refusal for an address, the rest of this round's datagrams
        for it are reported with the same error without being tried, so a
        yard's pages never overtake one another.
        """
        sent = 0
        refused: dict[str, int] = {}
        for data, address in self.stack.datagrams_to_send(now):
            error = refused.get(address)
            if error is None:
                try:
                    self.sock.sendto(data, address)
                except OSError as exc:
                    error = exc.errno or errno.EIO
                    refused[address] = error
                    self.send_errors += 1
                    log.debug("%s: sendto %s: %s", self.stack.name, address, exc)
                else:
                    sent += 1
                    continue
            self.stack.send_failed(address, data, error, now)
        return sent

    @property
    def wants_write(self) -> bool:
        """Always False: the stack retries refused pages on its own timer."""
        return False

    def service(self, now: float) -> None:
        """One round: read, let timers fire, write."""
        self.receive(now)
        timer = self.stack.get_timer()
        if timer is not None and timer <= now:
            self.stack.handle_timer(now)
        self.send(now)

    def close(self) -> None:
        """Close the socket and remove its file (unless another yard has replaced it)."""
        if self.closed:
            return
        self.closed = True
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)
