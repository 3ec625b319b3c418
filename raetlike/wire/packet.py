"""Road packets: head ‖ coat ‖ foot, packed and parsed.

The foot, when there is one, is the Ed25519 signature of
``head ‖ coat ‖ 64 zero bytes`` (RAET's rule: the head already says
``fk`` 1 and ``fl`` 64 when it is signed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from raetlike.crypto import SigningKey, VerifyKey
from raetlike.errors import LocalProtocolError, PacketError
from raetlike.wire._head_binary import pack_binary, parse_binary
from raetlike.wire.head import BINARY_MAGIC, Head, pack_head, parse_head
from raetlike.wire.kinds import MAX_PACKET_SIZE, SIGNATURE_SIZE, FootKind, HeadKind

__all__ = ["Packet", "pack_packet", "parse_packet", "signed_bytes"]

_BLANK_FOOT = bytes(SIGNATURE_SIZE)


def signed_bytes(raw_head: bytes, coat: bytes) -> bytes:
    """What a foot signs: ``raw_head ‖ coat ‖ 64 zero bytes``."""
    return b"".join((raw_head, coat, _BLANK_FOOT))


@dataclass(frozen=True, slots=True)
class Packet:
    """One road packet as read off the wire."""

    head: Head
    """The parsed head."""
    coat: bytes
    """The (possibly encrypted) body bytes; a segment's chunk when segmented."""
    foot: bytes
    """``b""`` or the 64-byte Ed25519 signature."""
    raw_head: bytes
    """The head bytes exactly as they were on the wire."""

    def verify(self, key: VerifyKey) -> None:
        """Raise :class:`CryptoError` unless the foot is ``key``'s signature of this packet.

        Raises :class:`PacketError` (reason ``no-foot``) when the packet is unsigned.
        """
        if not self.foot:
            raise PacketError("no-foot", "packet carries no signature")
        key.verify(self.foot, signed_bytes(self.raw_head, self.coat))


class _PacketBuilder:
    """A mutable twin of :class:`Packet` (same slots): frozen dataclasses build slowly."""

    __slots__ = ("head", "coat", "foot", "raw_head")  # noqa: RUF023 - Packet's slots, in order

    def __init__(self, head: Head, coat: bytes, foot: bytes, raw_head: bytes) -> None:
        self.head = head
        self.coat = coat
        self.foot = foot
        self.raw_head = raw_head


if _PacketBuilder.__slots__ != Packet.__slots__:  # pragma: no cover - guards the twin
    raise ImportError("_PacketBuilder must have exactly Packet's slots, in order")


def pack_packet(
    head: Head,
    coat: bytes,
    signer: SigningKey | None = None,
    *,
    limit: int = MAX_PACKET_SIZE,
) -> bytes:
    """The wire bytes of one packet: ``head`` (in its ``head_kind`` form), ``coat``, foot.

    ``signer`` decides the foot: with it, ``fk`` is nacl and the packet is
    signed; without it, ``fk`` is nada (``head.foot_kind`` is overridden).
    Raises :class:`LocalProtocolError` when the packet exceeds ``limit`` bytes
    (1024 by default, RAET's datagram limit: segment first) or a head field
    does not fit.
    """
    foot_kind = FootKind.NADA if signer is None else FootKind.NACL
    if head.foot_kind is not foot_kind:
        head = replace(head, foot_kind=foot_kind)
    if head.head_kind is HeadKind.BINARY:
        raw_head = pack_binary(head, len(coat))
    else:
        raw_head = pack_head(head, len(coat))
    size = len(raw_head) + len(coat) + (0 if signer is None else SIGNATURE_SIZE)
    if size > limit:
        raise LocalProtocolError(f"packet of {size} bytes exceeds {limit}: segment it")
    if signer is None:
        return raw_head + coat
    return raw_head + coat + signer.sign(signed_bytes(raw_head, coat))


def parse_packet(data: bytes) -> Packet:
    """Split one datagram into a :class:`Packet`.

    Raises :class:`PacketError` (with a short ``reason``) for anything that is
    not a well-formed packet, and nothing else.  The foot is not verified
    here (see :meth:`Packet.verify`) and the coat is not opened.
    """
    if type(data) is not bytes:
        if not isinstance(data, bytearray | memoryview):
            raise PacketError("bad-type", f"a packet is bytes, not {type(data).__name__}")
        data = bytes(data)
    if data and data[0] == BINARY_MAGIC:
        head, head_size, foot_size = parse_binary(data)
    else:
        head, head_size, foot_size = parse_head(data)
    end = len(data) - foot_size
    packet = _PacketBuilder(head, data[head_size:end], data[end:], data[:head_size])
    packet.__class__ = Packet  # type: ignore[assignment]
    return packet  # type: ignore[return-value]
