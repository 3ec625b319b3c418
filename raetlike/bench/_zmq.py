"""pyzmq DEALER/ROUTER with CURVE: the encrypted-transport baseline the goals name.

The server (:func:`serve_zmq`, a child process) binds a ROUTER socket with
``curve_server`` on loopback TCP and prints ``PORT SERVER_PUBLIC_KEY``.  The
client is a DEALER with its own CURVE key pair.  One-way uses raw UDP's flow
control (docs/performance.md): at most ``window`` messages unacknowledged, the
server answering every ``ack_every``-th with the cumulative count and ``F``
(sent after the last message) with ``F`` and the count, which ends the run.
``P`` messages are echoed (round trips), ``B`` messages answered with ``done``
(the 10 MB message).
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import time
from typing import Any

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

__all__ = ["available", "measure_zmq", "serve_zmq"]

WINDOW = 1024
ACK_EVERY = 32
_COUNT = struct.Struct("!Q")
_RESET = struct.Struct("!cI")


def available() -> bool:
    """True when pyzmq imports here."""
    return importlib.util.find_spec("zmq") is not None


def serve_zmq() -> None:
    """The ROUTER + CURVE peer: count, acknowledge, echo, answer big messages."""
    import zmq  # noqa: PLC0415 - an optional dependency, imported only when measured

    public, secret = zmq.curve_keypair()
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.curve_server = True
    router.curve_secretkey = secret
    router.rcvhwm = router.sndhwm = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    sys.stdout.write(f"{port} {public.decode()}\n")
    sys.stdout.flush()
    count, ack_every = 0, ACK_EVERY
    receive, send, pack = router.recv_multipart, router.send_multipart, _COUNT.pack
    while True:
        identity, body = receive(copy=True)
        first = body[:1]
        if first == b"P":
            send([identity, body])
        elif first == b"R":
            count, ack_every = 0, _RESET.unpack_from(body)[1]
        elif first == b"F":
            send([identity, b"F" + pack(count)])
        elif first == b"B":
            send([identity, b"done"])
        else:
            count += 1
            if count % ack_every == 0:
                send([identity, pack(count)])


class ZmqClient:
    """A DEALER with CURVE keys connected to :func:`serve_zmq`."""

    def __init__(self, port: int, server_key: bytes) -> None:
        import zmq  # noqa: PLC0415 - an optional dependency

        public, secret = zmq.curve_keypair()
        self.context = zmq.Context()
        self.dealer: Any = self.context.socket(zmq.DEALER)
        self.dealer.curve_publickey = public
        self.dealer.curve_secretkey = secret
        self.dealer.curve_serverkey = server_key
        self.dealer.sndhwm = self.dealer.rcvhwm = 0
        self.dealer.rcvtimeo = 10_000
        self.dealer.linger = 0
        self.dealer.connect(f"tcp://127.0.0.1:{port}")
        self.ping(1)  # the CURVE handshake happens before the first measurement

    def one_way(self, count: int, window: int = WINDOW, ack_every: int = ACK_EVERY) -> float:
        """Seconds until ``count`` 100-byte messages are acknowledged."""
        send, receive, unpack = self.dealer.send, self.dealer.recv, _COUNT.unpack
        send(_RESET.pack(b"R", ack_every))
        payload = b"o" * 100
        sent = acked = 0
        start = time.perf_counter()
        while True:
            while sent < count and sent - acked < window:
                send(payload)
                sent += 1
                if sent == count:
                    send(b"F")
            reply = receive()
            if reply[:1] == b"F":  # the answer to F comes after every ack: nothing is left over
                break
            acked = unpack(reply)[0]
        elapsed = time.perf_counter() - start
        if unpack(reply[1:])[0] != count:
            raise RuntimeError(f"pyzmq+CURVE server counted {unpack(reply[1:])[0]} of {count}")
        return elapsed

    def ping(self, count: int) -> list[float]:
        """Round-trip times of ``count`` 100-byte ping-pongs."""
        payload = b"P" * 100
        times = []
        for _ in range(count):
            start = time.perf_counter()
            self.dealer.send(payload)
            self.dealer.recv()
            times.append(time.perf_counter() - start)
        return times

    def big(self, size: int) -> float:
        """Seconds until the server has answered one ``size``-byte message."""
        start = time.perf_counter()
        self.dealer.send(b"B" + b"b" * (size - 1))
        self.dealer.recv()
        return time.perf_counter() - start

    def close(self) -> None:
        self.dealer.close()
        self.context.term()


def measure_zmq(options: BenchOptions, progress: Progress = silent,
                cpus: Cpus = UNPINNED) -> dict[str, float]:
    """pyzmq+CURVE one-way messages/s, RTT p50/p99 and a 10 MB message."""
    process, line = spawn("from raetlike.bench import serve_zmq; serve_zmq()", cpus.peer)
    port, key = line.split()
    try:
        progress("pyzmq+CURVE: connect")
        client = ZmqClient(int(port), key.encode())
        count = options.count(200_000, 50_000)
        one_way, rtts, ten_mb = [], [], []
        meter = CpuMeter(process.pid)
        for run in range(options.repeat):
            of = f" (run {run + 1}/{options.repeat})" if options.repeat > 1 else ""
            progress(f"pyzmq+CURVE: one-way, {count:,} messages{of}")
            with meter.run(count):
                one_way.append(count / client.one_way(count))
            progress(f"pyzmq+CURVE: round trips{of}")
            rtts.append(client.ping(options.count(2000, 1000)))
            progress(f"pyzmq+CURVE: a 10 MB message{of}")
            ten_mb.append(client.big(10_000_000 // options.scale))
        client.close()
    finally:
        stop(process)
    return {
        "one_way_msgs_per_s": median(one_way),
        "rtt_p50_ms": median([percentile(r, 0.5) for r in rtts]) * 1e3,
        "rtt_p99_ms": median([percentile(r, 0.99) for r in rtts]) * 1e3,
        "ten_mb_s": median(ten_mb),
        **meter.per_message(),
    }
