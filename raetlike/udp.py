"""The UDP driver: pumps one sans-IO road stack over one UDP socket.

All a driver does: drain the socket into ``receive_datagram``, flush
``datagrams_to_send``, and tell the loop when it next needs ``handle_timer``.
IPv4 and IPv6; addresses are ``(host, port)`` pairs in and out.
"""

from __future__ import annotations

import array
import errno
import logging
import math
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from raetlike.errors import AddressError

__all__ = ["Address", "DatagramStack", "UdpDriver", "bind_udp", "family_of", "format_address",
           "parse_host_port", "resolve"]

log = logging.getLogger(__name__)

# Asking the kernel whether a datagram waits costs less than a recvfrom that fails.
_ioctl: Callable[..., Any] | None
try:
    import fcntl
    import termios
except ImportError:  # pragma: no cover - not on Windows: a failed recvfrom ends a batch
    _ioctl, _FIONREAD = None, 0
else:
    _ioctl, _FIONREAD = fcntl.ioctl, termios.FIONREAD

Address = tuple[str, int]

RECEIVE_BUFFER = 4 * 1024 * 1024  # room for a few windows of 1 KB segments
SEND_BUFFER = 4 * 1024 * 1024
MAX_DATAGRAM = 65535
BATCH = 256  # datagrams drained per readiness, so one busy socket cannot starve the rest
FLUSH_AFTER = 0.001  # seconds of receiving after which what the stack has to send goes out
TIMER_HOLD = 1.0
"""Seconds a backlog on the socket may hold the stack's timers (UdpDriver.holds_timers)."""
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})


class DatagramStack(Protocol):
    """The sans-IO side a driver pumps (RoadStack, LaneStack)."""

    def receive_datagram(self, data: bytes, source: Address, now: float) -> None: ...
    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Address]]: ...
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...


def format_address(address: Address) -> str:
    """``HOST:PORT``, with brackets around an IPv6 host."""
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_host_port(text: str, default_host: str = "127.0.0.1") -> Address:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` as an address; ValueError names the problem."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = default_host, text
    host = host.strip("[]") or default_host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"bad port in {text!r}: expected HOST:PORT") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} out of range 0..65535 in {text!r}")
    return host, port


def family_of(host: str) -> socket.AddressFamily:
    """The family of a socket bound to ``host`` (a numeric address or ``0.0.0.0``/``::``)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


_family = family_of


def resolve(address: Address, family: int = socket.AF_UNSPEC) -> Address:
    """``(HOST, PORT)`` as a numeric address a socket of ``family`` can send to.

    The name is looked up once, with ``getaddrinfo`` (IPv4 and IPv6), so what
    comes back from the peer matches the address the stack knows it by.  For
    an IPv4 socket only IPv4 answers count; for an IPv6 one, IPv6 answers come
    first and an IPv4 answer is used in its mapped form (``::ffff:a.b.c.d``),
    which is how an IPv6 socket reports such a peer.  :class:`AddressError`
    says in one line why a name cannot be used.
    """
    host, port = address
    try:
        answers = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_DGRAM,
                                     socket.IPPROTO_UDP)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise AddressError(f"cannot resolve host {host!r}: {reason}") from None
    v4 = [str(sockaddr[0]) for fam, _, _, _, sockaddr in answers if fam == socket.AF_INET]
    v6 = [str(sockaddr[0]) for fam, _, _, _, sockaddr in answers if fam == socket.AF_INET6]
    if family == socket.AF_INET:
        if not v4:
            raise AddressError(f"host {host!r} has only IPv6 addresses, and this socket is "
                               "IPv4: bind an IPv6 host (e.g. --host ::)")
        return v4[0], port
    if family == socket.AF_INET6:
        if v6:
            return v6[0], port
        return f"::ffff:{v4[0]}", port
    if v4:
        return v4[0], port
    if v6:
        return v6[0], port
    raise AddressError(f"host {host!r} has no IPv4 or IPv6 address")  # pragma: no cover


def _set_buffer(sock: socket.socket, option: int, size: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError:  # pragma: no cover - capped by the kernel; the default still works
        log.debug("could not set socket buffer option %s to %d", option, size)


def bind_udp(host: str, port: int) -> socket.socket:
    """A non-blocking UDP socket bound to ``(host, port)``; OSError names the address."""
    sock = socket.socket(_family(host), socket.SOCK_DGRAM)
    sock.setblocking(False)
    _set_buffer(sock, socket.SO_RCVBUF, RECEIVE_BUFFER)
    _set_buffer(sock, socket.SO_SNDBUF, SEND_BUFFER)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise OSError(getattr(exc, "errno", None),
                      f"cannot bind UDP {host}:{port}: {reason}") from None
    return sock


class UdpDriver:
    """One bound UDP socket serving one stack."""

    def __init__(self, stack: DatagramStack, host: str = "127.0.0.1", port: int = 0,
                 flush_after: float = FLUSH_AFTER, *, sock: socket.socket | None = None) -> None:
        """Bind ``(host, port)``, or take ``sock`` from :func:`bind_udp` (bound before the
        stack was made, so that nothing is created for an address that cannot be bound)."""
        self.stack = stack
        self.flush_after = flush_after
        self.sock = bind_udp(host, port) if sock is None else sock
        self._pending: deque[tuple[bytes, Address]] = deque()
        self._waiting = array.array("i", [0])  # FIONREAD's answer (see receive)
        self.send_errors = 0
        self._backlog = False  # the last receive stopped at BATCH: datagrams wait unread
        self._timers_at = -math.inf  # when the stack's timers were last let run

    @property
    def address(self) -> Address:
        """The bound (host, port)."""
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def resolve(self, address: Address) -> Address:
        """``address`` resolved for this socket's family (see :func:`resolve`)."""
        return resolve(address, self.sock.family)

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self, now: float) -> int:
        """Drain up to a batch of datagrams into the stack; returns how many.

        Receiving interleaves with sending: once ``flush_after`` seconds went
        into this batch since the last flush, what the stack has to send
        (acks, dones, replies, messages a freed window lets go) goes out
        before the next datagram is read, so a peer is never kept waiting for
        a whole batch of slow (signed) packets.  Zero turns interleaving off.
        The stack is told the time as it advances through the batch (``now``
        plus what the batch has taken so far), so what it starts mid-batch
        gets its timers from the right moment, not the batch's start.
        """
        count = 0
        budget = self.flush_after
        clock = time.perf_counter
        began = since = clock()
        current = now
        waiting, fd, ioctl = self._waiting, self.sock.fileno(), _ioctl
        while count < BATCH:
            # After a datagram, ask how many bytes the next one has (0: none) rather than
            # let recvfrom fail with EAGAIN: raising and catching that error cost several
            # microseconds on every batch's end, i.e. on every reply's way out.  A datagram
            # of no bytes also reads 0 here: it ends the batch and the next one reads it
            # (the socket stays readable).
            if count and ioctl is not None:
                try:
                    ioctl(fd, _FIONREAD, waiting, True)
                except OSError:
                    pass  # (then recvfrom tells)
                else:
                    if not waiting[0]:
                        break
            try:
                data, source = self.sock.recvfrom(MAX_DATAGRAM)
            except BlockingIOError:
                break
            except OSError as exc:  # e.g. ICMP port unreachable reported on Linux
                log.debug("recvfrom: %s", exc)
                break
            # an IPv4 socket's (host, port) as it is; an IPv6 one's four fields cut to two
            self.stack.receive_datagram(
                data, source if len(source) == 2 else (source[0], source[1]), current)
            count += 1
            if budget:
                ticked = clock()
                current = now + (ticked - began)
                if ticked - since > budget:
                    self.send(current)
                    since = clock()
        # a backlog only when datagrams really wait: a batch that took the last of exactly
        # BATCH leaves the socket empty, and holding the timers then spun the loop (no read
        # to come and a timer due) until TIMER_HOLD had passed
        self._backlog = count >= BATCH and self._bytes_waiting(fd)
        return count

    def _bytes_waiting(self, fd: int) -> bool:
        """Whether a datagram of some bytes waits on the socket (FIONREAD)."""
        if _ioctl is None:
            return False  # (no FIONREAD: never hold the timers)
        try:
            _ioctl(fd, _FIONREAD, self._waiting, True)
        except OSError:
            return False
        return self._waiting[0] > 0

    def holds_timers(self, now: float) -> bool:
        """Whether the stack's timers should wait: datagrams wait unread on the socket, and
        its timers ran less than ``TIMER_HOLD`` ago.

        A process behind on its socket (a main of 5,000 estates on a loaded machine, its
        8 MB receive buffer full and overflowing) otherwise timed out what it had not yet
        read: each presence check "unanswered" sent its redos and declared the estate
        lost while the answer sat in the queue, and those redos, probes and signed checks
        were more for the estates to answer and for it to read.  Reading comes first; the
        timers run at least every ``TIMER_HOLD`` seconds all the same, so a flood of the
        socket delays no verdict by more than that.
        """
        if self._backlog and now - self._timers_at < TIMER_HOLD:
            return True
        self._timers_at = now
        return False

    def send(self, now: float) -> int:
        """Flush what the stack has to send; what the kernel refuses now waits."""
        self._pending.extend(self.stack.datagrams_to_send(now))
        sent = 0
        while self._pending:
            data, destination = self._pending[0]
            try:
                self.sock.sendto(data, destination)
            except OSError as exc:
                if exc.errno in _BUSY:
                    break
                self.send_errors += 1
                log.debug("sendto %s: %s", destination, exc)
            self._pending.popleft()
            sent += 1
        return sent

    @property
    def wants_write(self) -> bool:
        """True while datagrams wait for the kernel to take them."""
        return bool(self._pending)

    def service(self, now: float) -> None:
        """One round: read, let timers fire, write."""
        self.receive(now)
        timer = self.stack.get_timer()
        if timer is not None and timer <= now and not self.holds_timers(now):
            self.stack.handle_timer(now)
        self.send(now)

    def close(self) -> None:
        self.sock.close()
