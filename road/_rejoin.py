"""The answer every in-session initiator (alive, allow) gives to "unjoined": join again."""

from __future__ import annotations

from typing import Any

from raetlike.wire.packet import Packet
from road._transaction import Transaction

__all__ = ["rejoin_when_unjoined"]


def rejoin_when_unjoined(transaction: Transaction, _packet: Packet, _body: Any) -> None:
    """The far side says we are not joined: mark the remote so, end ``transaction``, join again.

    Used as the ``on_unjoined`` rule of a transaction class.
    """
    transaction.remote.joined = False
    transaction.fail("far side says we are not joined")
    transaction.stack._start_join(transaction.remote)
