"""Join (tk 1): key exchange and acceptance, joiner and joinent sides.

RAET 0.6.8's rules (see docs/road.md): join packets are cleartext and
unsigned, session id 0; only a main estate accepts vacuous joins; an
immutable road rejects changed credentials; acceptance comes from the keep
by role; simultaneous joins are resolved (non-vacuous beats vacuous, else the
lesser local name refuses).

Because nothing in a join is signed, what it says is a claim: for an
*established* remote (joined, and not a stranger still on probation, see
``unallowed_reap_after``) a join changes nothing of its state, neither its
joined flag, session ids, capabilities nor (on an immutable road) its address,
far uid or keys.  Only an allow, which is signed and proves the keys, moves an
established remote on.  An unsigned reject removes no remote at all, established
or not (it ends the join and is reported; the join is tried again): only our own
keep's verdict removes one.
"""

from __future__ import annotations

import enum
import itertools
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from raetlike.crypto import PublicKey, VerifyKey
from raetlike.errors import CryptoError
from raetlike.names import is_valid_name, safe_name
from raetlike.wire.kinds import Acceptance, BodyKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet, parse_packet
from road import events
from road._transaction import Rule, Transaction, tx_index
from road.remote import bounded_capabilities
from road.stats import Drop

if TYPE_CHECKING:
    from road._host import JoinHost
    from road.remote import Remote

__all__ = ["Joiner", "Joinent", "JoinCredentials", "parse_credentials"]

log = logging.getLogger(__name__)

MAIN_MODE_BIT = 0x01  # bit 0 of the join body's "mode" byte marks a main estate


class JoinCredentials:
    """The fields a join request or response carries, checked."""

    __slots__ = ("extra", "kind", "main", "name", "public_key", "role", "uid", "verify_key")

    def __init__(
        self,
        *,
        name: str,
        main: bool,
        kind: int,
        verify_key: VerifyKey,
        public_key: PublicKey,
        role: str,
        uid: int | None,
        extra: dict[str, Any],
    ) -> None:
        self.name = name
        self.main = main
        self.kind = kind
        self.verify_key = verify_key
        self.public_key = public_key
        self.role = role
        self.uid = uid
        self.extra = extra


def parse_credentials(body: Any, *, need_uid: bool) -> JoinCredentials | None:
    """Credentials from a join body, or None when anything required is missing or bad."""
    if not isinstance(body, dict):
        return None
    name, mode, kind = body.get("name"), body.get("mode"), body.get("kind")
    role, verhex, pubhex = body.get("role"), body.get("verhex"), body.get("pubhex")
    if not is_valid_name(name) or not is_valid_name(role):
        return None  # control characters, separators or a leading dot (raetlike.names)
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 255:
        return None
    if not isinstance(kind, int) or isinstance(kind, bool):
        return None
    if not isinstance(verhex, str) or not isinstance(pubhex, str):
        return None
    uid = body.get("uid")
    if need_uid and (not isinstance(uid, int) or isinstance(uid, bool) or uid <= 0):
        return None
    try:
        verify_key, public_key = VerifyKey.from_hex(verhex), PublicKey.from_hex(pubhex)
    except CryptoError:
        return None
    known = {"name", "mode", "kind", "uid", "verhex", "pubhex", "role"}
    extra = {k: v for k, v in body.items() if k not in known}
    return JoinCredentials(
        name=name, main=bool(mode & MAIN_MODE_BIT), kind=kind, verify_key=verify_key,
        public_key=public_key, role=role, uid=uid if need_uid else None, extra=extra,
    )


def same_role_keys(remote: Remote, cred: JoinCredentials) -> bool:
    """The remote already holds exactly these role and keys."""
    return (
        cred.role == remote.role
        and remote.verify_key == cred.verify_key
        and remote.public_key == cred.public_key
    )


def adopt(remote: Remote, cred: JoinCredentials) -> None:
    """Take over the credentials into the remote record (name changes go through the stack)."""
    remote.main = cred.main
    remote.kind = cred.kind
    remote.role = cred.role
    remote.verify_key = cred.verify_key
    remote.public_key = cred.public_key


def credentials_body(stack: JoinHost, *, uid: int | None = None) -> dict[str, Any]:
    """Our credentials as a join body; a response also carries the ``uid`` we gave the joiner."""
    local = stack.local
    body: dict[str, Any] = {
        "name": local.name,
        "mode": MAIN_MODE_BIT if local.main else 0,
        "kind": local.kind,
    }
    if uid is not None:
        body["uid"] = uid
    body["verhex"] = local.signing_key.verify_key.hex()
    body["pubhex"] = local.private_key.public_key.hex()
    body["role"] = local.role
    body.update(stack._join_extras())
    return body


class _Join(Transaction):
    """What the joiner and joinent sides share: bookkeeping, nacks, pending and the verdict."""

    stack: JoinHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.JOIN
    signed: ClassVar[bool] = False  # RAET's join packets carry no signature
    timeout: ClassVar[float] = 5.0
    pend_redo: ClassVar[float] = 1.0
    vacuous: bool
    established: bool = False
    """The remote was joined (and past its probation) before this join: nothing unsigned
    in this join may change it."""

    def is_established(self) -> bool:
        """Whether the remote counts as established (see the module's docstring)."""
        stack, remote = self.stack, self.remote
        return (remote.joined is True and remote.uid in stack.register.by_uid
                and stack.strangers.reap_time(remote.uid) is None and remote.verify_key is not None)

    def head(self, packet_kind: PacketKind, **fields: Any) -> Any:
        fields.setdefault("body_kind", BodyKind.JSON)
        return super().head(packet_kind, **fields)

    def end(self) -> None:
        super().end()
        if (self.vacuous and self.stack.register.joinees.get(self.address) is self.remote
                and not self.remote.in_process(TransactionKind.JOIN)):
            del self.stack.register.joinees[self.address]

    def nack(self, kind: PacketKind = PacketKind.NACK) -> None:
        """Tell the far side we give up (nack, refuse or reject) and end."""
        self.send(kind, None, secure=False, remember=False)
        self.stack.stats.nacks_sent += 1
        self.fail(f"sent {kind.name}")

    def unchanged(self, cred: JoinCredentials, far_uid: int, *, same_keys: bool) -> bool:
        """The remote record already says all that ``cred`` and this join say."""
        remote = self.remote
        return (
            same_keys and cred.name == remote.name and self.address == remote.host_address
            and far_uid == remote.far_uid and cred.main == remote.main
            and cred.kind == remote.kind
        )

    def take_changes(self, cred: JoinCredentials, far_uid: int) -> bool:
        """Rebind the remote record to ``cred`` (a mutable road); False (after a reject) if
        its name is taken.  New keys end the session: it is not allowed until an allow with
        them completes (the old session's keys belong to whoever held the old ones)."""
        stack, remote = self.stack, self.remote
        other = stack.register.by_name.get(cred.name)
        if other is not None and other is not remote:
            self.nack(PacketKind.REJECT)
            return False
        if cred.name != remote.name:
            stack.register.rename(remote, cred.name)
        stack.register.readdress(remote, self.address)
        remote.far_uid = far_uid
        if remote.verify_key is not None and (remote.verify_key != cred.verify_key
                                              or remote.public_key != cred.public_key):
            remote.rekey()
        adopt(remote, cred)
        return True

    def wait_for_operator(self, pending: enum.Enum) -> None:
        """Our keep holds the decision: save the remote, enter ``pending`` and say so."""
        stack, remote = self.stack, self.remote
        stack._save_remote(remote)
        stack._handshake_waits(self)
        self.state = pending
        self.send(PacketKind.PEND, None, secure=False, remember=False)
        self.arm_redo(stack.now + self.pend_redo)
        self.arm_timeout(stack.now + stack.config.join_pending_timeout)
        stack._emit(events.JoinPending(remote.name, remote.role, local=True))

    def keep_verdict(self) -> Acceptance:
        """What our keep says now about the remote's role and keys (pending while full)."""
        remote = self.remote
        assert remote.verify_key is not None  # noqa: S101
        assert remote.public_key is not None  # noqa: S101
        verdict = self.stack._acceptance(remote.role, remote.verify_key, remote.public_key)
        return Acceptance.PENDING if verdict is None else verdict

    def mark_joined(self) -> None:
        """The join succeeded: start a session if there is none, and mark the remote joined.

        An established remote keeps its session ids: the join was only a claim."""
        remote = self.remote
        if not self.established:
            if remote.session_id == 0:
                remote.next_session_id()
                self.stack._replace_stale_initiators(remote)
            if self.vacuous:
                remote.remote_session_id = 0
        remote.joined = True


class Joiner(_Join):
    """We ask the remote (usually main) to join."""

    redo_min: ClassVar[float] = 1.0
    redo_max: ClassVar[float] = 4.0
    pend_redo: ClassVar[float] = 1.0  # RAET re-checks after 60 s; we re-check the keep sooner
    pended_resend: ClassVar[float] = 10.0
    """Pended by the far side, the request still goes again this often (RAET: every 60 s):
    a PEND is unsigned, and a joinent that never saw the request (or forgot it) answers
    only a request; one that holds it drops the copy as a duplicate."""

    class States(enum.Enum):
        REQUESTED = "requested"
        PENDED = "pended"  # the far side's keep holds the decision
        PENDING = "pending"  # our keep holds the decision

    def __init__(self, stack: JoinHost, remote: Remote, *, renewal: bool = False,
                 afresh: bool = False) -> None:
        """``renewal``: the far side asked for it (renew) or we chose it (``afresh``): a
        vacuous join that keeps what we hold of the remote; only its far uid may change.
        ``afresh``: vacuous although we know the far uid (see
        :meth:`road.stack.RoadStack._start_alive`)."""
        super().__init__(
            stack, remote, correspondent=False, session_id=0,
            transaction_id=remote.next_transaction_id(),
        )
        self.far_uid_at_start = 0 if afresh else remote.far_uid
        self.vacuous = self.far_uid_at_start == 0
        self.renewal = renewal or afresh
        self.established = self.is_established()

    def initial_state(self) -> enum.Enum:
        return self.States.REQUESTED

    def head(self, packet_kind: PacketKind, **fields: Any) -> Any:
        fields.setdefault("destination_uid", self.far_uid_at_start)
        return super().head(packet_kind, **fields)

    def start(self) -> None:
        """Send the join request."""
        self.remote.joined = None
        data = self.send(PacketKind.REQUEST, credentials_body(self.stack), secure=False)
        self.register(tx_index(parse_packet(data).head, self.address))
        if self.vacuous:
            self.stack.register.joinees[self.address] = self.remote

    def on_redo(self) -> None:
        if self.state is self.States.REQUESTED:
            self.resend_last()
            return
        if self.state is self.States.PENDED:
            self.arm_redo(self.stack.now + self.pended_resend)
            self.resend_last()
            return
        self.redo_interval = self.pend_redo
        if self.state is self.States.PENDING:
            self.recheck()

    def on_timeout(self) -> None:
        self.fail("timed out")
        self.stack._emit(events.JoinFailed(self.remote.name, "timed out"))
        self.stack._join_ended(self.remote, joined=False)

    # -- rules ------------------------------------------------------------

    def on_pend(self, _packet: Packet, _body: Any) -> None:
        """The far side's operator decides on our keys.  Its PEND is unsigned (a blind
        spoofer may guess the ids), so it extends nothing: the first one gives the join
        ``join_pending_timeout`` from then at most, and the request goes on being resent
        (slowly, ``pended_resend``) in case its joinent never saw it; later ones change
        nothing (they may not make us send either)."""
        if self.state is self.States.PENDED:
            return
        stack = self.stack
        stack._emit(events.JoinPending(self.remote.name, self.remote.role, local=False))
        self.arm_redo(stack.now + self.pended_resend)
        self.arm_timeout(stack.now + stack.config.join_pending_timeout)

    def on_response(self, _packet: Packet, body: Any) -> None:
        cred = parse_credentials(body, need_uid=True)
        if cred is None or cred.uid is None:
            self.stack.stats.drop(Drop.INVALID_BODY)
            self.fail("invalid join response")
            return
        remote, stack = self.remote, self.stack
        if self.vacuous and not self._adopt_vacuous(cred):
            return
        same_keys = remote.verify_key is not None and same_role_keys(remote, cred)
        # a renewal may change the far uid (the far side lost us): only the rest must match
        same_all = self.unchanged(cred, remote.far_uid if self.renewal else cred.uid,
                                  same_keys=same_keys)
        if not same_all and not stack.config.mutable:
            _immutable_refused(stack, remote.name)
            self.nack(PacketKind.REJECT)
            stack._emit(events.JoinFailed(remote.name, "changed name, address or keys "
                                          "refused: road immutable"))
            return
        status = stack._acceptance(cred.role, cred.verify_key, cred.public_key)
        if status is None:  # our keep holds max_pending_keys already: try again later
            stack.stats.drop(Drop.PENDING_KEYS_FULL)
            self.fail("too many keys pending")
            stack._join_ended(remote, joined=False)
            return
        if status is Acceptance.REJECTED:
            if same_keys:
                self.end()
                stack._remove_remote(remote, "keys rejected")
            else:
                self.nack(PacketKind.REJECT)
            stack._emit(events.JoinRejected(remote.name, "our keep rejects its keys"))
            return
        remote.acceptance = status
        if not same_all and not self.take_changes(cred, cred.uid):
            return
        remote.far_uid = cred.uid
        if not self.established:
            remote.capabilities = bounded_capabilities(cred.extra, stack.config.max_join_extras)
        if status is Acceptance.ACCEPTED:
            self.complete()
            return
        self.wait_for_operator(self.States.PENDING)

    def _adopt_vacuous(self, cred: JoinCredentials) -> bool:
        """A vacuous join learns the far side's uid, name and keys; False after a reject."""
        remote = self.remote
        assert cred.uid is not None  # noqa: S101 - responses always carry the uid
        if self.renewal:  # all we hold stays; the far uid is taken once the rest is found so
            return True
        remote.far_uid = cred.uid
        if cred.name != remote.name:
            other = self.stack.register.by_name.get(cred.name)
            if other is not None and other is not remote:
                self.nack(PacketKind.REJECT)
                return False
            self.stack.register.rename(remote, cred.name)
        adopt(remote, cred)
        return True

    def recheck(self) -> None:
        """Our keep held the decision: see whether an operator made it."""
        remote = self.remote
        status = self.keep_verdict()
        if status is Acceptance.ACCEPTED:
            remote.acceptance = status
            self.complete()
        elif status is Acceptance.REJECTED:
            self.nack(PacketKind.REJECT)  # tell the joinent, so it drops us too
            self.stack._remove_remote(remote, "keys rejected by operator")
            self.stack._emit(events.JoinRejected(remote.name, "rejected by operator"))

    def complete(self) -> None:
        if self.renewal:  # the far side may have lost us: its session numbers start again
            self.remote.remote_session_id = 0
        self.mark_joined()
        self.send(PacketKind.ACK, None, secure=False, remember=False)
        self.end()
        self.stack._joined(self.remote, initiator=True)

    def on_refuse(self, _packet: Packet, _body: Any) -> None:
        self.fail("refused")
        self.stack._emit(events.JoinFailed(self.remote.name, "refused by the far side"))
        self.stack._join_ended(self.remote, joined=False)

    def on_reject(self, _packet: Packet, _body: Any) -> None:
        """The far side rejects us, or says it does: a reject is unsigned (a blind spoofer
        may guess the ids), so it ends this join and is reported, but what we hold of the
        remote stays and a join we were asked for is tried again ``rejoin_interval``
        later (RAET removes the remote); only our own keep's verdict removes it."""
        self.fail("rejected")
        self.stack._emit(events.JoinRejected(self.remote.name, "rejected by the far side"))
        self.stack._join_ended(self.remote, joined=False)

    def on_renew(self, _packet: Packet, _body: Any) -> None:
        if not self.stack.config.mutable:
            self.fail("renew on an immutable road")
            self.stack._emit(events.JoinFailed(self.remote.name, "renew refused: road immutable"))
            return
        self.end()
        self.remote.far_uid = 0
        self.stack._save_remote(self.remote)
        self.stack._start_join(self.remote, renewal=True)

    # Every answer is taken in every state: a joinent resends its answers, and an operator
    # on either side may decide at any time (a response after a pend, a reject while our
    # keep is pending), so the state does not narrow what may come.  Save a pend once our
    # keep holds the decision: the far side accepted us already (its response).
    _ANSWERS = ((PacketKind.RESPONSE, Rule(on_response)),
                (PacketKind.NACK, Rule(on_refuse)), (PacketKind.REFUSE, Rule(on_refuse)),
                (PacketKind.REJECT, Rule(on_reject)), (PacketKind.RENEW, Rule(on_renew)))
    _PEND = ((PacketKind.PEND, Rule(on_pend, then=States.PENDED)),)
    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        **{(state, kind): rule for state, (kind, rule) in itertools.product(States, _ANSWERS)},
        **{(state, kind): rule for state, (kind, rule) in itertools.product(
            (States.REQUESTED, States.PENDED), _PEND)},
    }


class Joinent(_Join):
    """The remote asked us to join."""

    redo_min: ClassVar[float] = 0.1
    redo_max: ClassVar[float] = 2.0

    class States(enum.Enum):
        RECEIVED = "received"
        RESPONDED = "responded"  # response sent, waiting for the joiner's ack
        PENDING = "pending"  # our keep holds the decision
        PENDED = "pended"  # the joiner's keep holds the decision

    def __init__(self, stack: JoinHost, remote: Remote, packet: Packet, source: Any) -> None:
        super().__init__(
            stack, remote, correspondent=True, session_id=packet.head.session_id,
            transaction_id=packet.head.transaction_id, address=source,
        )
        self.request = packet
        self.vacuous = packet.head.destination_uid == 0
        # RAET answers with se and de swapped from the request, so a vacuous
        # join is answered with se 0 (our uid travels in the body).
        self.reply_source = packet.head.destination_uid
        self.reply_destination = packet.head.source_uid

    def initial_state(self) -> enum.Enum:
        return self.States.RECEIVED

    def head(self, packet_kind: PacketKind, **fields: Any) -> Any:
        fields.setdefault("source_uid", self.reply_source)
        fields.setdefault("destination_uid", self.reply_destination)
        return super().head(packet_kind, **fields)

    def start(self, index: Any) -> None:
        """Handle the join request that created this transaction."""
        stack = self.stack
        if not stack._join_rate.take(self.address[0], stack.now):
            stack.stats.drop(Drop.JOIN_RATE_LIMITED)  # join_rate_per_source: no answer
            return
        body = self.open(self.request, signed=False)
        if body is None:
            return
        cred = parse_credentials(body, need_uid=False)
        if cred is None:
            stack.stats.drop(Drop.INVALID_BODY)
            return
        beaten = self._race(cred)
        if beaten is None:
            self.nack(PacketKind.REFUSE)
            return
        if not self._bind(cred):
            return
        self.established = self.is_established()
        created = self.vacuous and self.remote.uid not in stack.register.by_uid
        status = self._admit(cred)
        if status is None:
            return
        for other in beaten:  # only a join that passed every check ends ours (it is unsigned)
            if not other.ended:
                other.nack(PacketKind.REFUSE)
        remote = self.remote
        if created:
            stack._stranger(remote)
        self.register(index)
        if self.vacuous:
            stack.register.joinees[self.address] = remote
        if not self.established:  # an established remote stays as it is: this is a claim
            remote.capabilities = bounded_capabilities(cred.extra, stack.config.max_join_extras)
            remote.joined = None
        if status is Acceptance.ACCEPTED:
            self.respond()
            return
        self.wait_for_operator(self.States.PENDING)

    def _race(self, cred: JoinCredentials) -> list[Joiner] | None:
        """Resolve joins already open with this remote (RAET's rules): None when this one
        must yield, else our joins it beats.  Nothing is sent or ended here: a beaten join
        of ours is refused only once this one passed :meth:`_bind` and :meth:`_admit`, so
        an unsigned request that fails them cannot end a join we started."""
        beaten: list[Joiner] = []
        for other in self.remote.in_process(TransactionKind.JOIN):
            if other.correspondent:
                return None
            assert isinstance(other, Joiner)  # noqa: S101
            if self.vacuous and not other.vacuous:
                return None
            if self.vacuous == other.vacuous and self.stack.local.name < cred.name:
                return None
            beaten.append(other)
        return beaten

    def _bind(self, cred: JoinCredentials) -> bool:
        """Find the remote record this join is about; False (after a reject) when none fits."""
        stack, remote = self.stack, self.remote
        far_uid = self.request.head.source_uid
        if not self.vacuous:
            if stack.register.by_uid.get(self.request.head.destination_uid) is not remote:
                self.nack(PacketKind.REJECT)
                return False
            return True
        if not stack.local.main:
            log.info("%s: vacuous join from %s but we are not main; rejecting",
                     stack.name, safe_name(cred.name))
            self.nack(PacketKind.REJECT)
            return False
        known = stack.register.by_name.get(cred.name)
        if known is not None:
            self.remote = known
            return True
        stack.register.rename(remote, cred.name)  # keeps the index by name true (a known record)
        adopt(remote, cred)
        if remote.far_uid not in (far_uid, 0):
            self.nack(PacketKind.REJECT)
            return False
        remote.far_uid = far_uid
        return True

    def _admit(self, cred: JoinCredentials) -> Acceptance | None:
        """Apply road mutability and the keep's verdict; None when the join ends here."""
        stack, remote = self.stack, self.remote
        far_uid = self.request.head.source_uid
        same_keys = remote.verify_key is not None and same_role_keys(remote, cred)
        same_all = self.unchanged(cred, far_uid, same_keys=same_keys)
        if not same_all and not stack.config.mutable:
            _immutable_refused(stack, cred.name)
            self.nack(PacketKind.REJECT)
            return None
        status = stack._acceptance(cred.role, cred.verify_key, cred.public_key)
        if status is None:  # max_pending_keys wait already: no answer, the joiner retries
            stack.stats.drop(Drop.PENDING_KEYS_FULL)
            self.end()
            return None
        if status is Acceptance.REJECTED:
            log.warning("%s: keys of role %s rejected (estate %s)", stack.name,
                        safe_name(cred.role), safe_name(cred.name))
            if same_keys and remote.uid in stack.register.by_uid:
                stack._remove_remote(remote, "keys rejected")
            else:
                self.nack(PacketKind.REJECT)
            return None
        remote.acceptance = status
        if not same_all and not self.take_changes(cred, far_uid):
            return None
        if remote.uid not in stack.register.by_uid:
            stack._add_remote(remote)
        return status

    def respond(self) -> None:
        """Send the accepting response (our credentials and our uid for the joiner)."""
        body = credentials_body(self.stack, uid=self.remote.uid)
        self.state = self.States.RESPONDED
        self.send(PacketKind.RESPONSE, body, secure=False)

    def on_redo(self) -> None:
        if self.state is self.States.RESPONDED:
            self.resend_last()
            return
        self.redo_interval = self.pend_redo
        if self.state is self.States.PENDING:
            remote = self.remote
            status = self.keep_verdict()
            if status is Acceptance.ACCEPTED:
                remote.acceptance = status
                self.respond()
            elif status is Acceptance.REJECTED:
                self.nack(PacketKind.REJECT)  # tell the joiner, as RAET does
                if remote.uid in self.stack.register.by_uid:
                    self.stack._remove_remote(remote, "keys rejected by operator")

    def on_timeout(self) -> None:
        self.nack(PacketKind.NACK)

    # -- rules ------------------------------------------------------------

    def on_duplicate(self, _packet: Packet, _body: Any) -> None:
        self.stack.stats.drop(Drop.DUPLICATE)

    def on_ack(self, _packet: Packet, _body: Any) -> None:
        self.mark_joined()
        self.end()
        self.stack._joined(self.remote, initiator=False)

    def on_pend(self, _packet: Packet, _body: Any) -> None:
        """The joiner says its operator decides on our keys.  Its PEND is unsigned (anyone
        who saw or made the request can send it), so it extends nothing: the first one
        gives the join's place among ``max_open_handshakes`` back (as our own operator's
        wait does; the stranger bound, ``max_pending_joins``, holds the join itself) and
        ends the join ``join_pending_timeout`` later at most; later ones only wake the
        redo."""
        stack = self.stack
        if self.state is self.States.RESPONDED:
            stack._handshake_waits(self)
            self.arm_timeout(stack.now + stack.config.join_pending_timeout)
        self.arm_redo(stack.now + self.pend_redo)

    def on_refuse(self, _packet: Packet, _body: Any) -> None:
        self.fail("refused by joiner")

    def on_reject(self, _packet: Packet, _body: Any) -> None:
        self.fail("rejected by joiner")
        if self.remote.uid in self.stack.register.by_uid and not self.established:
            self.stack._remove_remote(self.remote, "joiner rejected us")

    # a repeated request, a nack, refuse or reject may come in any state; the joiner's ack
    # or pend only once we answered (responded, or it pended our response)
    _ANY_TIME = ((PacketKind.REQUEST, on_duplicate), (PacketKind.NACK, on_refuse),
                 (PacketKind.REFUSE, on_refuse), (PacketKind.REJECT, on_reject))
    _ANSWERED = ((PacketKind.ACK, Rule(on_ack)),
                 (PacketKind.PEND, Rule(on_pend, then=States.PENDED)))
    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        **{(state, kind): Rule(handler)
           for state, (kind, handler) in itertools.product(States, _ANY_TIME)},
        **{(state, kind): rule for state, (kind, rule) in itertools.product(
            (States.RESPONDED, States.PENDED), _ANSWERED)},
    }


def _immutable_refused(stack: JoinHost, name: str) -> None:
    """Count a join that would change a remote on an immutable road; a peer can send one at
    will, so the first and every 100th is a WARNING, the rest DEBUG."""
    stack.stats.immutable_refused += 1
    count = stack.stats.immutable_refused
    log.log(logging.WARNING if count % 100 == 1 else logging.DEBUG,
            "%s: %s tried to change an immutable road; rejecting (%d so far)", stack.name,
            safe_name(name), count)
