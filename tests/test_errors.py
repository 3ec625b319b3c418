from raetlike.errors import PacketError, ProtocolError, RaetError, RemoteProtocolError


def test_packet_errors_are_remote_protocol_errors_with_a_reason() -> None:
    err = PacketError("bad-head", "missing 'ri RAET'")
    assert isinstance(err, RemoteProtocolError)
    assert isinstance(err, ProtocolError)
    assert isinstance(err, RaetError)
    assert err.reason == "bad-head"
    assert str(err) == "bad-head: missing 'ri RAET'"
