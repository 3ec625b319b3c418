"""Raw UDP, the floor: a flow-controlled datagram stream, ping-pong, and 10 MB.

The scheme (docs/performance.md): the client sends ``R`` with the run's ack
interval, then keeps at most ``window`` datagrams unacknowledged; the server
counts data datagrams and answers every ``ack_every``-th with the cumulative
count.  After the last datagram the client sends ``F`` and the server answers
with its count, so a run whose length is not a multiple of the interval ends
at once.  A lost datagram shows as a shortfall (reported), never as a stall.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from dataclasses import dataclass

from raetlike.bench._common import (
    UNPINNED,
    BenchOptions,
    CpuMeter,
    Cpus,
    Progress,
    median,
    percentile,
    silent,
    spawn,
    stop,
)

__all__ = ["LOOPBACK_DATAGRAM", "Stream", "measure_raw", "raw_ping", "raw_stream", "serve_udp"]

LOOPBACK_DATAGRAM = 60_000
SMALL_WINDOW = 1024  # 100 B datagrams: about 1 MB of kernel buffer in flight
SMALL_ACK_EVERY = 32
BIG_WINDOW = 32  # 60 KB datagrams: 2 MB in flight, half the 4 MB receive buffer
BIG_ACK_EVERY = 8
BUFFER = 4 << 20
_COUNT = struct.Struct("!Q")
_RESET = struct.Struct("!cI")
_GIVE_UP = 0.5


def serve_udp() -> None:
    """Raw UDP peer: echo ``P`` datagrams, ``R`` resets, ``F`` asks the count, others count."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    sock.bind(("127.0.0.1", 0))
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    buffer = bytearray(65535)
    view = memoryview(buffer)
    receive, send, pack = sock.recvfrom_into, sock.sendto, _COUNT.pack
    count, ack_every = 0, SMALL_ACK_EVERY
    while True:
        size, source = receive(buffer)
        first = buffer[0]
        if first == 0x50:  # P: ping
            send(view[:size], source)
        elif first == 0x52:  # R: reset, with the ack interval
            count, ack_every = 0, _RESET.unpack_from(buffer)[1]
        elif first == 0x46:  # F: the count now
            send(pack(count), source)
        else:
            count += 1
            if count % ack_every == 0:
                send(pack(count), source)


@dataclass(frozen=True, slots=True)
class Stream:
    """One stream run: its duration and how many datagrams never arrived."""

    seconds: float
    lost: int


def raw_stream(port: int, count: int, size: int, window: int = SMALL_WINDOW,
               ack_every: int = SMALL_ACK_EVERY) -> Stream:
    """Push ``count`` datagrams of ``size`` bytes with at most ``window`` unacknowledged."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    sock.connect(("127.0.0.1", port))
    sock.send(_RESET.pack(b"R", ack_every))
    payload = b"o" * size
    send, receive, unpack = sock.send, sock.recv, _COUNT.unpack
    sent = acked = 0
    sock.settimeout(_GIVE_UP)
    start = time.perf_counter()
    while acked < count:
        while sent < count and sent - acked < window:
            send(payload)
            sent += 1
            if sent == count:
                send(b"F")
        try:
            acked = max(acked, unpack(receive(64))[0])
        except TimeoutError:  # nothing for half a second: what is missing was lost
            break
    elapsed = time.perf_counter() - start
    sock.close()
    return Stream(elapsed, count - acked)


def raw_ping(port: int, count: int) -> list[float]:
    """Round-trip times of ``count`` 100-byte ping-pongs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(1.0)
    payload = b"P" * 100
    times = []
    for _ in range(count):
        start = time.perf_counter()
        sock.send(payload)
        sock.recv(65535)
        times.append(time.perf_counter() - start)
    sock.close()
    return times


def measure_raw(options: BenchOptions, progress: Progress = silent,
                cpus: Cpus = UNPINNED) -> dict[str, float]:
    """Raw UDP one-way datagrams/s, RTT p50/p99 and 10 MB in 60 KB datagrams."""
    process, line = spawn("from raetlike.bench import serve_udp; serve_udp()", cpus.peer)
    port = int(line)
    try:
        count = options.count(200_000, 50_000)
        progress(f"raw UDP: one-way, {count:,} datagrams")
        meter = CpuMeter(process.pid)
        streams = []
        for _ in range(options.repeat):
            with meter.run(count):
                streams.append(raw_stream(port, count, 100))
        progress("raw UDP: round trips")
        pings = options.count(2000, 1000)
        rtts = [raw_ping(port, pings) for _ in range(options.repeat)]
        progress("raw UDP: 10 MB")
        big_count = -(-10_000_000 // LOOPBACK_DATAGRAM)
        big = [raw_stream(port, big_count, LOOPBACK_DATAGRAM, BIG_WINDOW, BIG_ACK_EVERY)
               for _ in range(options.repeat)]
    finally:
        stop(process)
    return {
        "one_way_msgs_per_s": median([count / s.seconds for s in streams]),
        "one_way_lost": sum(s.lost for s in streams),
        "rtt_p50_ms": median([percentile(r, 0.5) for r in rtts]) * 1e3,
        "rtt_p99_ms": median([percentile(r, 0.99) for r in rtts]) * 1e3,
        "ten_mb_s": median([s.seconds for s in big]),
        "ten_mb_lost": sum(s.lost for s in big),
        **meter.per_message(),
    }
