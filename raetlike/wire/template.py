"""Packing the packets of one transaction fast, from one checked head.

The packets of a message differ only in the flags and the segment fields
(``sn``, ``sc``, ``ml``); every other head field is the transaction's.  A
:class:`PacketTemplate` checks the shared head once and, for native heads,
keeps the text of the fields before and after the segment fields, so each
packet costs a few string joins and the signature.  The bytes are exactly
those of :func:`~raetlike.wire.packet.pack_packet` on the same head.
"""

from __future__ import annotations

from dataclasses import replace

from raetlike.crypto import SigningKey
from raetlike.wire._head_model import UINT8_MAX, UINT16_MAX, UINT32_MAX, Head, check_head
from raetlike.wire._head_native import native_text_around_segments, segment_lines
from raetlike.wire.kinds import (
    MAX_HEAD_SIZE,
    MAX_PACKET_SIZE,
    SIGNATURE_SIZE,
    Flag,
    FootKind,
    HeadKind,
)
from raetlike.wire.packet import pack_packet, signed_bytes
from raetlike.wire.segment import plan_for_head_size, plan_segments

__all__ = ["PacketTemplate"]

_FLAGS = tuple(Flag(value) for value in range(UINT8_MAX + 1))
_SEGMENTED = int(Flag.SEGMENTED)
# "ri RAET\npl XXXX\nhl XX\nfg XX" and the closing "\n\n".
_FIXED_SIZE = len("ri RAET\npl 0000\nhl 00\nfg 00\n\n")
_PL_LIMIT = 0xFFFF


class PacketTemplate:
    """Packs packets whose heads are ``head`` but for flags, ``sn``, ``sc`` and ``ml``.

    ``signer`` decides the foot as in :func:`~raetlike.wire.packet.pack_packet`
    (``head.foot_kind`` is overridden).  Raises :class:`LocalProtocolError`
    when a field of ``head`` does not fit its wire width.
    """

    __slots__ = ("_after", "_before", "_foot_size", "_head", "_limit", "_native", "_signer")

    def __init__(self, head: Head, signer: SigningKey | None, *,
                 limit: int = MAX_PACKET_SIZE) -> None:
        foot_kind = FootKind.NADA if signer is None else FootKind.NACL
        base = head
        if (head.foot_kind is not foot_kind or head.segment_number != 0
                or head.segment_count != 1 or head.message_length != 0 or head.flags != 0):
            base = replace(head, foot_kind=foot_kind, segment_number=0, segment_count=1,
                           message_length=0, flags=_FLAGS[0])
        check_head(base)
        self._head = base
        self._signer = signer
        self._limit = limit
        self._foot_size = 0 if signer is None else SIGNATURE_SIZE
        self._native = base.head_kind is HeadKind.RAET
        # RAET's field order puts sn, sc and ml after oi and before bk, ck, fk and fl.
        self._before, self._after = (native_text_around_segments(base) if self._native
                                     else ("", ""))

    def plan(self, coat_size: int) -> tuple[bool, int, int]:
        """:func:`~raetlike.wire.segment.plan_segments` of a coat of ``coat_size`` bytes under
        the shared head: (segmented, segment count, chunk size)."""
        if self._native:
            base_size = _FIXED_SIZE + len(self._before) + len(self._after)
            return plan_for_head_size(base_size, HeadKind.RAET, coat_size,
                                      self._signer is not None, limit=self._limit)
        return plan_segments(self._head, coat_size, self._signer is not None, limit=self._limit)

    @property
    def head(self) -> Head:
        """The shared head (flags clear, unsegmented, ``fk`` from the signer)."""
        return self._head

    def pack(self, coat: bytes, flags: int = 0, segment_number: int = 0,
             segment_count: int = 1, message_length: int = 0) -> bytes:
        """The wire bytes of the packet with these flags and segment fields and ``coat``.

        Equal to ``pack_packet(replace(head, flags=Flag(flags), segment_number=...,
        segment_count=..., message_length=...), coat, signer, limit=limit)``,
        and raises what that raises.
        """
        if not (self._native and type(flags) is int and 0 <= flags <= UINT8_MAX
                and type(segment_number) is int and type(segment_count) is int
                and type(message_length) is int and 0 <= segment_number <= UINT16_MAX
                and 1 <= segment_count <= UINT16_MAX and 0 <= message_length <= UINT32_MAX
                and (segment_number < segment_count or not flags & _SEGMENTED)):
            return self._pack_slowly(coat, flags, segment_number, segment_count, message_length)
        middle = segment_lines(segment_number, segment_count, message_length)
        head_size = _FIXED_SIZE + len(self._before) + len(middle) + len(self._after)
        size = head_size + len(coat) + self._foot_size
        if head_size > MAX_HEAD_SIZE or size > _PL_LIMIT or size > self._limit:
            return self._pack_slowly(coat, flags, segment_number, segment_count, message_length)
        raw_head = (f"ri RAET\npl {size:04x}\nhl {head_size:02x}\nfg {flags:02x}"
                    f"{self._before}{middle}{self._after}\n\n").encode("ascii")
        if self._signer is None:
            return raw_head + coat
        return raw_head + coat + self._signer.sign(signed_bytes(raw_head, coat))

    def _pack_slowly(self, coat: bytes, flags: int, segment_number: int, segment_count: int,
                     message_length: int) -> bytes:
        flag = _FLAGS[flags] if type(flags) is int and 0 <= flags <= UINT8_MAX else flags
        head = replace(self._head, flags=flag,  # type: ignore[arg-type] # check_head names it
                       segment_number=segment_number, segment_count=segment_count,
                       message_length=message_length)
        return pack_packet(head, coat, self._signer, limit=self._limit)
