"""Fuzzing every decoder: arbitrary and mutated-valid bytes raise only the documented errors.

Each ``feed_*`` function takes raw bytes (so ``tools/fuzz.py`` and its
atheris harness can drive it too), decodes them with one decoder, swallows the
exceptions that decoder documents and checks what it promises; anything else
escapes and fails the test.  The default run is CI-sized; the long run sets
``RAETLIKE_FUZZ_EXAMPLES`` (see ``tools/fuzz.py``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raetlike.crypto import NONCE_SIZE, PrivateKey, SessionBox
from raetlike.dedup import ID_MODULUS, SeenWindow
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire import (
    BodyKind,
    Packet,
    Reassembly,
    coat,
    pack_body,
    parse_body,
    parse_packet,
    uncoat,
)
from raetlike.wire import tags as tag_stack
from raetlike.wire.kinds import MAX_PAGE_SIZE, PageKind
from raetlike.wire.page import Binder, PageHead, paginate, parse_page
from tests.test_wire_fuzz import valid_packets

EXAMPLES = int(os.environ.get("RAETLIKE_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SESSION = SessionBox(PrivateKey(bytes(range(32))), PrivateKey(bytes(range(1, 33))).public_key)
BODY_KINDS = list(BodyKind)
YARD_SESSION = "0a1b2c3d4e5f607182"
PADS = (0, 100, MAX_PAGE_SIZE + 1000)  # the last makes books of two pages
BINDER_BOOKS = 4
BINDER_BYTES = 3 * MAX_PAGE_SIZE


# -- byte-level targets ------------------------------------------------------


def feed_packet(data: bytes) -> None:
    """parse_packet: a Packet made of exactly the input's bytes, or PacketError."""
    try:
        packet = parse_packet(data)
    except PacketError:
        return
    assert isinstance(packet, Packet)
    assert packet.raw_head + packet.coat + packet.foot == data


def feed_body(data: bytes) -> None:
    """parse_body: first byte picks the kind; a str-keyed dict (or RAW bytes), or PacketError."""
    kind = BODY_KINDS[data[0] % len(BODY_KINDS)] if data else BodyKind.JSON
    try:
        body = parse_body(kind, data[1:])
    except PacketError:
        return
    if kind is BodyKind.RAW:
        assert body == data[1:]
    else:
        assert isinstance(body, dict)
        assert all(type(key) is str for key in body)


def feed_uncoat(data: bytes) -> None:
    """uncoat: only authentic coats open (sealing the plain text again gives the same bytes)."""
    try:
        plain = uncoat(data, SESSION)
    except PacketError as exc:
        if exc.reason != "bad-coat":
            raise
        return
    if data:
        assert coat(plain, SESSION, nonce=data[-NONCE_SIZE:]) == data
    else:
        assert plain == b""


def feed_reassembly(data: bytes) -> None:
    """Reassembly: the first 4 bytes announce count and length, then (number, chunk) records."""
    if len(data) < 4:
        return
    count, length = struct.unpack_from(">HH", data)
    try:
        reassembly = Reassembly(count, length)
    except PacketError:
        return
    offset = 4
    while offset + 3 <= len(data):
        number, size = struct.unpack_from(">HB", data, offset)
        chunk = data[offset + 3:offset + 3 + size]
        offset += 3 + size
        try:
            reassembly.add(number, chunk)
        except PacketError:
            continue
        assert len(reassembly.missing()) <= reassembly.segment_count
    try:
        whole = reassembly.coat()
    except LocalProtocolError:
        assert not reassembly.complete
        return
    except PacketError:
        return
    assert reassembly.complete
    assert len(whole) == reassembly.message_length


def feed_page(data: bytes) -> None:
    """parse_page: a PageHead and body bytes, or PacketError."""
    try:
        head, body = parse_page(data)
    except PacketError:
        return
    assert isinstance(head, PageHead)
    assert data.endswith(body)


def feed_binder(data: bytes) -> None:
    """Binder: pages split at NUL pairs; only PacketError, and memory stays within limits."""
    binder = Binder(max_open_books=BINDER_BOOKS, max_buffered_bytes=BINDER_BYTES, max_sources=8)
    for page in data.split(b"\0\0"):
        try:
            message = binder.add(page)
        except PacketError:
            continue
        assert message is None or isinstance(message, dict)
        assert binder.open_books <= BINDER_BOOKS
        assert binder.buffered_bytes <= BINDER_BYTES


def feed_tags(data: bytes) -> None:
    """tags.split: channel ids then one request id, and the rest; or PacketError."""
    try:
        tags, payload = tag_stack.split(data)
    except PacketError:
        return
    assert 1 <= len(tags) <= tag_stack.DEFAULT_MAX_HOPS
    assert tag_stack.is_request_id(tags[-1])
    assert all(tag_stack.is_channel_id(tag) for tag in tags[:-1])
    assert tag_stack.join(tags, payload) == data


def feed_tag_mapping(data: bytes) -> None:
    """tags.split_mapping on whatever mapping msgpack makes of the bytes; or PacketError."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - only mappings msgpack accepts are of interest
        return
    if not isinstance(body, dict):
        return
    try:
        tags, rest = tag_stack.split_mapping(body)
    except PacketError:
        return
    assert tag_stack.MAPPING_KEY not in rest
    assert tag_stack.is_request_id(tags[-1])


def feed_dedup(data: bytes) -> None:
    """SeenWindow: ids from 4-byte words (window from the first byte); never a repeat let in."""
    if not data:
        return
    window = SeenWindow(1 + data[0] % 64)
    base = ID_MODULUS - 40  # ids cross the wrap-around
    words = [word for (word,) in struct.iter_unpack(">I", data[1:len(data) - (len(data) - 1) % 4])]
    seen: set[int] = set()
    highest: int | None = None
    for word in words:
        offset = word % 200  # a small span: plain order stands for serial order
        new = window.check_and_mark((base + offset) % ID_MODULUS)
        expected = offset not in seen and (highest is None or highest - offset <= window.window)
        assert new == expected, (offset, sorted(seen), highest)
        if new:
            seen.add(offset)
            highest = offset if highest is None else max(highest, offset)
        assert len(window.unseen) <= window.window


TARGETS: dict[str, Callable[[bytes], None]] = {
    "packet": feed_packet,
    "body": feed_body,
    "uncoat": feed_uncoat,
    "reassembly": feed_reassembly,
    "page": feed_page,
    "binder": feed_binder,
    "tags": feed_tags,
    "tag-mapping": feed_tag_mapping,
    "dedup": feed_dedup,
}
"""Every decoder target by name (``tools/fuzz.py --target NAME``)."""


# -- strategies ----------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    """A valid input with a few bit flips, cuts, inserts, splices or a truncation."""
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "cut", "insert", "set", "truncate", "repeat"]))
        if action == "flip" and where < len(data):
            data[where] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[where:where + draw(st.integers(1, 16))]
        elif action == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif action == "set" and where < len(data):
            data[where] = draw(st.sampled_from(b" \n\r{}\":,0f9x-.e\x00\x80\xff"))
        elif action == "truncate":
            del data[where:]
        elif action == "repeat":
            data[where:where] = data[where:where + draw(st.integers(1, 32))]
    return bytes(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=6)
messages = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


@st.composite
def valid_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from([BodyKind.JSON, BodyKind.MSGPACK]))
    return bytes([BODY_KINDS.index(kind)]) + pack_body(kind, draw(messages))


@st.composite
def valid_coats(draw: st.DrawFn) -> bytes:
    return coat(draw(st.binary(min_size=1, max_size=200)), SESSION)


@st.composite
def valid_pages(draw: st.DrawFn) -> bytes:
    message = draw(messages)
    if draw(st.booleans()):
        message["pad"] = "x" * draw(st.sampled_from(PADS))
    kind = draw(st.sampled_from(list(PageKind)))
    pages = paginate("alpha", "beta", YARD_SESSION, draw(st.integers(1, 2**32 - 1)), message, kind)
    return draw(st.sampled_from(pages))


@st.composite
def valid_books(draw: st.DrawFn) -> bytes:
    """The pages of a few books, shuffled, joined by NUL pairs (as feed_binder splits them)."""
    pages: list[bytes] = []
    for book in range(draw(st.integers(1, 3))):
        message = {"n": book, "pad": "y" * draw(st.sampled_from(PADS))}
        pages += paginate("alpha", "beta", YARD_SESSION, book + 1, message, PageKind.JSON)
    return b"\0\0".join(draw(st.permutations(pages)))


@st.composite
def valid_tag_stacks(draw: st.DrawFn) -> bytes:
    channels = draw(st.lists(st.integers(0, 2**31 - 1), max_size=tag_stack.DEFAULT_MAX_HOPS - 1))
    request = draw(st.integers(2**31, 2**32 - 1))
    return tag_stack.join([*channels, request], draw(st.binary(max_size=20)))


@st.composite
def valid_tag_mappings(draw: st.DrawFn) -> bytes:
    data = tag_stack.split(draw(valid_tag_stacks()))[0]
    body = tag_stack.join_mapping(data, draw(messages))
    packed: bytes = msgpack.packb(body)
    return packed


@st.composite
def valid_segments(draw: st.DrawFn) -> bytes:
    whole = draw(st.binary(min_size=1, max_size=300))
    size = draw(st.integers(1, 120))
    chunks = [whole[i:i + size] for i in range(0, len(whole), size)]
    order = draw(st.permutations(range(len(chunks))))
    out = struct.pack(">HH", len(chunks), len(whole))
    for number in order:
        out += struct.pack(">HB", number, len(chunks[number])) + chunks[number]
    return out


VALID: dict[str, st.SearchStrategy[bytes]] = {
    "packet": valid_packets(),
    "body": valid_bodies(),
    "uncoat": valid_coats(),
    "reassembly": valid_segments(),
    "page": valid_pages(),
    "binder": valid_books(),
    "tags": valid_tag_stacks(),
    "tag-mapping": valid_tag_mappings(),
    "dedup": st.binary(min_size=1, max_size=400),
}


def _inputs(name: str) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=600), VALID[name], mutated(VALID[name]))


# -- tests -------------------------------------------------------------------------


@FUZZ
@given(_inputs("packet"))
def test_packet_decoding_of_any_bytes_gives_a_packet_or_a_packet_error(data: bytes) -> None:
    feed_packet(data)


@FUZZ
@given(_inputs("body"))
def test_body_decoding_of_any_bytes_gives_a_mapping_or_a_packet_error(data: bytes) -> None:
    feed_body(data)


@FUZZ
@given(_inputs("uncoat"))
def test_uncoating_forged_or_damaged_coats_is_always_a_bad_coat(data: bytes) -> None:
    feed_uncoat(data)


@FUZZ
@given(_inputs("reassembly"))
def test_reassembly_of_any_segments_gives_the_message_or_a_packet_error(data: bytes) -> None:
    feed_reassembly(data)


@FUZZ
@given(_inputs("page"))
def test_page_decoding_of_any_bytes_gives_a_page_or_a_packet_error(data: bytes) -> None:
    feed_page(data)


@FUZZ
@given(_inputs("binder"))
def test_binding_any_pages_gives_messages_or_packet_errors_within_limits(data: bytes) -> None:
    feed_binder(data)


@FUZZ
@given(_inputs("tags"))
def test_tag_stack_splitting_of_any_bytes_gives_a_stack_or_a_packet_error(data: bytes) -> None:
    feed_tags(data)


@FUZZ
@given(_inputs("tag-mapping"))
def test_tag_mapping_splitting_of_any_body_gives_a_stack_or_a_packet_error(data: bytes) -> None:
    feed_tag_mapping(data)


@FUZZ
@given(_inputs("dedup"))
def test_the_seen_window_never_lets_a_repeat_in_and_stays_bounded(data: bytes) -> None:
    feed_dedup(data)


def test_valid_inputs_decode_so_the_mutations_start_from_real_traffic() -> None:
    page = paginate("alpha", "beta", YARD_SESSION, 7, {"a": 1}, PageKind.JSON)[0]
    assert parse_page(page)[0].book_id == 7
    assert uncoat(coat(b"hello", SESSION), SESSION) == b"hello"
    assert tag_stack.split(tag_stack.join([1, 2**31 + 5], b"p")) == ([1, 2**31 + 5], b"p")
    binder = Binder()
    pages = paginate("alpha", "beta", YARD_SESSION, 9, {"pad": "z" * PADS[-1]}, PageKind.JSON)
    assert len(pages) > 1
    assert [binder.add(p) for p in pages][-1] == {"pad": "z" * PADS[-1]}


def test_every_target_has_valid_inputs() -> None:
    assert set(VALID) == set(TARGETS)
