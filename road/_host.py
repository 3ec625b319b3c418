"""What a transaction may ask of its stack: the host, as a Protocol.

Transactions (road/_transaction.py and the join, allow, alive and message
kinds) hold their stack as a :class:`Host`, so ``mypy --strict`` refuses any
use of the stack beyond this list; :class:`road.stack.RoadStack` satisfies it
(checked where a transaction is made).  Grouped by what the transaction
wants: facts it reads, its own bookkeeping, what goes out, what a handshake
finished means to the stack, and the fate of messages.  Nothing here is
imported at run time: it is a contract for the type checker and the reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from raetlike.crypto import PublicKey, VerifyKey
    from raetlike.wire.kinds import Acceptance
    from raetlike.wire.packet import Packet
    from road import events
    from road._amplification import JoinRate
    from road._message import Messenger, Partials
    from road._register import Register, Strangers
    from road._transaction import Transaction
    from road.config import LocalEstate, RoadConfig
    from road.remote import Address, Outgoing, Remote
    from road.stats import RoadStats

__all__ = ["Host"]


class Host(Protocol):
    """The stack as its transactions see it."""

    # -- facts (of the transactions, only joins change the register) -------------------
    now: float
    config: RoadConfig
    local: LocalEstate
    stats: RoadStats
    register: Register
    strangers: Strangers
    _partials: Partials
    _join_rate: JoinRate

    @property
    def name(self) -> str: ...

    # -- the transaction's own bookkeeping -----------------------------------------------
    def _track(self, transaction: Transaction) -> None: ...

    def _untrack(self, transaction: Transaction) -> None: ...

    def _wake(self, transaction: Transaction, at: float) -> None: ...

    # -- the door: a packet's signature and coat, checked once ---------------------------
    def _verify(self, remote: Remote, packet: Packet, *, signed: bool) -> bool: ...

    def _open(self, remote: Remote, packet: Packet, *, signed: bool) -> Any: ...

    # -- what goes out ---------------------------------------------------------------
    def _queue(self, data: bytes, address: Address) -> None: ...

    def _emit(self, event: events.Event) -> None: ...

    # -- what a handshake's steps mean to the stack ------------------------------------
    def _acceptance(self, role: str, verify_key: VerifyKey,
                    public_key: PublicKey) -> Acceptance | None: ...

    def _join_extras(self) -> dict[str, Any]: ...

    def _add_remote(self, remote: Remote) -> None: ...

    def _stranger(self, remote: Remote) -> None: ...

    def _save_remote(self, remote: Remote) -> None: ...

    def _remove_remote(self, remote: Remote, reason: str) -> None: ...

    def _start_join(self, remote: Remote, *, renewal: bool = False,
                    afresh: bool = False) -> None: ...

    def _start_allow(self, remote: Remote) -> None: ...

    def _joined(self, remote: Remote, *, initiator: bool) -> None: ...

    def _join_ended(self, remote: Remote, *, joined: bool) -> None: ...

    def _session_started(self, remote: Remote) -> None: ...

    def _allowed(self, remote: Remote) -> None: ...

    def _replace_stale_initiators(self, remote: Remote) -> None: ...

    def _presence(self, remote: Remote, *, alive: bool, reason: str = "") -> None: ...

    # -- the fate of messages ----------------------------------------------------------
    def _pump(self, remote: Remote) -> None: ...

    def _stall(self, messenger: Messenger) -> None: ...

    def _sent(self, remote: Remote, outgoing: Outgoing) -> None: ...

    def _requeue(self, remote: Remote, outgoing: Outgoing) -> None: ...

    def _expire(self, remote: Remote, outgoing: Outgoing, reason: str) -> None: ...

    def _delivered(self, remote: Remote, session_id: int, transaction_id: int, body: Any,
                   segments: int) -> None: ...
