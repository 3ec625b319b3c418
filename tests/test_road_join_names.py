"""Names from the network follow raetlike.names: a join naming itself with control
characters, separators or a leading dot is refused before anything is recorded."""

from __future__ import annotations

import json

import pytest

from raetlike.wire.kinds import PacketKind, TransactionKind
from raetlike.wire.packet import pack_packet, parse_packet
from road.stats import Drop
from tests.roadkit import MAIN, MINION, make_pair


@pytest.mark.parametrize(("field", "value"), [
    ("name", "evil\x1b[31mred"),
    ("name", "../../etc/passwd"),
    ("name", ".hidden"),
    ("name", "two\nlines"),
    ("role", "role\x00nul"),
    ("role", "a/b"),
])
def test_a_join_with_a_hostile_name_or_role_is_refused_and_recorded_nowhere(
        field: str, value: str) -> None:
    pair = make_pair()
    pair.minion.join(MAIN, now=pair.net.now)
    [(request, _)] = [(d, a) for d, a in pair.minion.datagrams_to_send(pair.net.now)
                      if parse_packet(d).head.transaction_kind == TransactionKind.JOIN]
    packet = parse_packet(request)
    assert packet.head.packet_kind == PacketKind.REQUEST
    body = json.loads(packet.coat)
    body[field] = value
    forged = pack_packet(packet.head, json.dumps(body, separators=(",", ":")).encode())
    pair.main.receive_datagram(forged, MINION, pair.net.now)
    assert pair.main.stats.dropped[Drop.INVALID_BODY] == 1
    assert not pair.main.remotes
    assert not pair.main.datagrams_to_send(pair.net.now)


def test_a_join_with_a_printable_unicode_name_still_goes_through() -> None:
    from road.config import LocalEstate  # noqa: PLC0415 - the one test that needs it

    pair = make_pair(minion_estate=LocalEstate("minion-ünïcode"))
    pair.allow()
    assert "minion-ünïcode" in pair.main.names
