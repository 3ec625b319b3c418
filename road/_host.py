"""What a transaction may ask of its stack: a Protocol per kind of transaction.

Transactions (road/_transaction.py and the join, allow, alive and message
kinds) hold their stack as one of these, so ``mypy --strict`` refuses any use
of the stack beyond its list; :class:`road.stack.RoadStack` satisfies them all
(checked where a transaction is made).  :class:`Host` is what every
transaction needs (facts, its own timers and tracking, the door's checks,
what goes out, joining again); each kind adds only what its steps mean to
the stack.  Nothing here is imported at run time: it is a contract for the
type checker and the reader.
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

__all__ = ["AliveHost", "AllowHost", "Host", "JoinHost", "MessageHost"]


class Host(Protocol):
    """What every transaction may ask of the stack."""

    now: float
    config: RoadConfig
    local: LocalEstate
    stats: RoadStats

    @property
    def name(self) -> str: ...

    # -- the transaction's own bookkeeping -----------------------------------------------
    def _track(self, transaction: Transaction) -> None: ...

    def _untrack(self, transaction: Transaction) -> None: ...

    def _wake(self, transaction: Transaction, at: float) -> None: ...

    # -- the door: a packet's signature and coat, checked once ---------------------------
    def _verify(self, remote: Remote, packet: Packet, *, signed: bool) -> bool: ...

    def _open(self, remote: Remote, packet: Packet, *, signed: bool) -> Any: ...

    # -- what goes out -------------------------------------------------------------------
    def _queue(self, data: bytes, address: Address) -> None: ...

    def _emit(self, event: events.Event) -> None: ...

    # -- the far side says we are not joined -------------------------------------------
    def _start_join(self, remote: Remote, *, renewal: bool = False,
                    afresh: bool = False) -> None: ...


class JoinHost(Host, Protocol):
    """A join's steps: the register, the admission of keys, a remote added or removed."""

    register: Register
    strangers: Strangers
    _join_rate: JoinRate

    def _acceptance(self, role: str, verify_key: VerifyKey,
                    public_key: PublicKey) -> Acceptance | None: ...

    def _join_extras(self) -> dict[str, Any]: ...

    def _add_remote(self, remote: Remote) -> None: ...

    def _stranger(self, remote: Remote) -> None: ...

    def _save_remote(self, remote: Remote) -> None: ...

    def _handshake_waits(self, transaction: Any) -> None: ...

    def _remove_remote(self, remote: Remote, reason: str) -> None: ...

    def _joined(self, remote: Remote, *, initiator: bool) -> None: ...

    def _join_ended(self, remote: Remote, *, joined: bool) -> None: ...

    def _replace_stale_initiators(self, remote: Remote) -> None: ...


class AllowHost(Host, Protocol):
    """An allow's steps: the session keys set up, the allow finished, the remote moved."""

    def _session_started(self, remote: Remote) -> None: ...

    def _moved(self, remote: Remote, address: Address) -> None: ...

    def _allowed(self, remote: Remote) -> None: ...


class AliveHost(Host, Protocol):
    """A presence check's steps: answered or not, or an allow needed first; a path probe's
    answer moves the remote."""

    def _presence(self, remote: Remote, *, alive: bool, reason: str = "") -> None: ...

    def _alive_answered(self, remote: Remote, asked_at: float) -> None: ...

    def _start_allow(self, remote: Remote) -> None: ...

    def _moved(self, remote: Remote, address: Address) -> None: ...


class MessageHost(Host, Protocol):
    """A message's steps: the pump, its fate on our side, delivery on the other."""

    _partials: Partials

    def _presence(self, remote: Remote, *, alive: bool, reason: str = "") -> None: ...

    def _pump(self, remote: Remote) -> None: ...

    def _stall(self, messenger: Messenger) -> None: ...

    def _sent(self, remote: Remote, outgoing: Outgoing) -> None: ...

    def _requeue(self, remote: Remote, outgoing: Outgoing) -> None: ...

    def _expire(self, remote: Remote, outgoing: Outgoing, reason: str) -> None: ...

    def _delivered(self, remote: Remote, session_id: int, transaction_id: int, body: Any,
                   segments: int) -> None: ...
