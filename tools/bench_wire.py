"""Measure the road wire codecs: µs per packet, pack + parse, per head kind.

A message packet with a 100-byte msgpack body, for each head kind:

* head+packet: ``pack_packet`` + ``parse_packet`` of the ready body bytes;
* +body: the same plus ``pack_body`` / ``parse_body``;
* +crypto: ``pack_body`` + ``coat`` + signed ``pack_packet``, then
  ``parse_packet`` + ``verify`` + ``uncoat`` + ``parse_body``.

Usage: ``.venv/bin/python tools/bench_wire.py [--seconds 0.5]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from raetlike.crypto import PrivateKey, SessionBox, SigningKey
from raetlike.wire import (
    BodyKind,
    CoatKind,
    FootKind,
    Head,
    HeadKind,
    coat,
    pack_body,
    pack_packet,
    parse_body,
    parse_packet,
    uncoat,
)

SIGNER = SigningKey(bytes(range(32)))
VERIFY = SIGNER.verify_key
SENDER = PrivateKey(bytes(range(32, 64)))
RECEIVER = PrivateKey(bytes(range(64, 96)))
SEAL = SessionBox(SENDER, RECEIVER.public_key)
OPEN = SessionBox(RECEIVER, SENDER.public_key)
BODY = {"route": {"src": ["alpha", None, "x"], "dst": ["beta", None, "y"]},
        "content": "z" * 54}


def _per_call(function: Callable[[], object], seconds: float) -> float:
    """Best of five runs, in µs per call."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            function()
        elapsed = time.perf_counter() - start
        if elapsed > seconds / 5:
            break
        loops *= 2
    best = elapsed
    for _ in range(4):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        best = min(best, time.perf_counter() - start)
    return best / loops * 1e6


def _cases(kind: HeadKind) -> dict[str, Callable[[], object]]:
    plain = Head(source_uid=2, destination_uid=3, session_id=4, transaction_id=5,
                 body_kind=BodyKind.MSGPACK, head_kind=kind)
    sealed = Head(source_uid=2, destination_uid=3, session_id=4, transaction_id=5,
                  body_kind=BodyKind.MSGPACK, coat_kind=CoatKind.NACL,
                  foot_kind=FootKind.NACL, head_kind=kind)
    body = pack_body(BodyKind.MSGPACK, BODY)

    def head_and_packet() -> object:
        return parse_packet(pack_packet(plain, body))

    def with_body() -> object:
        packet = parse_packet(pack_packet(plain, pack_body(BodyKind.MSGPACK, BODY)))
        return parse_body(packet.head.body_kind, packet.coat)

    def with_crypto() -> object:
        datagram = pack_packet(sealed, coat(pack_body(BodyKind.MSGPACK, BODY), SEAL), SIGNER)
        packet = parse_packet(datagram)
        packet.verify(VERIFY)
        return parse_body(packet.head.body_kind, uncoat(packet.coat, OPEN))

    if with_body() != BODY or with_crypto() != BODY:
        raise SystemExit(f"{kind.name}: the body did not survive the round trip")
    return {"head+packet": head_and_packet, "+body": with_body, "+crypto": with_crypto}


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    seconds = parser.parse_args().seconds
    print(f"100-byte msgpack body ({len(pack_body(BodyKind.MSGPACK, BODY))} bytes); "
          "µs per packet, pack + parse, best of 5")
    columns = ["head+packet", "+body", "+crypto"]
    print(f"{'head kind':<10}" + "".join(f"{name:>14}" for name in columns))
    for kind in HeadKind:
        timings = {name: _per_call(run, seconds) for name, run in _cases(kind).items()}
        print(f"{kind.name:<10}" + "".join(f"{timings[name]:>14.2f}" for name in columns))
    reference = _per_call(_Reference, seconds)
    print(f"machine reference: making a 3-slot object in Python takes {reference:.2f} µs")


class _Reference:
    """A yardstick for this machine's speed: a plain slotted object with three fields."""

    __slots__ = ("a", "b", "c")

    def __init__(self) -> None:
        self.a = self.b = self.c = 0


if __name__ == "__main__":
    main()
