"""The UXD driver: pumps one sans-IO lane stack over one UNIX datagram socket.

The socket is bound at the yard's path (``<dir>/<lane>.<yard>.uxd``).  The
directory is created owner-only (0700) if missing; an existing one is used
only when the running user owns it and neither group nor others may write it
(:class:`~raetlike.errors.UnsafePathError` otherwise, naming the fix, see
:mod:`raetlike.localfiles`).  The socket file is made 0600.  A socket file
left by a dead process is replaced; one a live yard listens on is never taken
(:class:`YardRunningError`).  Datagrams the kernel refuses are
reported to the stack (``send_failed``), which keeps and retries them.

A receiving yard's queue holds only ``/proc/sys/net/unix/max_dgram_qlen``
datagrams; past that ``sendto`` fails with EAGAIN.  Our socket is not
connected (it sends to every yard), so its writability says nothing about a
yard's queue.  On Linux the driver therefore keeps, per busy yard socket, an
unbound *waiter* socket connected to it: the kernel reports the waiter
writable as soon as that yard's queue has room.  The driver's ``fileno`` is
then an epoll descriptor holding the bound socket (readable) and the armed
waiters (writable); it turns readable on either, and :meth:`UxdDriver.receive`
tells the stack which yards have room again (``send_ready``).

Where ``raetlike._cmmsg`` was built (Linux, a C compiler at install) the driver reads
and writes up to 64 datagrams a syscall (recvmmsg, sendmmsg); without it, or with
``RAETLIKE_PURE_PYTHON`` set, one a ``recvfrom``/``sendto``.  Both hand the stack the
same datagrams and report the same refusals (docs/performance.md, "Batched syscalls").

A yard's address is its socket file's path.  A datagram from a sender bound to an
abstract name (which the socket module gives as ``bytes``) is dropped before the stack
sees it and counted in :attr:`UxdDriver.foreign_sources`, on both paths alike; an
unbound sender's datagrams go to the stack with no source (``None``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import stat
from collections.abc import Callable
from typing import Any, Protocol

from raetlike._native import compiled
from raetlike.errors import RaetError
from raetlike.localfiles import make_private_directory
from raetlike.names import safe_name

__all__ = ["LaneLike", "UxdDriver", "YardRunningError", "claim_socket_path", "socket_is_live"]

log = logging.getLogger(__name__)

BUFFER_SIZE = 4 * 1024 * 1024  # room for many 64 KB pages each way
MAX_DATAGRAM = 65535
BATCH = 256  # datagrams drained per readiness, so one busy socket cannot starve the rest
BUSY_ERRORS = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})
WAITERS = 64  # waiter sockets kept at most (one per busy yard socket)
SOCKET_MODE = 0o600


class _Receiver(Protocol):
    """``raetlike._cmmsg.Receiver``: recvmmsg into a buffer of its own (one per driver)."""

    def recv_batch(self, fd: int, count: int, size: int, /) -> list[Any]: ...
    def take(self, index: int, /) -> bytes: ...


_new_receiver: Callable[[], _Receiver] | None = compiled("raetlike._cmmsg", "Receiver")
_send_batch: Callable[[int, list[tuple[bytes, str]], int], tuple[int, int]] | None = compiled(
    "raetlike._cmmsg", "send_batch")
BATCHED = None not in (_new_receiver, _send_batch)
"""Whether drivers use recvmmsg/sendmmsg (``raetlike._cmmsg`` built, the pure path not asked
for)."""
_CHUNK = 64  # datagrams a recvmmsg or sendmmsg takes at most (_cmmsg.c's MAX_COUNT)
_SEND_ALONE = -1  # send_batch's answer for a datagram only sendto sends (_cmmsg.c)


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
    def send_ready(self, address: str, now: float) -> None: ...
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


def claim_socket_path(path: str, yard: str) -> None:
    """Make ``path`` free to bind: remove a stale socket, refuse a live one or a non-socket."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise YardRunningError(
            f"cannot start yard {safe_name(yard)}: {safe_name(path)} exists and is not a socket")
    if socket_is_live(path):
        raise YardRunningError(f"yard {safe_name(yard)} already running at {safe_name(path)}")
    log.info("yard %s: removing stale socket %s", safe_name(yard), safe_name(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _set_buffer(sock: socket.socket, option: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError:  # pragma: no cover - capped by the kernel; the default still fits a page
        log.debug("could not set socket buffer option %s to %d", option, size)


MAX_SOCKET_PATH = 107
"""Bytes a UNIX socket path may have on Linux (``sun_path`` is 108 with its NUL)."""


def check_socket_path(path: str) -> None:
    """Raise OSError (ENAMETOOLONG, one line naming the fix) for a path a socket cannot bind."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise OSError(errno.ENAMETOOLONG,
                      f"lane socket path {path} is {size} bytes, and a UNIX socket path holds "
                      f"at most {MAX_SOCKET_PATH}: use a shorter lane directory (--dir) or "
                      "lane or yard name")


class UxdDriver:
    """One bound UNIX datagram socket serving one lane stack."""

    def __init__(self, stack: LaneLike, path: str | None = None) -> None:
        self.stack = stack
        self.path = path or stack.path
        check_socket_path(self.path)
        make_private_directory(os.path.dirname(self.path) or ".", "lane directory")
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
        self.foreign_sources = 0
        """Datagrams dropped because their sender was not a socket file (an abstract name)."""
        self.closed = False
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        if self._epoll is not None:
            self._epoll.register(self.sock.fileno(), select.EPOLLIN)
        self._waiters: dict[str, socket.socket] = {}
        self._waiting: dict[int, str] = {}  # armed waiter fd -> the address it watches
        self._woke: set[str] = set()  # woken by their waiter; no datagram tried since
        self.batched = BATCHED
        """recvmmsg/sendmmsg (``raetlike._cmmsg``), or a syscall per datagram when False."""
        # recvmmsg's buffer, this driver's own: drivers on other threads never touch it
        self._receiver = _new_receiver() if _new_receiver is not None else None

    def fileno(self) -> int:
        """What to select on for reading: the epoll descriptor, or the socket without epoll."""
        return self.sock.fileno() if self._epoll is None else self._epoll.fileno()

    def receive(self, now: float) -> int:
        """Tell the stack which busy yards have room; take up to BATCH datagrams.

        When only waiters woke the driver (the epoll descriptor says the
        socket itself is not readable), no ``recvfrom`` is tried.

        The socket is emptied first and the datagrams handed to the stack
        after: the senders get the whole queue back at once (it holds only a
        few datagrams) and refill it while the stack works.  Then the socket
        is emptied again, until it is found empty or BATCH datagrams were
        taken: a refilled queue costs one more ``recvfrom`` instead of a
        round of the loop.
        """
        if self._waiting and self._epoll is not None:
            ready = self._epoll.poll(0)
            self._woken(ready, now)
            own = self.sock.fileno()
            if not any(fd == own for fd, _ in ready):
                return 0  # only waiters woke us: no recvfrom to find the socket empty
        fill = self._fill_batched if self.batched else self._fill
        receive_datagram = self.stack.receive_datagram
        taken = 0
        batch: list[tuple[bytes, Any]] = []
        while taken < BATCH:
            fill(batch, BATCH - taken)
            if not batch:
                break
            for data, source in batch:
                if source is None or type(source) is str:
                    receive_datagram(data, source or None, now)
                else:
                    self._foreign_source(source)
            taken += len(batch)
            batch.clear()
        return taken

    def _foreign_source(self, source: object) -> None:
        """Drop a datagram whose sender is not a socket file: count it, log it now and then.

        A yard's address is its socket's path (a ``str``); a sender bound to an
        abstract name (``bytes``) can be no yard, and the stack is never handed one.
        """
        self.foreign_sources += 1
        if self.foreign_sources % 1000 == 1:
            log.info("%s: datagram from %s, not a socket file, dropped (%d so far)",
                     self.stack.name, safe_name(source), self.foreign_sources)

    def _fill(self, batch: list[tuple[bytes, Any]], room: int) -> None:
        """Up to ``room`` datagrams into ``batch``, a ``recvfrom`` each, until the socket is
        found empty."""
        recvfrom = self.sock.recvfrom
        append = batch.append
        try:
            for _ in range(room):
                append(recvfrom(MAX_DATAGRAM + 1))
        except BlockingIOError:
            pass
        except OSError as exc:
            log.debug("%s: recvfrom: %s", self.stack.name, exc)

    def _fill_batched(self, batch: list[tuple[bytes, Any]], room: int) -> None:
        """:meth:`_fill` with up to 64 datagrams a ``recvmmsg``: the same datagrams, in the
        same order (a short batch found the socket empty, as ``recvfrom`` does when it fails
        with EAGAIN)."""
        receiver = self._receiver
        assert receiver is not None  # noqa: S101 - self.batched says it was built
        recv_batch, take = receiver.recv_batch, receiver.take
        fd = self.sock.fileno()
        while len(batch) < room:
            asked = min(room - len(batch), _CHUNK)
            try:
                sources = recv_batch(fd, asked, MAX_DATAGRAM + 1)
            except OSError as exc:
                log.debug("%s: recvfrom: %s", self.stack.name, exc)
                return
            batch.extend([(take(index), source) for index, source in enumerate(sources)])
            if len(sources) < asked:
                return

    def _woken(self, ready: list[tuple[int, int]], now: float) -> None:
        for fd, flags in ready:
            address = self._waiting.pop(fd, None)
            if address is None:
                continue
            if flags & (select.EPOLLERR | select.EPOLLHUP):
                self._drop_waiter(address)  # its yard went away; the stack will hear why
            else:
                self._woke.add(address)
            self.stack.send_ready(address, now)

    def _arm(self, address: str, *, fresh: bool) -> None:
        """Watch for room in the queue of ``address`` (a new waiter socket when ``fresh``)."""
        if self._epoll is None:
            return
        if fresh:
            self._drop_waiter(address)
        waiter = self._waiters.get(address)
        try:
            if waiter is None:
                if len(self._waiters) >= WAITERS:
                    self._drop_waiter(next(iter(self._waiters)))
                waiter = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                waiter.setblocking(False)
                self._waiters[address] = waiter
                waiter.connect(address)
                self._epoll.register(waiter.fileno(), select.EPOLLOUT | select.EPOLLONESHOT)
            elif waiter.fileno() not in self._waiting:
                self._epoll.modify(waiter.fileno(), select.EPOLLOUT | select.EPOLLONESHOT)
        except OSError as exc:  # gone meanwhile: the stack's timer retries
            log.debug("%s: cannot watch %s: %s", self.stack.name, address, exc)
            self._drop_waiter(address)
            return
        self._waiting[waiter.fileno()] = address

    def _drop_waiter(self, address: str) -> None:
        waiter = self._waiters.pop(address, None)
        if waiter is None:
            return
        self._waiting.pop(waiter.fileno(), None)
        if self._epoll is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(waiter.fileno())
        waiter.close()

    def send(self, now: float) -> int:
        """Send what the stack has; report each refused datagram back to the stack.

        After one refusal for an address, the rest of this round's datagrams
        for it are not tried (the stack counts them refused with the first),
        so a yard's pages never overtake one another.
        """
        datagrams = self.stack.datagrams_to_send(now)
        if not datagrams:
            return 0
        sent = first = 0
        refused: set[str] | None = None  # made at the first refusal: most rounds have none
        woke = self._woke
        if self.batched:
            # the kernel takes them in order until it refuses one; after that they go one
            # by one below, where a refused yard's later pages are skipped
            assert _send_batch is not None  # noqa: S101 - self.batched says it was built
            sent, error = _send_batch(self.sock.fileno(), datagrams, 0)
            if woke:
                for _, address in datagrams[:sent]:
                    woke.discard(address)
            if sent == len(datagrams):
                return sent
            first = sent
            if error != _SEND_ALONE:  # else sendto sends it (or says why not) below
                data, address = datagrams[sent]
                refused = {address}
                self._refused(address, data, OSError(error, os.strerror(error)), now)
                woke.discard(address)
                first += 1
        sendto = self.sock.sendto
        for data, address in datagrams[first:]:
            if refused is not None and address in refused:
                continue
            try:
                sendto(data, address)
            except OSError as exc:
                if refused is None:
                    refused = set()
                refused.add(address)
                self._refused(address, data, exc, now)
            else:
                sent += 1
            if woke:
                woke.discard(address)
        return sent

    def _refused(self, address: str, data: bytes, exc: OSError, now: float) -> None:
        """Count a refused datagram, watch its yard's queue if full, tell the stack."""
        error = exc.errno or errno.EIO
        self.send_errors += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: sendto %s: %s", self.stack.name, address, exc)
        if error in BUSY_ERRORS:
            # a waiter that woke us for nothing may watch a socket since replaced
            self._arm(address, fresh=address in self._woke)
        else:
            self._drop_waiter(address)
        self.stack.send_failed(address, data, error, now)

    @property
    def wants_write(self) -> bool:
        """Always False: room in a busy yard's queue shows as ``fileno`` turning readable."""
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
        for address in list(self._waiters):
            self._drop_waiter(address)
        if self._epoll is not None:
            self._epoll.close()
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)
