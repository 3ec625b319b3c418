"""The registry of wire values.

Every number here is on the wire of RAET 0.6.8 or of raetlike's fast mode.
These values never change: a change breaks interoperability with every
deployed peer.  Code elsewhere uses the names, never the numbers.
"""

from __future__ import annotations

import enum

__all__ = [
    "HeadKind",
    "BodyKind",
    "CoatKind",
    "FootKind",
    "TransactionKind",
    "PacketKind",
    "Acceptance",
    "AutoMode",
    "PageKind",
    "Flag",
    "MAX_PACKET_SIZE",
    "MAX_MESSAGE_SIZE",
    "MAX_SEGMENT_COUNT",
    "MAX_HEAD_SIZE",
    "MAX_PAGE_SIZE",
    "SIGNATURE_SIZE",
    "NONCE_SIZE",
    "KEY_SIZE",
    "SID_ROLLOVER",
    "TID_ROLLOVER",
]


class HeadKind(enum.IntEnum):
    """How a packet head is written (``hk``)."""

    RAET = 0  # ASCII lines "key value", ended by "\n\n"
    JSON = 1  # compact JSON object, ended by "\r\n\r\n"
    BINARY = 2  # raetlike fast path (never written by RAET 0.6.8)


class BodyKind(enum.IntEnum):
    """How a body is serialized (``bk``)."""

    NADA = 0
    JSON = 1
    RAW = 2
    MSGPACK = 3


class CoatKind(enum.IntEnum):
    """How a body is coated (``ck``)."""

    NADA = 0
    NACL = 1  # crypto_box, MAC+ciphertext then the 24-byte nonce


class FootKind(enum.IntEnum):
    """What follows the coat (``fk``)."""

    NADA = 0
    NACL = 1  # 64-byte Ed25519 signature


class TransactionKind(enum.IntEnum):
    """Which transaction a packet belongs to (``tk``)."""

    MESSAGE = 0
    JOIN = 1
    BIND = 2
    ALLOW = 3
    ALIVE = 4


class PacketKind(enum.IntEnum):
    """What a packet says within its transaction (``pk``)."""

    MESSAGE = 0
    ACK = 1
    NACK = 2
    RESEND = 3
    REQUEST = 4
    RESPONSE = 5
    HELLO = 6
    COOKIE = 7
    INITIATE = 8
    UNJOINED = 9
    UNALLOWED = 10
    RENEW = 11
    REFUSE = 12
    REJECT = 13
    PEND = 14
    DONE = 15


class Acceptance(enum.IntEnum):
    """What the keep says about a remote's keys (by role)."""

    PENDING = 0
    ACCEPTED = 1
    REJECTED = 2


class AutoMode(enum.IntEnum):
    """How a keep accepts keys it has not seen before."""

    NEVER = 0  # first sighting pending, an operator decides
    ONCE = 1  # first sighting accepted, changed keys rejected
    ALWAYS = 2  # every sighting accepted


class PageKind(enum.IntEnum):
    """How a lane page body is serialized (``pk`` of a page)."""

    JSON = 0
    MSGPACK = 1


class Flag(enum.IntFlag):
    """Packet flags, packed into the ``fg`` byte of a head."""

    CORRESPONDENT = 0x01  # cf: answers a transaction the other side began
    BROADCAST = 0x02  # bf
    WAIT = 0x04  # wf: last segment of a burst
    SEGMENTED = 0x08  # sf
    AGAIN = 0x10  # af: a retransmission
    NAT = 0x20  # nf
    DYNAMIC = 0x40  # df
    IPV6 = 0x80  # vf


MAX_PACKET_SIZE = 1024  # a road datagram, head + coat + foot
MAX_SEGMENT_COUNT = 0xFFFF
MAX_MESSAGE_SIZE = 67_107_840  # largest coat of one message
MAX_HEAD_SIZE = 255
MAX_PAGE_SIZE = 0xFFFF  # a lane datagram
SIGNATURE_SIZE = 64
NONCE_SIZE = 24
KEY_SIZE = 32
SID_ROLLOVER = 0xFFFFFFFF  # session ids roll from here to 1
TID_ROLLOVER = 0xFFFFFFFF  # transaction ids roll from here to 1
