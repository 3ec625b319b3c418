"""The fast native-head codec paths agree with the validating reference, byte for byte.

The fast parser must accept exactly the heads the reference parser accepts
(with equal results) and fail exactly as it fails; the enum-free head text,
the cheap range check, the packet template and the segment plan must give
what the slower spellings give.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raetlike.crypto import SigningKey
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import (
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    Head,
    HeadKind,
    PacketKind,
    PacketTemplate,
    Reassembly,
    TransactionKind,
    pack_packet,
    plan_segments,
    segment,
)
from raetlike.wire._head_model import _fits, _range_problems
from raetlike.wire._head_native import (
    _optional_text_reference,
    native_optional_text,
    parse_native,
    parse_native_reference,
)
from raetlike.wire._head_text import FIELD_ORDER
from tests.test_wire_head import heads

SIGNER = SigningKey(bytes(range(32)))
NATIVE_HEADS = heads(HeadKind.RAET)
HEX = "0123456789abcdefABCDEF"


def _outcome(parse: object, data: bytes) -> object:
    """What a parser makes of ``data``: its result, or the PacketError's reason and text."""
    try:
        return parse(data)  # type: ignore[operator]
    except PacketError as error:
        return ("error", error.reason, str(error))


def _lines(head_lines: list[str], coat: bytes, *, pl: int | None, hl: int | None) -> bytes:
    """A native-looking packet from ``head_lines``; ``pl``/``hl`` None means "say the truth"."""
    body = "".join(f"\n{line}" for line in head_lines).encode("utf-8")
    head_size = len(b"ri RAET\npl 0000\nhl 00" + body + b"\n\n")
    pl = head_size + len(coat) if pl is None else pl
    hl = head_size if hl is None else hl
    return f"ri RAET\npl {pl:04x}\nhl {hl:02x}".encode("ascii") + body + b"\n\n" + coat


_VALUES = st.one_of(
    st.integers(0, 0x1_0000_0000).map(lambda n: f"{n:x}"),
    st.integers(0, 20).map(lambda n: f"{n:X}"),
    st.integers(0, 20).map(lambda n: f"000{n:x}"),
    st.text(HEX, min_size=0, max_size=18),
    st.text("0123456789.-", min_size=0, max_size=8),
    # "\u0661" is an Arabic-Indic one: int() reads it, a native head must not
    st.sampled_from(["", " ", "0x1", "+1", "1_0", "-1", "1.5", "1e3", "inf", "nan", "\u0661"]),
)


@st.composite
def native_heads_in_any_shape(draw: st.DrawFn) -> bytes:
    """Native heads near the canonical form: known and unknown keys, any order or duplicates,
    odd values, true or false lengths."""
    if draw(st.integers(0, 3)):  # mostly known keys, each once
        keys = draw(st.lists(st.sampled_from(["fg", *FIELD_ORDER]), unique=True, max_size=12))
    else:
        keys = draw(st.lists(st.sampled_from([*FIELD_ORDER, "fg", "fg", "ri", "pl", "zz"]),
                             max_size=12))
    if draw(st.booleans()):
        keys = sorted(set(keys), key=["fg", *FIELD_ORDER, "ri", "pl", "zz"].index)
    lines = []
    for key in keys:
        if key == "dt":
            value = draw(st.one_of(st.integers(-(10**9), 10**9).map(lambda n: f"{n / 1e3:f}"),
                                   _VALUES))
        elif key == "fl":
            value = draw(st.sampled_from(["40", "40", "0", "28", "040"]) | _VALUES)
        elif draw(st.integers(0, 3)):  # mostly plausible values, so that many heads are valid
            value = draw(st.sampled_from(["0", "1", "2", "3", "f", "8", "4d", "00ffff", "FFFF"]))
        else:
            value = draw(_VALUES)
        lines.append(f"{key} {value}")
    coat = draw(st.binary(max_size=80))
    pl = draw(st.none() | st.none() | st.none() | st.integers(0, 0x200))
    hl = draw(st.none() | st.none() | st.none() | st.integers(0, 0x100))
    return _lines(lines, coat, pl=pl, hl=hl)


@given(NATIVE_HEADS, st.binary(max_size=300), st.booleans())
@settings(max_examples=150, deadline=None)
def test_fast_parse_of_a_packed_packet_equals_the_reference(
    head: Head, coat: bytes, signed: bool
) -> None:
    data = pack_packet(head, coat, SIGNER if signed else None, limit=0xFFFF)
    fast = parse_native(data)
    assert fast == parse_native_reference(data)
    assert fast[0] == dataclasses.replace(
        head, foot_kind=FootKind.NACL if signed else FootKind.NADA)


@given(native_heads_in_any_shape())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_parse_accepts_and_rejects_exactly_what_the_reference_does(data: bytes) -> None:
    assert _outcome(parse_native, data) == _outcome(parse_native_reference, data)


@pytest.mark.slow
@given(native_heads_in_any_shape())
@settings(max_examples=100_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_parse_agrees_with_the_reference_many_times(data: bytes) -> None:
    assert _outcome(parse_native, data) == _outcome(parse_native_reference, data)


@given(st.binary(max_size=120).map(lambda tail: b"ri RAET\npl " + tail))
@settings(max_examples=500, deadline=None)
def test_fast_parse_agrees_on_random_bytes_after_a_native_start(data: bytes) -> None:
    assert _outcome(parse_native, data) == _outcome(parse_native_reference, data)


@pytest.mark.parametrize(("lines", "accepted"), [
    (["fg 00"], True),  # the smallest head
    (["fg 00", "sn 1", "sc 1"], True),  # segment number not below count...
    (["fg 08", "sn 1", "sc 1"], False),  # ...matters only when segmented
    (["fg 00", "vn 1"], False),  # version 1
    (["fg 00", "hk 1"], False),  # says JSON head
    (["fg 00", "fk 1"], False),  # fk without fl
    (["fg 00", "fk 1", "fl 40"], True),
    (["fg 100"], False),  # flags over a byte
    (["fg 00", "se 100000000"], False),  # uid over 32 bits
    (["fg 00", "se ffffffff"], True),
    (["fg 00", "sc 0"], False),
    (["fg 00", "sc 10000"], False),
    (["fg 00", "pk 10"], False),  # unknown packet kind
    (["fg 00", "dt 1e3"], False),
    (["fg 00", "dt -12.5"], True),
    (["fg 00", "se +1"], False),
    (["fg 00", "se 0x1"], False),
    (["fg 00", "se 1_0"], False),
    (["fg 00", "se 00000000000000001"], False),  # seventeen digits
    (["fg 00", "se 0000000000000001"], True),
    (["sc 1", "fg 00"], True),  # valid, not canonical: the reference reads it
    (["fg 00", "fg 00"], False),
])
def test_edge_heads_get_the_same_answer_from_both_parsers(lines: list[str],
                                                          accepted: bool) -> None:
    data = _lines(lines, b"coat", pl=None, hl=None)
    answer = _outcome(parse_native, data)
    assert answer == _outcome(parse_native_reference, data)
    assert (answer[0] != "error") is accepted  # type: ignore[index]


@pytest.mark.parametrize("key", ["se", "de", "si", "ti", "oi", "ml", "sn", "sc", "fg", "vn",
                                 "pk", "tk", "bk", "ck", "fk", "hk"])
@pytest.mark.parametrize("value", ["100000000", "10000", "100", "ffff", "5", "ffffffff"])
@pytest.mark.parametrize("segmented", [False, True])
def test_every_field_is_bounded_alike_by_both_parsers(key: str, value: str,
                                                      segmented: bool) -> None:
    fields = {"fg": "08" if segmented else "00", "sn": "1", "sc": "ffff"} if segmented else {
        "fg": "00"}
    fields[key] = value
    lines = [f"{k} {fields[k]}" for k in ["fg", *FIELD_ORDER] if k in fields]
    data = _lines(lines, b"", pl=None, hl=None)
    assert _outcome(parse_native, data) == _outcome(parse_native_reference, data)


def test_a_packet_longer_than_pl_says_is_refused_by_both() -> None:
    data = _lines(["fg 00"], b"", pl=None, hl=None) + b"more"
    assert _outcome(parse_native, data) == _outcome(parse_native_reference, data)
    assert _outcome(parse_native, data)[0] == "error"  # type: ignore[index]


def test_a_head_in_another_order_is_still_read_by_the_fallback() -> None:
    data = b"ri RAET\nhl 22\npl 0022\nsi 5\nfg 01\n\n"
    head, size, foot = parse_native(data)
    assert (head.session_id, head.flags, size, foot) == (5, Flag.CORRESPONDENT, 0x22, 0)


@given(NATIVE_HEADS)
@settings(max_examples=150, deadline=None)
def test_the_enum_free_head_text_equals_the_field_list_spelling(head: Head) -> None:
    assert native_optional_text(head) == _optional_text_reference(head)


_ANY = st.one_of(st.integers(-2, 2**33), st.booleans(), st.floats(), st.none(),
                 st.sampled_from([0, 1, 0xFFFF, 0x10000, 0xFFFF_FFFF, 2**32]))


@given(st.fixed_dictionaries({
    "source_uid": _ANY, "destination_uid": _ANY, "session_id": _ANY, "transaction_id": _ANY,
    "order_index": _ANY, "message_length": _ANY, "segment_number": _ANY,
    "segment_count": _ANY, "version": _ANY,
    "stamp": st.one_of(st.floats(), st.integers(-5, 5), st.none()),
    "flags": st.one_of(st.sampled_from(Flag), st.integers(-1, 300).map(Flag)),
}))
@settings(max_examples=150, deadline=None)
def test_the_cheap_range_check_passes_exactly_the_heads_with_no_problems(
    fields: dict[str, object]
) -> None:
    head = Head(**fields)  # type: ignore[arg-type]
    try:
        expected = not _range_problems(head)
    except TypeError:  # the reference cannot even compare such values: the check must fail
        expected = False
    assert _fits(head) is expected


def _template_case(  # noqa: PLR0917 - the fields of one packet
    head: Head, flags: int, number: int, count: int, length: int, coat: bytes,
    signer: SigningKey | None, limit: int,
) -> None:
    template = PacketTemplate(head, signer, limit=limit)
    expected_head = dataclasses.replace(
        template.head, flags=Flag(flags), segment_number=number, segment_count=count,
        message_length=length)
    try:
        expected: object = pack_packet(expected_head, coat, signer, limit=limit)
    except LocalProtocolError as error:
        expected = ("error", str(error))
    try:
        got: object = template.pack(coat, flags, number, count, length)
    except LocalProtocolError as error:
        got = ("error", str(error))
    assert got == expected


@given(
    heads(), st.integers(0, 0xFF), st.integers(0, 0x1_0000), st.integers(0, 0x1_0000),
    st.integers(0, 2**32), st.binary(max_size=1100), st.booleans(),
    st.sampled_from([1024, 0xFFFF, 200]),
)
@settings(max_examples=200, deadline=None)
def test_a_template_packs_the_bytes_pack_packet_packs(  # noqa: PLR0917 - drawn values
    head: Head, flags: int, number: int, count: int, length: int, coat: bytes, signed: bool,
    limit: int,
) -> None:
    _template_case(head, flags, number, count, length, coat, SIGNER if signed else None, limit)


@given(NATIVE_HEADS, st.integers(0, 0xFF), st.integers(0, 12), st.integers(1, 12),
       st.integers(0, 5000), st.binary(max_size=900))
@settings(max_examples=150, deadline=None)
def test_a_template_of_a_native_head_packs_typical_segments_like_pack_packet(  # noqa: PLR0917
    head: Head, flags: int, number: int, count: int, length: int, coat: bytes
) -> None:
    _template_case(head, flags, number, count, length, coat, SIGNER, 1024)


@given(heads(), st.integers(0, 70_000), st.booleans())
@settings(max_examples=150, deadline=None)
def test_a_template_plans_segments_as_plan_segments_does(
    head: Head, coat_size: int, signed: bool
) -> None:
    template = PacketTemplate(head, SIGNER if signed else None)
    try:
        expected: object = plan_segments(head, coat_size, signed)
    except LocalProtocolError as error:
        expected = str(error)
    try:
        got: object = template.plan(coat_size)
    except LocalProtocolError as error:
        got = str(error)
    assert got == expected


@given(NATIVE_HEADS.map(lambda h: dataclasses.replace(
           h, flags=Flag(0), segment_number=0, segment_count=1, message_length=0)),
       st.binary(min_size=0, max_size=5000))
@settings(max_examples=100, deadline=None)
def test_segments_from_a_template_are_the_packets_of_segment(head: Head, coat: bytes) -> None:
    template = PacketTemplate(head, SIGNER)
    segmented, count, size = template.plan(len(coat))
    pieces = segment(head, coat, True)
    assert len(pieces) == count
    for number, (piece_head, chunk) in enumerate(pieces):
        if segmented:
            ours = template.pack(coat[number * size:(number + 1) * size], int(piece_head.flags),
                                 number, count, len(coat))
        else:
            ours = template.pack(coat)
        assert ours == pack_packet(piece_head, chunk, SIGNER)


def test_a_template_refuses_a_head_that_does_not_fit() -> None:
    with pytest.raises(LocalProtocolError):
        PacketTemplate(Head(session_id=2**32), SIGNER)


@pytest.mark.parametrize(("flags", "number", "count", "length"), [
    (0x100, 0, 1, 0), (0x1FF, 0, 1, 0), (0, 0x10000, 1, 0), (0, 0, 0, 0), (0, 0, 0x10000, 0),
    (0, 0, 1, 2**32), (0, 0, 1, -1), (int(Flag.SEGMENTED), 3, 3, 0),
])
def test_a_template_refuses_segment_fields_out_of_range_as_pack_packet_does(
    flags: int, number: int, count: int, length: int
) -> None:
    head = Head(packet_kind=PacketKind.MESSAGE, session_id=1)
    _template_case(head, flags, number, count, length, b"", SIGNER, 1024)
    with pytest.raises(LocalProtocolError):
        PacketTemplate(head, SIGNER).pack(b"", flags, number, count, length)


@given(st.integers(1, 300), st.data())
@settings(max_examples=200, deadline=None)
def test_missing_segments_are_those_not_added_whatever_the_order(
    count: int, data: st.DataObject
) -> None:
    reassembly = Reassembly(count, count)
    added: set[int] = set()
    for number in data.draw(st.lists(st.integers(0, count - 1), max_size=2 * count)):
        reassembly.add(number, b"x")
        added.add(number)
        begin = data.draw(st.integers(-2, count + 2))
        end = data.draw(st.none() | st.integers(-2, count + 2))
        stop = count if end is None else min(end, count)
        assert reassembly.missing(begin, end) == [
            n for n in range(max(begin, 0), stop) if n not in added]
    assert reassembly.complete == (len(added) == count)


def test_kinds_in_heads_are_looked_up_not_formatted() -> None:
    head = Head(packet_kind=PacketKind.DONE, transaction_kind=TransactionKind.ALIVE,
                body_kind=BodyKind.MSGPACK, coat_kind=CoatKind.NACL, foot_kind=FootKind.NACL,
                stamp=1.5)
    assert native_optional_text(head) == (
        "\npk f\ntk 4\ndt 1.500000\nbk 3\nck 1\nfk 1\nfl 40")
    assert math.isfinite(head.stamp)
