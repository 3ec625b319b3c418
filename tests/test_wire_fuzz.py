"""Garbage in: random and mutated datagrams give a Packet or a PacketError, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raetlike.crypto import SigningKey
from raetlike.errors import PacketError
from raetlike.wire import (
    BINARY_MAGIC,
    Head,
    Packet,
    pack_packet,
    parse_packet,
)
from tests.test_wire_head import heads

SIGNER = SigningKey(bytes(range(32)))
REASONS = {"empty", "bad-head", "bad-field", "bad-kind", "bad-version", "bad-length",
           "bad-foot"}
FIELD_KEYS = ["ri", "pl", "hl", "fg", "vn", "pk", "hk", "se", "de", "si", "ti", "tk", "dt",
              "oi", "sn", "sc", "ml", "bk", "ck", "fk", "fl", "zz", ""]


def _outcome(data: bytes) -> str:
    """"packet" when ``data`` parses, else the PacketError's reason (any other error escapes)."""
    try:
        packet = parse_packet(data)
    except PacketError as error:
        return error.reason
    assert isinstance(packet, Packet)
    assert packet.raw_head + packet.coat + packet.foot == data
    return "packet"


@st.composite
def valid_packets(draw: st.DrawFn) -> bytes:
    head: Head = draw(heads())
    coat = draw(st.binary(max_size=120))
    return pack_packet(head, coat, SIGNER if draw(st.booleans()) else None)


@st.composite
def mutated_packets(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(valid_packets()))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "cut", "insert", "set", "truncate"]))
        if action == "flip" and where < len(data):
            data[where] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[where:where + draw(st.integers(1, 8))]
        elif action == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif action == "set" and where < len(data):
            data[where] = draw(st.sampled_from(b" \n\r{}\":,0f9x-.e\x00\xff"))
        elif action == "truncate":
            del data[where:]
    return bytes(data)


@st.composite
def native_lookalikes(draw: st.DrawFn) -> bytes:
    lines = ["ri RAET"]
    for _ in range(draw(st.integers(0, 8))):
        key = draw(st.sampled_from(FIELD_KEYS))
        value = draw(st.text("0123456789abcdefABCDEF.-x _", max_size=9))
        lines.append(f"{key} {value}")
    tail = draw(st.binary(max_size=40))
    return ("\n".join(lines) + "\n\n").encode() + tail


@st.composite
def json_lookalikes(draw: st.DrawFn) -> bytes:
    values = st.one_of(st.integers(-5, 2**40), st.floats(), st.text(max_size=8), st.none(),
                       st.booleans(), st.just("0000040"), st.just("40"))
    fields = draw(st.dictionaries(st.sampled_from(FIELD_KEYS), values, max_size=8))
    text = '{"ri":"RAET",' + ",".join(f'"{k}":{_json(v)}' for k, v in fields.items()) + "}"
    return text.encode("ascii", "replace") + b"\r\n\r\n" + draw(st.binary(max_size=40))


def _json(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


DATAGRAMS = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=120).map(lambda tail: bytes([BINARY_MAGIC, 1]) + tail),
    valid_packets(),
    mutated_packets(),
    native_lookalikes(),
    json_lookalikes(),
)


@given(DATAGRAMS)
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_datagram_gives_a_packet_or_a_packet_error_with_a_known_reason(data: bytes) -> None:
    assert _outcome(data) in REASONS | {"packet"}


@given(valid_packets())
@settings(max_examples=100, deadline=None)
def test_valid_packets_always_parse(data: bytes) -> None:
    assert _outcome(data) == "packet"


@pytest.mark.slow
@given(DATAGRAMS)
@settings(max_examples=100_000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_any_datagram_gives_a_packet_or_a_packet_error_many_times(data: bytes) -> None:
    assert _outcome(data) in REASONS | {"packet"}
