"""Fast mode between two raetlike estates: AEAD datagrams, coalescing, acks and NewReno.

Both sides advertise ``rlk`` in their join bodies (RAET 0.6.8 ignores unknown
keys).  When both did, every allow derives two per-direction ChaCha20-Poly1305
keys from the allow's short-term session box, and messages to that remote go
through a :class:`~road._fast_link.FastLink` instead of RAET message
transactions: several messages (and acks) per datagram, packet numbers as
nonces, a sliding replay window, cumulative and selective acks, loss
detection and a paced NewReno window.  Join and allow stay RAET
transactions; the periodic presence check becomes a ping over the link
(:class:`~road._fast_link.Ping`).  Here: the links, one per remote, what the
stack asks of them all, and which of them to visit (only those touched since,
and those whose deadline came: a main's idle links cost nothing a round).
docs/road.md, "Fast mode", has the whole story.
"""

from __future__ import annotations

import heapq
import logging
from typing import TYPE_CHECKING, Any

from raetlike.errors import PacketError
from road import events
from road._alive import Aliver
from road._fast_link import NEWEST, FastLink
from road._fast_wire import read_header
from road.stats import Drop

if TYPE_CHECKING:
    from road.remote import Address, Remote
    from road.stack import RoadStack

__all__ = ["CAPABILITY", "FAST_VERSION", "FastLink", "FastRoad"]

log = logging.getLogger(__name__)

CAPABILITY = "rlk"  # the join body key that advertises fast mode
FAST_VERSION = 1


_RTTS_TO_ANSWER = 4.0  # a ping waits at least this many smoothed round trips for its ack, as
# RFC 6298's retransmission timeout waits SRTT + 4 RTTVAR: on a machine so loaded that acks
# come a second late, "no answer" after the Aliver's 2 s lost and re-found hundreds of
# estates a minute (tools/loopback_hot.py, docs/relay.md), each loss costing signed work


class FastRoad:
    """The stack's fast-mode links, one per remote that negotiated it."""

    def __init__(self, stack: RoadStack) -> None:
        self.stack = stack
        self.links: dict[int, FastLink] = {}
        self._turn = 0
        self.fallen_back: dict[int, str] = {}  # uid -> why, until the next allow
        # Only links touched since (a datagram in, a message queued, a check asked, a
        # timer fired) are visited: a main of thousands of idle links must not walk them
        # all every loop round.  Touched links may have something to send (_to_send) and
        # a new deadline (_to_time); deadlines wait on a heap, current ones in _due (an
        # entry that differs from _due is stale and skipped).
        self._to_send: dict[int, FastLink] = {}
        self._to_time: dict[int, FastLink] = {}
        self._due: dict[int, float] = {}
        self._heap: list[tuple[float, int]] = []

    def touch(self, link: FastLink) -> None:
        """``link`` may have something to send or a new deadline: visit it next round."""
        uid = link.remote.uid
        self._to_send[uid] = link
        self._to_time[uid] = link

    def alive_answered(self, remote: Remote, asked_at: float) -> None:
        """``remote`` answered a RAET alive asked at ``asked_at``: a link waiting to know
        whether to fall back (:meth:`FastLink.fallback_deadline`) may now have a deadline."""
        link = self.links.get(remote.uid)
        if link is not None and not link.answered:
            link.alive_answered(asked_at, self.stack.now)
            self._to_time[remote.uid] = link

    def _forget(self, uid: int) -> None:
        """A link is gone: none of its visits or deadlines stay."""
        self._to_send.pop(uid, None)
        self._to_time.pop(uid, None)
        self._due.pop(uid, None)

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
                self._forget(remote.uid)
                link.give_back("the remote no longer speaks fast mode")
                self._release(remote)
            return
        link = self.links.get(remote.uid)
        if link is None:
            link = self.links[remote.uid] = FastLink(self.stack, remote)
        link.rekey()
        self.touch(link)

    def allowed(self, remote: Remote) -> None:
        """The allow finished on our side: the link may send, and a trial ping proves it
        carries presence checks (:class:`~road._fast_link.Ping`), so the first periodic
        check already goes over it, unsigned."""
        link = self.links.get(remote.uid)
        if link is not None and link.keyed:
            link.sending_ok = True
            self.ask_alive(remote)
            self.touch(link)

    def takes(self, remote: Remote) -> bool:
        """Whether messages to ``remote`` go by fast mode (the link pulls from the outbox)."""
        link = self.links.get(remote.uid)
        if link is None or not link.keyed:
            return False
        if remote.alive is not False:
            link.resume()
        self.touch(link)
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
        link.sending.watch(expires)
        self.touch(link)
        return True

    def ask_alive(self, remote: Remote) -> bool:
        """The periodic presence check over the remote's link (:meth:`FastLink.ask_alive`):
        True when asked there, False to leave the verdict to a RAET alive.  The check keeps
        the :class:`~road._alive.Aliver`'s redo spacing, and waits its timeout
        (``remote.alive_timeout`` if set, else ``Aliver.timeout``) or 4 answer times of
        the link if longer (a slow path or a busy peer), at most ``presence_timeout_max``.
        """
        link = self.links.get(remote.uid)
        if link is None:
            return False
        # (a main's 1 s alive_timeout too: a main that answers its estates' checks in 1.2 s
        # while it takes a join storm was lost and checked by signed RAET alives, more work
        # for it; docs/relay.md)
        least = Aliver.timeout if remote.alive_timeout is None else remote.alive_timeout
        timeout = min(max(least, _RTTS_TO_ANSWER * link.answer_time()),
                      max(least, self.stack.config.presence_timeout_max))
        self.touch(link)
        return link.ask_alive(self.stack.now, timeout, Aliver.redo_min, Aliver.redo_max)

    def _release(self, remote: Remote) -> None:
        """A link is gone: the stack watches every queued message's time to live again."""
        if remote.outbox:
            self.stack._watch_expiry(remote, min(outgoing.expires for outgoing in remote.outbox))

    def receive(self, data: bytes, source: Address, now: float) -> None:
        """One fast datagram from ``source``, to its link; garbage is dropped and counted.

        An authentic datagram, the newest of its link, from another address than the
        remote's suggests it moved (a re-addressed interface, a NAT's new mapping): we
        ask it "alive?" there (:meth:`RoadStack._probe_path`), and only its answer moves
        it.  A replay cannot start that (the replay window), and a fresh datagram copied
        by an observer and raced from elsewhere gets a probe there, held to 3x its bytes
        (road._amplification), that nobody answers.
        """
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
        heard = link.receive(data, stream, number, now)
        if not heard:  # replayed or forged: nothing is scheduled for it either
            return
        self.touch(link)
        if heard == NEWEST and source != link.remote.host_address:
            stack._probe_path(link.remote, source)

    def datagrams(self, now: float) -> list[tuple[bytes, Address]]:
        """Datagrams from the links touched since the last round, one per link per pass
        (fair sharing); a link with more to say than its window lets go now has a
        deadline (its pacing or probe time) that touches it again."""
        out: list[tuple[bytes, Address]] = []
        if not self._to_send:
            return out
        active = list(self._to_send.values())
        self._to_send.clear()
        to_time = self._to_time
        for link in active:
            to_time[link.remote.uid] = link
        if len(active) > 1:
            self._turn = (self._turn + 1) % len(active)
            active = active[self._turn:] + active[:self._turn]
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

    def _file(self, now: float) -> None:
        """Put the touched links' deadlines on the heap (stale entries stay, skipped)."""
        links, due, heap = self.links, self._due, self._heap
        for uid, link in self._to_time.items():
            if links.get(uid) is not link:
                continue
            soonest = link.deadline(now)
            if soonest is None:
                due.pop(uid, None)
            elif due.get(uid) != soonest:
                due[uid] = soonest
                heapq.heappush(heap, (soonest, uid))
        self._to_time.clear()
        if len(heap) > 4 * len(due) + 64:  # stale entries: at most a few per live one
            self._heap = heap = [(at, uid) for uid, at in due.items()]
            heapq.heapify(heap)

    def deadline(self, now: float) -> float | None:
        """The earliest deadline of any link."""
        if self._to_time:
            self._file(now)
        heap, due = self._heap, self._due
        while heap:
            at, uid = heap[0]
            if due.get(uid) == at:
                return at
            heapq.heappop(heap)
        return None

    def handle_timer(self, now: float) -> None:
        """Let the timers of the links whose deadline came fire (and fall back from those
        that ask to)."""
        if self._to_time:
            self._file(now)
        heap, due, links = self._heap, self._due, self.links
        fired: list[FastLink] = []
        while heap and heap[0][0] <= now:
            at, uid = heapq.heappop(heap)
            if due.get(uid) != at:
                continue
            del due[uid]
            link = links.get(uid)
            if link is not None:
                fired.append(link)
        for link in fired:
            self.touch(link)
            reason = link.handle_timer(now)
            if reason is not None:
                self.fall_back(link, reason)

    def fall_back(self, link: FastLink, reason: str) -> None:
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
        self._forget(remote.uid)
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

    def moved(self, remote: Remote) -> None:
        """The remote moved to another address: what was in flight to the old one goes
        again at once, from a small window (a new path: RFC 9000 9.4 resets congestion
        control on migration)."""
        link = self.links.get(remote.uid)
        if link is not None and link.keyed and not link.paused:
            link.pause()
            link.resume()
            self.touch(link)

    def remove(self, remote: Remote, reason: str) -> None:
        """The remote is gone: its stream's messages come back."""
        link = self.links.pop(remote.uid, None)
        if link is not None:
            self._forget(remote.uid)
            link.give_back(f"remote removed: {reason}")

    def close(self) -> None:
        """The stack closes: every message in every stream comes back."""
        for link in self.links.values():
            link.give_back("stack closed")
