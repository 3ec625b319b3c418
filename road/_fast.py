"""Fast mode between two raetlike estates: AEAD datagrams, coalescing, acks and NewReno.

Both sides advertise ``rlk`` in their join bodies (RAET 0.6.8 ignores unknown
keys).  When both did, every allow derives two per-direction ChaCha20-Poly1305
keys from the allow's short-term session box, and messages to that remote go
through a :class:`FastLink` instead of RAET message transactions: several
messages (and acks) per datagram, packet numbers as nonces, a sliding replay
window, cumulative and selective acks, loss detection and a paced NewReno
window.  Join, allow and alive stay RAET transactions.  docs/road.md, "Fast
mode", has the whole story.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from raetlike.crypto import AeadKey, counter_nonce
from raetlike.errors import CryptoError, PacketError
from road import events
from road._fast_control import ReceivedRanges, ReplayWindow
from road._fast_receive import ReceivingSide
from road._fast_recovery import RecoverySide
from road._fast_send import SendingSide
from road._fast_timers import TimersSide
from road._fast_wire import FAST_HEADER_SIZE, read_header
from road.stats import Drop

if TYPE_CHECKING:
    from road._fast_state import LinkState
    from road.remote import Address, Outgoing, Remote
    from road.stack import RoadStack

__all__ = ["CAPABILITY", "FAST_VERSION", "FastLink", "FastRoad"]

log = logging.getLogger(__name__)

CAPABILITY = "rlk"  # the join body key that advertises fast mode
FAST_VERSION = 1
_CONTEXT = b"raetlike fast v1 "


class FastLink(SendingSide, RecoverySide, ReceivingSide, TimersSide):
    """The fast-mode link with one remote: its state (road/_fast_state.py) and its sides.

    Sending (road/_fast_send.py), recovery (road/_fast_recovery.py),
    receiving (road/_fast_receive.py) and time (road/_fast_timers.py); here
    what spans them: keys, pause and resume, and the stream handed back.
    """

    # -- keys ------------------------------------------------------------------------
    def rekey(self) -> None:
        """New session keys from the allow just completed; unacked data goes again."""
        remote = self.remote
        box, peer = remote.session_box, remote.short_peer
        if box is None or peer is None:
            return
        mine, theirs = remote.short_private.public_key.raw, peer.raw
        self.send_key = AeadKey(box.derive(_CONTEXT + mine + theirs))
        self.receive_key = AeadKey(box.derive(_CONTEXT + theirs + mine))
        self.key_id = box.derive(_CONTEXT + b"id" + min(mine, theirs) + max(mine, theirs))[0]
        self.keyed = True
        self.stream_pinned = False  # the first datagram under the new keys names the stream
        self.sending_ok = False
        self.answered = False
        self.unanswered_since = None
        self._forget_sent()
        self.next_packet = 0
        self.sent_floor = 0
        self.largest_acked = -1
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.ack_pending = 0
        self.ack_due = None

    def pause(self) -> None:
        """The remote is dead: stop sending; everything in flight goes again on resume."""
        self.paused = True
        self._forget_sent()

    def resume(self) -> None:
        """The remote answers again."""
        if self.paused:
            self.paused = False
            self.probe_count = 0
            self.control.collapse()

    def take_back(self) -> list[Outgoing]:
        """Every message in the stream, in order, and the stream emptied (fallback)."""
        taken = [sending.outgoing for sending in self.messages.values()]
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
        self.abandons.clear()
        for _, size, _, _ in self.sent.values():
            self.control.on_forgotten(size)
        self.sent.clear()
        self.release_partials()
        return taken

    def give_back(self, reason: str) -> None:
        """Return every message in the stream as MessageExpired (close, removal)."""
        for sending in self.messages.values():
            self.stack._expire(self.remote, sending.outgoing, reason)
        self.messages.clear()
        self.queue.clear()
        self.again.clear()
        self.sent.clear()
        self.release_partials()


class FastRoad:
    """The stack's fast-mode links, one per remote that negotiated it."""

    def __init__(self, stack: RoadStack) -> None:
        self.stack = stack
        self.links: dict[int, FastLink] = {}
        self._turn = 0
        self.fallen_back: dict[int, str] = {}  # uid -> why, until the next allow

    def join_extras(self) -> dict[str, Any]:
        """What our join bodies advertise."""
        return {CAPABILITY: FAST_VERSION} if self.stack.config.fast else {}

    def negotiated(self, remote: Remote) -> bool:
        """Whether both sides advertised fast mode."""
        return self.stack.config.fast and CAPABILITY in remote.capabilities

    def session_started(self, remote: Remote) -> None:
        """An allow completed its key exchange: (re)key the remote's link.

        A remote we fell back from gets a fresh try (the path or its build may
        have changed); the fallback repeats if it still does not answer.
        """
        self.fallen_back.pop(remote.uid, None)
        if not self.negotiated(remote):
            link = self.links.pop(remote.uid, None)
            if link is not None:
                link.give_back("the remote no longer speaks fast mode")
                self._release(remote)
            return
        link = self.links.get(remote.uid)
        if link is None:
            link = self.links[remote.uid] = FastLink(self, remote)
        link.rekey()

    def allowed(self, remote: Remote) -> None:
        """The allow finished on our side: the link may send."""
        link = self.links.get(remote.uid)
        if link is not None and link.keyed:
            link.sending_ok = True

    def takes(self, remote: Remote) -> bool:
        """Whether messages to ``remote`` go by fast mode (the link pulls from the outbox)."""
        link = self.links.get(remote.uid)
        if link is None or not link.keyed:
            return False
        if remote.alive is not False:
            link.resume()
        return True

    def queued(self, remote: Remote, expires: float) -> bool:
        """A message joined ``remote``'s outbox: True when its fast link takes it.

        The link then pulls it as its window opens and watches its time to
        live (the stack puts no timer on its heap for it); False leaves the
        message to the stack (RAET mode, or a remote not allowed or not alive).
        """
        link = self.links.get(remote.uid)
        if (link is None or not link.keyed or not remote.allowed or remote.session_box is None
                or remote.alive is False):
            return False
        if link.paused:
            link.resume()
        soonest = link.outbox_expiry
        link.outbox_expiry = expires if expires < soonest else soonest  # (cheaper than min())
        return True

    def _release(self, remote: Remote) -> None:
        """A link is gone: the stack watches every queued message's time to live again."""
        if remote.outbox:
            self.stack._watch_expiry(remote, min(outgoing.expires for outgoing in remote.outbox))

    def receive(self, data: bytes, now: float) -> None:
        """One fast datagram; garbage is dropped and counted."""
        stack = self.stack
        try:
            _, key_id, destination, stream, number = read_header(data)
        except PacketError:
            stack.stats.drop(Drop.MALFORMED)
            return
        link = self.links.get(destination)
        if link is None or not link.keyed:
            stack.stats.drop(Drop.UNKNOWN_REMOTE)
            return
        if key_id != link.key_id:
            stack.stats.drop(Drop.STALE_KEY)
            return
        # authenticate at the door: nothing of the datagram reaches the link's state before
        # its packet number is fresh and its AEAD tag (over the header too) has verified
        if not link.replay.fresh(number):
            stack.stats.drop(Drop.REPLAYED)
            return
        assert link.receive_key is not None  # noqa: S101 - keyed links have keys
        try:
            plain = link.receive_key.open(data[FAST_HEADER_SIZE:], counter_nonce(0, number),
                                          data[:FAST_HEADER_SIZE])
        except CryptoError:
            stack.stats.drop(Drop.BAD_COAT)
            return
        stack._heard_from(link.remote, len(data))
        link.receive(plain, stream, number, len(data), now)

    def datagrams(self, now: float) -> list[tuple[bytes, Address]]:
        """Datagrams from every link, one per link per round (fair sharing)."""
        out: list[tuple[bytes, Address]] = []
        links = list(self.links.values())
        if not links:
            return out
        self._turn = (self._turn + 1) % len(links)
        active = links[self._turn:] + links[:self._turn]
        while active:
            still: list[FastLink] = []
            for link in active:
                datagram = link.build(now)
                if datagram is not None:
                    out.append((datagram, link.remote.host_address))
                    still.append(link)
                    traffic = link.remote.traffic
                    traffic.datagrams_out += 1
                    traffic.bytes_out += len(datagram)
            active = still
        return out

    def deadline(self, now: float) -> float | None:
        """The earliest deadline of any link."""
        times = [t for link in self.links.values() if (t := link.deadline(now)) is not None]
        return min(times) if times else None

    def handle_timer(self, now: float) -> None:
        """Let every link's timers fire."""
        for link in list(self.links.values()):
            link.handle_timer(now)

    def fall_back(self, link: LinkState, reason: str) -> None:
        """The remote never acknowledged fast mode: its messages go in RAET mode, none lost.

        Unacknowledged messages go back into the outbox in transmit order and
        RAET message transactions carry them (``stats.fast_fallbacks``,
        ``FastModeFallback``).  If the peer did receive some of them (only its
        acks were lost) those arrive twice: at least once, never lost.
        """
        remote, stack = link.remote, self.stack
        if self.links.get(remote.uid) is not link:
            return
        del self.links[remote.uid]
        self.fallen_back[remote.uid] = reason
        waiting = []
        for outgoing in link.take_back():  # all older than anything still in the outbox
            if outgoing.expires <= stack.now:
                stack._expire(remote, outgoing, "time to live ran out in flight")
            else:
                waiting.append(outgoing)
        remote.outbox.extendleft(reversed(waiting))
        stack._schedule(remote)
        self._release(remote)
        stack.stats.fast_fallbacks += 1
        log.warning("%s: falling back to RAET mode with %s: %s", stack.name, remote.name, reason)
        stack._emit(events.FastModeFallback(remote.name, reason))
        stack._pump(remote)

    def remove(self, remote: Remote, reason: str) -> None:
        """The remote is gone: its stream's messages come back."""
        link = self.links.pop(remote.uid, None)
        if link is not None:
            link.give_back(f"remote removed: {reason}")

    def close(self) -> None:
        """The stack closes: every message in every stream comes back."""
        for link in self.links.values():
            link.give_back("stack closed")
