"""Byte vectors against live RAET 0.6.8: RAET's packets equal ours, and RAET parses ours.

One RAET subprocess handles every case: for each head kind (native, JSON),
body kind (JSON, msgpack, raw), coat (none, nacl), foot (none, nacl) and
size (one packet, segmented) RAET packs the same message with the same keys
and the same fixed nonce, and parses the packets raetlike packed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from raetlike.crypto import PrivateKey, SessionBox, SigningKey
from raetlike.wire import (
    BodyKind,
    CoatKind,
    Flag,
    FootKind,
    Head,
    HeadKind,
    PacketKind,
    TransactionKind,
    coat,
    pack_body,
    pack_packet,
    parse_body,
    parse_packet,
    segment,
    uncoat,
)
from raetlike.wire.segment import Reassembly
from tests.raetpeer import run_raet

pytestmark = pytest.mark.interop

SIGNER = SigningKey(bytes(range(32)))
SENDER = PrivateKey(bytes(range(32, 64)))
RECEIVER = PrivateKey(bytes(range(64, 96)))
KEYS = {
    "signer": SIGNER.raw,
    "verify": SIGNER.verify_key.raw,
    "sender": SENDER.raw,
    "sender_public": SENDER.public_key.raw,
    "receiver": RECEIVER.raw,
    "receiver_public": RECEIVER.public_key.raw,
}
SEND_BOX = SessionBox(SENDER, RECEIVER.public_key)
RECEIVE_BOX = SessionBox(RECEIVER, SENDER.public_key)

SMALL_MAPPING = {"route": {"src": ["alpha", None, "mid"], "dst": ["beta", "yard", None]},
                 "content": "x" * 40 + " \u00e9t\u00e9", "n": [1, -2, 3.5, True, None]}
BIG_MAPPING = {"load": "payload-" * 400, "tail": list(range(300)), "long": "y" * 200}
SMALL_RAW = bytes(range(256))[:180]
BIG_RAW = bytes(range(256)) * 13


@dataclass
class Case:
    """One message packed by both sides."""

    head: Head
    body: Any
    segmented: bool
    nonce: bytes
    ours: list[bytes] = field(default_factory=list)

    @property
    def signed(self) -> bool:
        return self.head.foot_kind is FootKind.NACL

    def raet_data(self) -> dict[str, Any]:
        """The head as a RAET packet data dict."""
        head = self.head
        flags = head.flags
        data: dict[str, Any] = {
            "hk": int(head.head_kind), "se": head.source_uid, "de": head.destination_uid,
            "si": head.session_id, "ti": head.transaction_id, "tk": int(head.transaction_kind),
            "bk": int(head.body_kind), "ck": int(head.coat_kind), "fk": int(head.foot_kind),
            "oi": head.order_index,
            "cf": bool(flags & Flag.CORRESPONDENT), "wf": bool(flags & Flag.WAIT),
            "af": bool(flags & Flag.AGAIN),
        }
        if head.stamp:
            data["dt"] = head.stamp
        return data

    def payload(self) -> dict[str, Any]:
        return {"data": self.raet_data(), "kind": int(self.head.packet_kind),
                "body": self.body, "segmented": self.segmented, "nonce": self.nonce,
                "ours": self.ours}


def _pack_ours(case: Case) -> list[bytes]:
    head = case.head
    body = pack_body(head.body_kind, case.body)
    coated = coat(body, SEND_BOX, case.nonce) if head.coat_kind is CoatKind.NACL else body
    signer = SIGNER if case.signed else None
    return [pack_packet(part, chunk, signer) for part, chunk in segment(head, coated, case.signed)]


def _cases() -> list[Case]:
    cases = []
    bodies = {
        BodyKind.JSON: (SMALL_MAPPING, BIG_MAPPING),
        BodyKind.MSGPACK: (SMALL_MAPPING, BIG_MAPPING),
        BodyKind.RAW: (SMALL_RAW, BIG_RAW),
    }
    matrix = itertools.product(
        (HeadKind.RAET, HeadKind.JSON), bodies, CoatKind, FootKind, (False, True)
    )
    for number, (head_kind, body_kind, coat_kind, foot_kind, segmented) in enumerate(matrix, 1):
        head = Head(
            packet_kind=PacketKind.MESSAGE, transaction_kind=TransactionKind.MESSAGE,
            source_uid=2 + number, destination_uid=0x1F0 + number, session_id=number,
            transaction_id=0xFFFFFFF0 + number % 16, body_kind=body_kind,
            coat_kind=coat_kind, foot_kind=foot_kind, head_kind=head_kind,
            flags=Flag.WAIT if number % 3 == 0 else Flag(0),
        )
        body = bodies[body_kind][segmented]
        cases.append(Case(head, body, segmented, bytes([number]) * 24))
    extra_heads = [
        Head(packet_kind=PacketKind.REQUEST, transaction_kind=TransactionKind.JOIN,
             source_uid=2, transaction_id=1, body_kind=BodyKind.JSON),
        Head(packet_kind=PacketKind.ACK, transaction_kind=TransactionKind.ALLOW,
             source_uid=7, destination_uid=9, session_id=3, transaction_id=4,
             flags=Flag.CORRESPONDENT | Flag.AGAIN, body_kind=BodyKind.RAW,
             foot_kind=FootKind.NACL, head_kind=HeadKind.JSON),
        Head(packet_kind=PacketKind.DONE, source_uid=1, destination_uid=1,
             session_id=0xFFFFFFFF, transaction_id=0xABCDEF, order_index=5, stamp=1.5,
             body_kind=BodyKind.MSGPACK, coat_kind=CoatKind.NACL, foot_kind=FootKind.NACL),
        Head(packet_kind=PacketKind.DONE, source_uid=1, destination_uid=1,
             order_index=0x77, stamp=12.25, body_kind=BodyKind.JSON, head_kind=HeadKind.JSON),
    ]
    extra_bodies: list[Any] = [
        {"name": "alpha", "mode": 0, "kind": 0, "verhex": "ab" * 32, "pubhex": "cd" * 32,
         "role": "alpha"},
        b"",
        {},
        {"misseds": [1, 2, 3]},
    ]
    for index, (head, body) in enumerate(zip(extra_heads, extra_bodies, strict=True)):
        cases.append(Case(head, body, False, bytes([200 + index]) * 24))
    for case in cases:
        case.ours = _pack_ours(case)
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def raet_results() -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = run_raet(
        RAET_SCRIPT, {"keys": KEYS, "cases": [case.payload() for case in CASES]}
    )
    assert len(results) == len(CASES)
    return results


def _case_id(case: Case) -> str:
    head = case.head
    return (f"{head.head_kind.name}-{head.body_kind.name}-ck{int(head.coat_kind)}-"
            f"fk{int(head.foot_kind)}-{'seg' if case.segmented else 'one'}-"
            f"pk{int(head.packet_kind)}")


INDEXED = list(enumerate(CASES))
IDS = [f"{index}-{_case_id(case)}" for index, case in INDEXED]


def test_the_matrix_really_segments_the_big_messages() -> None:
    for case in CASES:
        assert (len(case.ours) > 1) is case.segmented


@pytest.mark.parametrize(("index", "case"), INDEXED, ids=IDS)
def test_raet_packs_the_same_bytes_as_raetlike(
    raet_results: list[dict[str, Any]], index: int, case: Case
) -> None:
    assert raet_results[index]["theirs"] == case.ours


@pytest.mark.parametrize(("index", "case"), INDEXED, ids=IDS)
def test_raet_parses_raetlike_packets_into_the_same_fields_and_body(
    raet_results: list[dict[str, Any]], index: int, case: Case
) -> None:
    result = raet_results[index]
    assert result["error"] is None
    head = case.head
    assert len(result["heads"]) == len(case.ours)
    for number, (fields, packed) in enumerate(zip(result["heads"], case.ours, strict=True)):
        assert fields["pk"] == head.packet_kind
        assert fields["hk"] == head.head_kind
        assert (fields["se"], fields["de"]) == (head.source_uid, head.destination_uid)
        assert (fields["si"], fields["ti"]) == (head.session_id, head.transaction_id)
        assert fields["tk"] == head.transaction_kind
        assert (fields["bk"], fields["ck"], fields["fk"]) == (
            head.body_kind, head.coat_kind, head.foot_kind)
        assert fields["fl"] == (64 if case.signed else 0)
        assert fields["pl"] == len(packed)
        assert fields["dt"] == head.stamp
        assert fields["oi"] == head.order_index
        assert fields["cf"] is bool(head.flags & Flag.CORRESPONDENT)
        assert fields["wf"] is bool(head.flags & Flag.WAIT)
        assert fields["af"] is bool(head.flags & Flag.AGAIN)
        assert fields["sf"] is case.segmented
        if case.segmented:
            assert (fields["sn"], fields["sc"]) == (number, len(case.ours))
    expected = case.body if case.body is not None else {}
    assert result["body"] == expected


@pytest.mark.parametrize(("index", "case"), INDEXED, ids=IDS)
def test_raetlike_reads_raet_packets_back_into_the_message(
    raet_results: list[dict[str, Any]], index: int, case: Case
) -> None:
    packets = [parse_packet(packed) for packed in raet_results[index]["theirs"]]
    for packet in packets:
        if case.signed:
            packet.verify(SIGNER.verify_key)
        assert packet.head.source_uid == case.head.source_uid
    first = packets[0].head
    if case.segmented:
        reassembly = Reassembly(first.segment_count, first.message_length)
        for packet in reversed(packets):
            assert reassembly.add(packet.head.segment_number, packet.coat)
        coated = reassembly.coat()
    else:
        assert len(packets) == 1
        coated = packets[0].coat
    if case.head.coat_kind is CoatKind.NACL:
        coated = uncoat(coated, RECEIVE_BOX)
    assert parse_body(case.head.body_kind, coated) == case.body


def test_captured_protocol_heads_are_reproduced() -> None:
    join = Head(packet_kind=PacketKind.REQUEST, transaction_kind=TransactionKind.JOIN,
                source_uid=2, transaction_id=1, body_kind=BodyKind.JSON)
    packed = pack_packet(join, b"j" * (0xFF - 0x36))
    assert packed.startswith(b"ri RAET\npl 00ff\nhl 36\nfg 00\npk 4\nse 2\nti 1\ntk 1\nbk 1\n\n")
    alive = Head(packet_kind=PacketKind.REQUEST, transaction_kind=TransactionKind.ALIVE,
                 source_uid=2, destination_uid=2, session_id=2, transaction_id=3,
                 body_kind=BodyKind.JSON, coat_kind=CoatKind.NACL, head_kind=HeadKind.JSON)
    packed = pack_packet(alive, b"c" * (0xC2 - 0x82 - 64), SIGNER)
    assert packed.startswith(
        b'{"ri":"RAET","pl":"00000c2","hl":"82","fg":"00","pk":4,"hk":1,"se":2,"de":2,'
        b'"si":2,"ti":3,"tk":4,"bk":1,"ck":1,"fk":1,"fl":64}\r\n\r\n'
    )


RAET_SCRIPT = """
# RAET 0.6.8 side of the wire vector tests (runs inside a RAET peer subprocess).
# Input: {"keys": {...}, "cases": [...]}; each case has "data" (RAET packet data
# fields), "kind" (pk), "body", "segmented", "nonce" and "ours" (the packets
# raetlike packed for the same case).  RAET packs the same message (its nonce
# source patched to the case's fixed nonce) and parses raetlike's packets.

import types

import msgpack
from ioflo.aid.odicting import odict
from raet import nacling
from raet.road import packeting

# RAET 0.6.8 calls msgpack.dumps/loads with encoding='utf-8', which msgpack 1.x
# no longer takes.  Give it what msgpack-python 0.4/0.5 did then: strings (and
# bytes) in the legacy raw type on the way out, raw or str read as text.
_packb = msgpack.packb
_unpackb = msgpack.unpackb
msgpack.dumps = lambda obj, **kw: _packb(obj, use_bin_type=False)
msgpack.loads = lambda data, **kw: _unpackb(
    data, raw=False, object_pairs_hook=kw.get("object_pairs_hook"), strict_map_key=False
)

_nonce = [b""]
nacling.Privateer.nonce = lambda self: _nonce[0]

payload = load_input()
keys = payload["keys"]


def _estate(privee_key, publee_key, verfer_key):
    return types.SimpleNamespace(
        privee=nacling.Privateer(privee_key),
        publee=nacling.Publican(publee_key),
        verfer=nacling.Verifier(verfer_key),
    )


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


FIELDS = ["pk", "hk", "se", "de", "si", "ti", "tk", "dt", "oi", "sn", "sc", "ml",
          "bk", "ck", "fk", "fl", "pl", "hl", "vn",
          "cf", "bf", "nf", "df", "vf", "wf", "sf", "af"]

results = []
for case in payload["cases"]:
    data = case["data"]
    tx = types.SimpleNamespace(
        local=types.SimpleNamespace(signer=nacling.Signer(keys["signer"])),
        remotes={data["se"]: _estate(keys["sender"], keys["receiver_public"], None)},
        veritive=False,
    )
    _nonce[0] = case["nonce"]
    if case["segmented"]:
        tray = packeting.TxTray(stack=tx, data=odict(data), body=case["body"])
        tray.pack()
        theirs = [packet.packed for packet in tray.packets]
    else:
        packet = packeting.TxPacket(stack=tx, kind=case["kind"], embody=case["body"],
                                    data=odict(data))
        packet.pack()
        theirs = [packet.packed]

    rx = types.SimpleNamespace(
        remotes={data["de"]: _estate(keys["receiver"], keys["sender_public"], keys["verify"])},
        veritive=False,
    )
    heads = []
    body = None
    error = None
    try:
        tray = packeting.RxTray(stack=rx)
        for packed in case["ours"]:
            packet = packeting.RxPacket(stack=rx, packed=packed)
            packet.parseOuter()
            heads.append({k: packet.data[k] for k in FIELDS})
            body = tray.parse(packet)
        body = _plain(dict(body)) if isinstance(body, dict) else body
    except Exception as exc:  # report, don't crash: the test shows it
        error = repr(exc)
    results.append({"theirs": theirs, "heads": heads, "body": body, "error": error})

emit(results)
"""
