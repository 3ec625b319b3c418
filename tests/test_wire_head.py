"""Road packet heads: native, JSON and binary forms, byte for byte, and their checks."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import (
    BINARY_HEAD_SIZE,
    BINARY_MAGIC,
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    Head,
    HeadKind,
    PacketKind,
    TransactionKind,
    foot_length,
    head_size,
    pack_head,
    parse_head,
)

UINT32 = st.integers(0, 0xFFFF_FFFF)


@st.composite
def heads(draw: st.DrawFn, kind: HeadKind | None = None) -> Head:
    """Any head that every form can carry exactly (native stamps have six decimals)."""
    head_kind = draw(st.sampled_from(HeadKind)) if kind is None else kind
    count = draw(st.integers(1, 0xFFFF))
    flags = Flag(draw(st.integers(0, 0xFF)))
    top = count - 1 if flags & Flag.SEGMENTED else 0xFFFF
    if head_kind is HeadKind.RAET:
        stamp = draw(st.integers(-(10**12), 10**12)) / 1e6
    else:
        stamp = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
        if head_kind is HeadKind.JSON and abs(stamp) > 1e100:
            stamp = 0.0  # a JSON head must stay within 255 bytes
    return Head(
        packet_kind=draw(st.sampled_from(PacketKind)),
        transaction_kind=draw(st.sampled_from(TransactionKind)),
        source_uid=draw(UINT32),
        destination_uid=draw(UINT32),
        session_id=draw(UINT32),
        transaction_id=draw(UINT32),
        flags=flags,
        segment_number=draw(st.integers(0, top)),
        segment_count=count,
        message_length=draw(UINT32),
        body_kind=draw(st.sampled_from(BodyKind)),
        coat_kind=draw(st.sampled_from(CoatKind)),
        foot_kind=draw(st.sampled_from(FootKind)),
        head_kind=head_kind,
        stamp=stamp,
        order_index=draw(UINT32),
        version=0,
    )


def _packet(head: Head, coat_size: int = 3) -> bytes:
    return pack_head(head, coat_size) + b"c" * coat_size + b"f" * foot_length(head.foot_kind)


@given(heads(), st.integers(0, 700))
@settings(max_examples=300, deadline=None)
def test_every_head_reads_back_as_it_was_packed(head: Head, coat_size: int) -> None:
    raw = pack_head(head, coat_size)
    assert len(raw) == head_size(head)
    assert parse_head(_packet(head, coat_size)) == (head, len(raw), foot_length(head.foot_kind))


def test_a_default_native_head_is_the_four_fixed_lines() -> None:
    assert pack_head(Head(), 0) == b"ri RAET\npl 001d\nhl 1d\nfg 00\n\n"


def test_native_head_writes_only_non_default_fields_in_raet_order() -> None:
    head = Head(packet_kind=PacketKind.DONE, source_uid=0x1F, segment_number=2,
                segment_count=3, message_length=4000, order_index=9, stamp=1.25,
                coat_kind=CoatKind.NACL, foot_kind=FootKind.NACL,
                flags=Flag.SEGMENTED | Flag.WAIT)
    text = pack_head(head, 10).decode()
    assert text.split("\n")[3:] == [
        "fg 0c", "pk f", "se 1f", "dt 1.250000", "oi 9", "sn 2", "sc 3", "ml fa0",
        "ck 1", "fk 1", "fl 40", "", "",
    ]
    assert text.startswith(f"ri RAET\npl {len(text) + 10 + 64:04x}\nhl {len(text):02x}\n")


def test_json_head_always_carries_hk_and_writes_lengths_as_hex_strings() -> None:
    raw = pack_head(Head(head_kind=HeadKind.JSON, stamp=2.5, destination_uid=7), 100)
    assert raw == (b'{"ri":"RAET","pl":"00000af","hl":"4b","fg":"00","hk":1,"de":7,"dt":2.5}'
                   b"\r\n\r\n")
    assert len(raw) == 0x4B
    assert 0x4B + 100 == 0xAF


def test_flags_pack_into_fg_with_correspondent_as_the_low_bit() -> None:
    raw = pack_head(Head(flags=Flag.CORRESPONDENT | Flag.AGAIN | Flag.IPV6), 0)
    assert b"\nfg 91\n" in raw


def test_binary_head_is_49_bytes_in_the_documented_order() -> None:
    head = Head(packet_kind=PacketKind.RESEND, transaction_kind=TransactionKind.ALIVE,
                source_uid=0x01020304, destination_uid=0x05060708, session_id=0x090A0B0C,
                transaction_id=0x0D0E0F10, flags=Flag.SEGMENTED, segment_number=0x1112,
                segment_count=0x1314, message_length=0x15161718, body_kind=BodyKind.MSGPACK,
                coat_kind=CoatKind.NACL, foot_kind=FootKind.NACL, head_kind=HeadKind.BINARY,
                stamp=-3.5, order_index=0x191A1B1C)
    raw = pack_head(head, 0x100)
    assert len(raw) == BINARY_HEAD_SIZE == 49
    assert raw[:6] == bytes([BINARY_MAGIC, 1, 49, 0x08]) + (49 + 0x100 + 64).to_bytes(2, "big")
    assert raw[6:13] == bytes([0, 3, 4, 3, 1, 1, 64])
    assert raw[13:17] == bytes.fromhex("11121314")
    assert raw[17:41] == bytes.fromhex("0102030405060708090a0b0c0d0e0f10191a1b1c15161718")
    assert struct.unpack("!d", raw[41:49]) == (-3.5,)


def test_the_first_byte_tells_the_head_kinds_apart() -> None:
    firsts = {pack_head(Head(head_kind=kind), 0)[0] for kind in HeadKind}
    assert firsts == {ord("r"), ord("{"), BINARY_MAGIC}


def _native(*lines: str, pl: int | None = None, hl: int | None = None) -> bytes:
    """A native head of ``lines`` with right (or the given wrong) lengths."""
    size = len("ri RAET\npl 0000\nhl 00\n") + len("\n".join(lines)) + 2
    text = f"ri RAET\npl {size if pl is None else pl:04x}\nhl {size if hl is None else hl:02x}\n"
    return (text + "\n".join(lines) + "\n\n").encode()


def _json(fields: str, pl: int | None = None) -> bytes:
    """A JSON head whose ``fields`` follow ri, pl, hl, fg, with a right length."""
    size = len('{"ri":"RAET","pl":"0000000","hl":"00","fg":"00"') + len(fields) + 5
    return (f'{{"ri":"RAET","pl":"{size if pl is None else pl:07x}","hl":"{size:02x}",'
            f'"fg":"00"{fields}}}\r\n\r\n').encode()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty"),
        (b"\x00junk", "bad-head"),
        (b"ri RAET\npl 001d\nhl 1d\nfg 00\n", "bad-head"),  # no end
        (b"ri RAT\npl 001d\nhl 1d\nfg 00\n\n", "bad-head"),
        (_native("fg 00", "hk 1"), "bad-head"),  # says JSON
        (_native("fg 00", hl=0x1E), "bad-length"),
        (_native("fg 00", pl=0x1E), "bad-length"),
        (b"ri RAET\nhl 16\nfg 00\n\n", "bad-length"),
        (_native("fg 00", "zz 1"), "bad-field"),
        (_native("fg 00", "se"), "bad-field"),
        (_native("fg 00", "se 1", "se 2"), "bad-field"),
        (_native("fg 00", "se 0x1"), "bad-field"),
        (_native("fg 00", "se  1"), "bad-field"),
        (_native("fg 00", "se 100000000"), "bad-field"),
        (_native("fg 00", "vn 1"), "bad-version"),
        (_native("fg 00", "pk 10"), "bad-kind"),
        (_native("fg 00", "bk 9"), "bad-kind"),
        (_native("fg 00", "fk 1"), "bad-foot"),
        (_native("fg 08", "sn 1"), "bad-field"),  # a segment numbered past the count
        (_native("fg 00", "sc 0"), "bad-field"),
        (_native("fg 100"), "bad-field"),
        (_native("fg 00", "dt nan"), "bad-field"),
        (_native("fg 00", "dt 1e5"), "bad-field"),
        (_json(',"hk":1,"se":1.0'), "bad-field"),
        (_json(',"hk":0'), "bad-head"),
        (_json(',"hk":true'), "bad-head"),
        (_json(""), "bad-head"),
        (_json(',"hk":1,"se":-1'), "bad-field"),
        (_json(',"hk":1,"se":"1"'), "bad-field"),
        (_json(',"hk":1,"hk":1'), "bad-field"),
        (_json(',"hk":1,"xx":1'), "bad-field"),
        (_json(',"hk":1', pl=0x99), "bad-length"),
        (b'{"ri":"RAET","pl":47,"hl":"2f","fg":"00","hk":1}\r\n\r\n', "bad-field"),
        (b'{"ri":"RAET","pl":"0000030","hl":"30","fg":"00","hk":1]\r\n\r\n', "bad-head"),
        (b'{"ri":"RAET",' + b"[" * 300, "bad-head"),
        (bytes([BINARY_MAGIC, 1, 49]), "bad-length"),
    ],
)
def test_malformed_heads_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(PacketError) as caught:
        parse_head(data)
    assert caught.value.reason == reason


def test_the_test_helpers_make_valid_heads_when_asked_to() -> None:
    assert parse_head(_native("fg 00"))[0] == Head()
    assert parse_head(_json(',"hk":1'))[0] == Head(head_kind=HeadKind.JSON)


def test_an_ack_may_carry_a_segment_number_past_the_count_like_raet() -> None:
    for kind in HeadKind:
        ack = Head(packet_kind=PacketKind.ACK, segment_number=5, head_kind=kind)
        assert parse_head(pack_head(ack, 0))[0] == ack


def _binary(head: Head, **changes: int) -> bytes:
    raw = bytearray(pack_head(head, 0))
    offsets = {"layout": 1, "hl": 2, "pl": 5, "vn": 6, "pk": 7, "bk": 9, "fk": 11, "fl": 12,
               "sn": 14, "sc": 16}
    for name, value in changes.items():
        raw[offsets[name]] = value
    return bytes(raw)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"layout": 2}, "bad-head"),
        ({"hl": 48}, "bad-length"),
        ({"pl": 50}, "bad-length"),
        ({"vn": 1}, "bad-version"),
        ({"pk": 16}, "bad-kind"),
        ({"bk": 4}, "bad-kind"),
        ({"fk": 2}, "bad-kind"),
        ({"fl": 64}, "bad-foot"),
        ({"sn": 1}, "bad-field"),
        ({"sc": 0}, "bad-field"),
    ],
)
def test_malformed_binary_heads_are_refused_with_a_reason(
    changes: dict[str, int], reason: str
) -> None:
    segment = Head(head_kind=HeadKind.BINARY, flags=Flag.SEGMENTED)
    with pytest.raises(PacketError) as caught:
        parse_head(_binary(segment, **changes))
    assert caught.value.reason == reason


def test_a_binary_head_with_a_non_finite_stamp_is_refused() -> None:
    raw = pack_head(Head(head_kind=HeadKind.BINARY), 0)[:41] + struct.pack("!d", float("inf"))
    with pytest.raises(PacketError, match="dt"):
        parse_head(raw)


def test_a_foot_longer_than_the_packet_is_refused() -> None:
    raw = pack_head(Head(head_kind=HeadKind.BINARY, foot_kind=FootKind.NACL), 0)
    truncated = raw[:4] + BINARY_HEAD_SIZE.to_bytes(2, "big") + raw[6:]
    with pytest.raises(PacketError) as caught:
        parse_head(truncated)
    assert caught.value.reason == "bad-length"


@pytest.mark.parametrize("kind", list(HeadKind))
@pytest.mark.parametrize(
    "head",
    [
        Head(source_uid=1 << 32),
        Head(transaction_id=-1),
        Head(segment_count=0),
        Head(segment_number=2, segment_count=2, flags=Flag.SEGMENTED),
        Head(segment_count=0x10000),
        Head(version=256),
        Head(stamp=float("nan")),
    ],
)
def test_fields_out_of_range_are_refused_when_packing(kind: HeadKind, head: Head) -> None:
    with pytest.raises(LocalProtocolError):
        pack_head(Head(**{**_fields(head), "head_kind": kind}), 0)


def _fields(head: Head) -> dict[str, object]:
    return {name: getattr(head, name) for name in Head.__slots__}


@pytest.mark.parametrize(("kind", "limit"), [(HeadKind.RAET, 0xFFFF), (HeadKind.BINARY, 0xFFFF)])
def test_a_packet_too_long_for_the_length_field_is_refused(kind: HeadKind, limit: int) -> None:
    head = Head(head_kind=kind)
    pack_head(head, limit - head_size(head))
    with pytest.raises(LocalProtocolError):
        pack_head(head, limit - head_size(head) + 1)


def test_a_head_longer_than_255_bytes_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="255"):
        pack_head(Head(stamp=1e300), 0)


def test_native_stamps_keep_six_decimals_like_raet() -> None:
    head = Head(stamp=0.1234567)
    assert b"\ndt 0.123457\n" in pack_head(head, 0)
    assert parse_head(pack_head(head, 0))[0].stamp == 0.123457
