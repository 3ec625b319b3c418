"""Allow (tk 3): the CurveCP-style handshake that sets up a session.

hello → cookie → initiate → ack → final ack.  It proves both sides hold the
long-term keys exchanged at join, and sets up fresh short-term keys whose
precomputed box coats every alive and message packet of the session.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import secrets
import struct
from typing import TYPE_CHECKING, Any, ClassVar

from raetlike import crypto
from raetlike.errors import CryptoError
from raetlike.wire.kinds import BodyKind, FootKind, PacketKind, TransactionKind
from raetlike.wire.packet import Packet
from road import events
from road._rejoin import rejoin_when_unjoined
from road._transaction import Rule, Transaction
from road.stats import Drop

if TYPE_CHECKING:
    from road._host import AllowHost
    from road.remote import Address, Remote

__all__ = ["Allower", "Allowent"]

log = logging.getLogger(__name__)

HELLO = struct.Struct("!64s32s80s24s")  # plain, I short pub, box(plain), nonce
COOKIE = struct.Struct("!80s24s")  # box(cookie stuff), nonce
OREO_SIZE = 24
"""Bytes of a cookie's oreo (RAET's: a nonce's length)."""
COOKIE_STUFF = struct.Struct("!32sLL24s")  # C short pub, C's id for I, I's id, oreo
INITIATE = struct.Struct("!32s24s248s24s")  # I short pub, oreo, box(initiate stuff), nonce
INITIATE_STUFF = struct.Struct("!32s48s24s128s")  # I long pub, vouch, vouch nonce, fqdn
HELLO_PLAIN = b"0" * 64  # hexlify of 32 zero bytes, as RAET writes it
FQDN_SIZE = 128


class _Allow(Transaction):
    stack: AllowHost  # what this kind may ask of its stack (road/_host.py)
    kind: ClassVar[TransactionKind] = TransactionKind.ALLOW
    timeout: ClassVar[float] = 4.0
    redo_min: ClassVar[float] = 0.25
    redo_max: ClassVar[float] = 1.0

    def head(self, packet_kind: PacketKind, **fields: Any) -> Any:
        fields.setdefault("body_kind", BodyKind.RAW)
        fields.setdefault("foot_kind", FootKind.NACL)
        return super().head(packet_kind, **fields)

    def nack(self, kind: PacketKind) -> None:
        self.send(kind, b"", secure=False, remember=False)
        self.stack.stats.nacks_sent += 1
        self.fail(f"sent {kind.name}")

    def raw(self, body: Any) -> bytes | None:
        """An allow's body as the raw bytes it must be; None (counted) for anything else."""
        if not isinstance(body, bytes):
            self.stack.stats.drop(Drop.INVALID_BODY)
            return None
        return body

    def on_refuse(self, _packet: Packet, _body: Any) -> None:
        self.fail("refused")
        self.stack._emit(events.AllowFailed(self.remote.name, "refused by the far side"))

    def on_reject(self, _packet: Packet, _body: Any) -> None:
        self.remote.allowed = False
        self.fail("rejected")
        self.stack._emit(events.AllowFailed(self.remote.name, "rejected by the far side"))

    def on_timeout(self) -> None:
        self.fail("timed out")
        self.stack._emit(events.AllowFailed(self.remote.name, "timed out"))


class Allower(_Allow):
    """We start the handshake (the initiator)."""

    round_trips_to_finish: ClassVar[float] = 4.0
    """After the cookie, the initiate and its ack (one round trip) get this many times as long
    as the hello took to be answered, if that is past ``timeout`` (at most ``wait_cap``): a
    main so busy that its cookie came 3 s late finished the allow on its side while ours
    gave up at 4 s, and the two sides held different session keys (docs/relay.md)."""
    wait_cap: ClassVar[float] = 30.0

    class States(enum.Enum):
        HELLO = "hello"
        INITIATE = "initiate"

    def __init__(self, stack: AllowHost, remote: Remote) -> None:
        super().__init__(
            stack, remote, correspondent=False, session_id=remote.session_id,
            transaction_id=remote.next_transaction_id(),
        )
        self.oreo = b""
        self.started_at = stack.now

    def initial_state(self) -> enum.Enum:
        return self.States.HELLO

    def start(self) -> None:
        """Fresh short-term keys, then hello."""
        remote = self.remote
        assert remote.public_key is not None  # noqa: S101 - joined remotes have keys
        remote.rekey()
        nonce = crypto.new_nonce()
        sealed = crypto.box(HELLO_PLAIN, nonce, remote.short_private, remote.public_key)
        body = HELLO.pack(HELLO_PLAIN, remote.short_private.public_key.raw, sealed, nonce)
        self.register((False, remote.uid, remote.far_uid, self.session_id,
                       self.transaction_id, False))
        self.started_at = self.stack.now
        self.send(PacketKind.HELLO, body, secure=False)

    def on_cookie(self, _packet: Packet, opened: Any) -> bool:
        body = self.raw(opened)
        if body is None:
            return False  # dropped (counted): the allow stays where it was
        remote, local = self.remote, self.stack.local
        assert remote.public_key is not None  # noqa: S101
        if len(body) != COOKIE.size:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        sealed, nonce = COOKIE.unpack(body)
        try:
            stuff = crypto.box_open(sealed, nonce, remote.short_private, remote.public_key)
        except CryptoError:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        if len(stuff) != COOKIE_STUFF.size:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        short_raw, their_uid_for_us, our_uid_for_them, oreo = COOKIE_STUFF.unpack(stuff)
        if their_uid_for_us != remote.far_uid or our_uid_for_them != remote.uid:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        self.oreo = oreo
        remote.set_short_peer(crypto.PublicKey(short_raw))
        vouch_nonce = crypto.new_nonce()
        vouch = crypto.box(remote.short_private.public_key.raw, vouch_nonce,
                           local.private_key, remote.public_key)
        fqdn = remote.fqdn.encode("ascii", "ignore").ljust(FQDN_SIZE, b" ")[:FQDN_SIZE]
        stuff = INITIATE_STUFF.pack(local.private_key.public_key.raw, vouch, vouch_nonce, fqdn)
        assert remote.session_box is not None  # noqa: S101
        nonce = crypto.new_nonce()
        sealed = remote.session_box.seal(stuff, nonce)
        initiate = INITIATE.pack(remote.short_private.public_key.raw, oreo, sealed, nonce)
        self.send(PacketKind.INITIATE, initiate, secure=False)
        now = self.stack.now
        took = now - self.started_at
        wait = min(self.round_trips_to_finish * took, self.wait_cap)
        if self.timeout_at is not None and now + wait > self.timeout_at:
            self.arm_timeout(now + wait)
        return True

    def on_duplicate(self, _packet: Packet, _body: Any) -> None:
        self.stack.stats.drop(Drop.DUPLICATE)

    def on_ack(self, _packet: Packet, _body: Any) -> None:
        self.send(PacketKind.ACK, b"", secure=False, remember=False)
        self.end()
        self.stack._session_started(self.remote)
        self.stack._allowed(self.remote)

    on_unjoined = rejoin_when_unjoined

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (States.HELLO, PacketKind.COOKIE): Rule(on_cookie, then=States.INITIATE),
        (States.INITIATE, PacketKind.COOKIE): Rule(on_duplicate),
        (States.INITIATE, PacketKind.ACK): Rule(on_ack),
        (States.HELLO, PacketKind.NACK): Rule(_Allow.on_refuse),
        (States.HELLO, PacketKind.REFUSE): Rule(_Allow.on_refuse),
        (States.HELLO, PacketKind.REJECT): Rule(_Allow.on_reject),
        (States.HELLO, PacketKind.UNJOINED): Rule(on_unjoined),
        (States.INITIATE, PacketKind.NACK): Rule(_Allow.on_refuse),
        (States.INITIATE, PacketKind.REFUSE): Rule(_Allow.on_refuse),
        (States.INITIATE, PacketKind.REJECT): Rule(_Allow.on_reject),
        (States.INITIATE, PacketKind.UNJOINED): Rule(on_unjoined),
    }


class Allowent(_Allow):
    """The remote started the handshake; we correspond.

    We answer where the hello came from (``source``): a remote that moved allows
    from its new address.  A copy of the hello from yet another address (an observer
    that raced it there) gets its own cookie: each cookie's oreo is bound to the
    address it went to (:meth:`_oreo`), so the verified initiate (it holds the keys)
    shows which address its cookie reached, and the remote moves only when the
    initiate comes from that same address: it answered where it speaks from.  A racer
    thus neither keeps the cookie from the remote nor moves it, not even by forwarding
    its own cookie to the remote (the initiate echoing it comes from the remote's
    address: the session starts, unmoved); an initiate echoing no cookie we sent is
    dropped, not refused.  The ack goes where the initiate came from (a duplicate's
    too).  A main we joined
    keeps the address we were given: its hellos are answered there, as RAET does.
    """

    class States(enum.Enum):
        COOKIE = "cookie"
        ACKED = "acked"

    def __init__(self, stack: AllowHost, remote: Remote, packet: Packet,
                 source: Address | None = None) -> None:
        super().__init__(
            stack, remote, correspondent=True, session_id=packet.head.session_id,
            transaction_id=packet.head.transaction_id,
            address=None if remote.main else source,
        )
        self.hello = packet
        self.hello_source = self.address  # where the first cookie went
        self.source = self.address  # where the packet being handled came from
        self._oreo_key = secrets.token_bytes(32)
        # this allow's short-term keys: the remote's session keeps its own until the
        # initiate has verified (a hello proves nothing fresh: one of an allow that
        # failed, replayed, must not end the session; CurveCP keeps them apart too)
        self.short_private = crypto.PrivateKey.generate()
        self.short_peer: crypto.PublicKey | None = None
        self.box: crypto.SessionBox | None = None

    def initial_state(self) -> enum.Enum:
        return self.States.COOKIE

    def start(self, index: Any) -> None:
        """Check the hello that created us, answer with a cookie."""
        stack, remote = self.stack, self.remote
        body = self.raw(self.open(self.hello, signed=True))
        if body is None:
            return
        if len(body) == HELLO.size and HELLO.unpack(body)[1] in remote.allowed_hellos:
            # signed by the remote, but with the short-term key of an allow that completed
            # already: a replay (a fresh hello always brings a fresh key); it changes nothing
            stack.stats.drop(Drop.REPLAYED)
            return
        if remote.in_process(TransactionKind.JOIN):
            self.nack(PacketKind.REFUSE)
            return
        for other in remote.in_process(TransactionKind.ALLOW):
            if other.correspondent:
                if not other.proven:
                    # an allow of the remote that no initiate has proven: perhaps a hello
                    # of a failed allow, replayed.  Each holds its own keys, so both go
                    # on; the first initiate that verifies ends the other (on_initiate)
                    continue
                self.nack(PacketKind.REFUSE)
                return
            if stack.local.name < remote.name:
                self.nack(PacketKind.REFUSE)
                return
            assert isinstance(other, _Allow)  # noqa: S101
            other.nack(PacketKind.REFUSE)
        if not remote.joined:
            self.nack(PacketKind.UNJOINED)
            return
        self.register(index)
        if len(body) != HELLO.size:
            self.nack(PacketKind.REJECT)
            return
        plain, short_raw, sealed, nonce = HELLO.unpack(body)
        short_peer = crypto.PublicKey(short_raw)
        try:
            opened = crypto.box_open(sealed, nonce, stack.local.private_key, short_peer)
        except CryptoError:
            opened = b""
        if not hmac.compare_digest(opened, plain):
            self.nack(PacketKind.REJECT)
            return
        self.short_peer = short_peer
        self.box = crypto.SessionBox(self.short_private, short_peer)
        self._cookie()

    def _oreo(self, address: Address) -> bytes:
        """The oreo of the cookie sent to ``address``: unpredictable (a keyed hash, the
        key ours alone) and different for every address, so the initiate that echoes it
        tells where its cookie was received.  As long as RAET's random oreo."""
        return hashlib.blake2b(f"{address[0]}|{address[1]}".encode(), key=self._oreo_key,
                               digest_size=OREO_SIZE).digest()

    def _cookie(self) -> None:
        """Our cookie, to where the hello being handled came from (``self.address``)."""
        remote, stack = self.remote, self.stack
        assert self.short_peer is not None  # noqa: S101 - set by start()
        stuff = COOKIE_STUFF.pack(self.short_private.public_key.raw, remote.uid,
                                  remote.far_uid, self._oreo(self.address))
        nonce = crypto.new_nonce()
        sealed = crypto.box(stuff, nonce, stack.local.private_key, self.short_peer)
        self.send(PacketKind.COOKIE, COOKIE.pack(sealed, nonce), secure=False)

    def receive(self, packet: Packet, source: Address) -> None:
        """Note where ``packet`` came from (a hello's copy gets a cookie there; an
        initiate's oreo is checked against it), then the usual door."""
        self.source = source
        super().receive(packet, source)

    def on_initiate(self, _packet: Packet, opened: Any) -> bool:
        body = self.raw(opened)
        if body is None:
            return False  # dropped (counted): the allow stays where it was
        remote, local = self.remote, self.stack.local
        if len(body) != INITIATE.size:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        short_raw, oreo, sealed, nonce = INITIATE.unpack(body)
        short_peer, box = self.short_peer, self.box
        assert short_peer is not None  # noqa: S101 - set by start()
        assert box is not None  # noqa: S101
        assert remote.public_key is not None  # noqa: S101
        if not hmac.compare_digest(short_raw, short_peer.raw):
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        proven = next((address for address in dict.fromkeys((self.source, self.hello_source))
                       if hmac.compare_digest(oreo, self._oreo(address))), None)
        if proven is None:
            # signed by the remote, but its cookie went elsewhere: a copy raced from an
            # address we sent no cookie (or another one); the allow goes on
            self.stack.stats.drop(Drop.STALE_PACKET)
            return False
        try:
            stuff = box.open(sealed, nonce)
        except CryptoError:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        if len(stuff) != INITIATE_STUFF.size:
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        long_raw, vouch, vouch_nonce, fqdn = INITIATE_STUFF.unpack(stuff)
        if not hmac.compare_digest(long_raw, remote.public_key.raw):
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        try:
            vouched = crypto.box_open(vouch, vouch_nonce, local.private_key, remote.public_key)
        except CryptoError:
            vouched = b""
        if not hmac.compare_digest(vouched, short_raw):
            self.nack(PacketKind.REJECT)
            return True  # (a nack ended it)
        log.debug("%s: initiate from %s (fqdn %r)", self.stack.name, remote.name,
                  fqdn.rstrip(b" "))
        self._take_keys(short_peer)
        if not remote.main:
            # the ack goes where the initiate came from (a main we joined keeps its
            # address: hello_source)
            self.address = self.source
            if self.source == proven and self.source != remote.host_address:
                # keys and address both proven: its cookie went where it speaks from.
                # Not so an initiate echoing the cookie sent elsewhere: an observer that
                # raced the hello there and forwarded that cookie to the remote would be
                # proven in its stead.  The session starts all the same, unmoved
                self.stack._moved(remote, self.source)
        self.send(PacketKind.ACK, b"", secure=False)
        self.stack._session_started(remote)
        return True

    def _take_keys(self, short_peer: crypto.PublicKey) -> None:
        """The initiate proved the hello fresh: this allow's keys replace the session's
        now, and any other allow of the remote still waiting for its initiate is over."""
        remote = self.remote
        for other in remote.in_process(TransactionKind.ALLOW):
            if other is not self and other.correspondent:
                other.fail("another allow of the remote completed")
        remote.rekey()
        remote.short_private = self.short_private
        remote.set_short_peer(short_peer)

    def on_duplicate_hello(self, packet: Packet, _body: Any) -> None:
        """The hello again.  From where the first came, or of a main we joined: dropped,
        as RAET does.  A copy from another address may be where the remote really is
        (the first was an observer's copy raced ahead of it): a cookie goes there too,
        with that address's oreo, held to 3x what came from there (road._amplification)."""
        hello = self.hello
        source = self.source
        if (source == self.hello_source or self.remote.main
                or (packet.raw_head, packet.coat, packet.foot)
                != (hello.raw_head, hello.coat, hello.foot)):
            self.stack.stats.drop(Drop.DUPLICATE)
            return
        self.address = source
        self._cookie()

    def on_duplicate_initiate(self, _packet: Packet, _body: Any) -> None:
        """Our ack was lost: say it again, where the initiate came from this time (a copy
        raced ahead from elsewhere got the first), without allowing twice."""
        if not self.remote.main:
            self.address = self.source
        self.resend_last()

    def on_final(self, _packet: Packet, _body: Any) -> None:
        self.end()
        self.stack._allowed(self.remote)

    def on_timeout(self) -> None:
        if self.state is self.States.ACKED:
            # The final ack was lost; the initiator is allowed all the same.
            self.end()
            self.stack._allowed(self.remote)
            return
        self.refuse()
        super().on_timeout()

    def refuse(self) -> None:
        """Tell the allower this allow is over (unproven, at its timeout or evicted): it
        starts another instead of resending an initiate nothing here waits for."""
        self.send(PacketKind.REFUSE, b"", secure=False, remember=False)

    def on_redo(self) -> None:
        if self.state is self.States.COOKIE:
            self.resend_last()

    @property
    def proven(self) -> bool:
        """The initiate echoed the oreo of a cookie we sent: its sender receives there."""
        return self.state is self.States.ACKED

    def evict(self) -> None:
        self.refuse()
        super().evict()
        self.stack._emit(events.AllowFailed(self.remote.name, "evicted unproven"))

    RULES: ClassVar[dict[tuple[enum.Enum, PacketKind], Rule]] = {
        (States.COOKIE, PacketKind.HELLO): Rule(on_duplicate_hello),
        (States.COOKIE, PacketKind.INITIATE): Rule(on_initiate, then=States.ACKED),
        (States.COOKIE, PacketKind.NACK): Rule(_Allow.on_refuse),
        (States.COOKIE, PacketKind.REFUSE): Rule(_Allow.on_refuse),
        (States.COOKIE, PacketKind.REJECT): Rule(_Allow.on_reject),
        (States.ACKED, PacketKind.HELLO): Rule(on_duplicate_hello),
        (States.ACKED, PacketKind.INITIATE): Rule(on_duplicate_initiate),
        (States.ACKED, PacketKind.ACK): Rule(on_final),
        # once we acked, a nack means the initiator finished and no longer knows the
        # transaction (it nacks a duplicate of our ack): the session stands, as when the
        # final ack is lost
        (States.ACKED, PacketKind.NACK): Rule(on_final),
        (States.ACKED, PacketKind.REFUSE): Rule(_Allow.on_refuse),
        (States.ACKED, PacketKind.REJECT): Rule(_Allow.on_reject),
    }
