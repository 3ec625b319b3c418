"""The bus node: a sans-IO broker for requests, responses, events and keepalives.

A node has links (neighbours on its road or lane, see raetlike.channels), some
of them *upstream* (toward main): usually one, several for an estate joined to
several mains (raetlike.multimain).  Events published or coming from below go
to every upstream; a request routed up goes to one live upstream; events coming
down from any upstream are distributed once (the event dedup).  Stack messages come in through
:meth:`BusNode.receive`, undelivered ones through :meth:`BusNode.undeliverable`;
the node sends through its links and runs its timers from
:meth:`BusNode.get_timer` / :meth:`BusNode.handle_timer`.  Replies reach user
code through the ``on_reply`` callbacks, events through subscriptions, and
peer changes through :meth:`BusNode.next_event`.  See docs/bus.md.
"""

from __future__ import annotations

import heapq
import logging
import math
import secrets
import sys
import zlib
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from raetlike.bus._api import (
    BusConfig,
    BusError,
    BusEvent,
    BusStats,
    Call,
    EventGap,
    Handler,
    Link,
    OnEvent,
    OnReply,
    PeerAlive,
    PeerLost,
    Reply,
    Request,
    Service,
)
from raetlike.bus._message import (
    ANY,
    UPSTREAM,
    BusMessage,
    Errno,
    MessageType,
    Rolemask,
    carriable,
    decode,
    encode,
)
from raetlike.dedup import ID_MODULUS, BitWindow
from raetlike.errors import BackpressureError, LocalProtocolError, PacketError, RaetError

__all__ = ["BusNode"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    """A request of ours still waiting for its response."""

    message: BusMessage
    on_reply: OnReply
    deadline: float
    resend_at: float
    link: str | None = None
    """The link it last went out on: only a response from that link answers it."""


@dataclass(slots=True)
class _Forwarded:
    """A request relayed on ``out_link`` under a matchtag of ours (the table key): its
    response comes back only on that link and goes to ``came_from`` under ``matchtag``."""

    out_link: str
    came_from: str
    matchtag: int
    """The matchtag the request came with (the previous hop's)."""
    epoch: int
    """The requester's run: the response must carry it."""
    sequence: int
    """The request's number (the requester's): the response must carry it, and its topic."""
    topic_hash: int
    """``hash`` of the request's topic (a topic is not bounded as names are: the table
    keeps no copy of one)."""
    route: tuple[str, ...]
    """The request's route here (its last name is ``came_from``): what older nodes pop."""
    deadline: float


@dataclass(slots=True)
class _Neighbour:
    """A link and what the node knows of it."""

    link: Link
    trusted: bool
    last_heard: float
    lost: bool = False
    subscriptions: frozenset[str] = frozenset()
    below: frozenset[str] = frozenset()
    """The names routed through this link (advertised by it, and taken)."""


@dataclass(frozen=True, slots=True)
class _Registered:
    service: Service
    roles: frozenset[str] | None


_ANSWER_BYTES = 400
"""About what a kept answer holds besides its topic, error text and payload."""


def _weight(value: Any, limit: int) -> int:
    """About how many bytes ``value`` holds (``sys.getsizeof`` of it and of what it
    contains, shared objects counted again), or some number above ``limit`` once past
    it: a walk of at most ``limit`` bytes' worth of objects."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if total > limit:
            break
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


class _Windows:
    """Dedup windows per (sender, run), made on first use; past ``limit`` the least
    recently heard goes.  A sender keeps its two latest runs (so one cannot push
    others' windows out), found through an index by sender: a new run walked every
    window (4,096), 140 us a message from a peer changing its run each time."""

    __slots__ = ("_runs", "_windows", "limit", "size")

    def __init__(self, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        self._windows: OrderedDict[tuple[str, int], BitWindow] = OrderedDict()
        self._runs: dict[str, list[int]] = {}  # sender -> its runs kept, latest heard last

    def __len__(self) -> int:
        return len(self._windows)

    def get(self, userid: str, epoch: int) -> BitWindow:
        """The numbers seen from the run ``epoch`` of ``userid``."""
        windows, key = self._windows, (userid, epoch)
        runs = self._runs.setdefault(userid, [])
        window = windows.get(key)
        if window is not None:
            windows.move_to_end(key)
            if runs[-1] != epoch:
                runs.remove(epoch)
                runs.append(epoch)
            return window
        for old in runs[:-1]:
            del windows[(userid, old)]
        del runs[:-1]
        runs.append(epoch)
        window = windows[key] = BitWindow(self.size)
        while len(windows) > self.limit:
            (gone_user, gone_epoch), _ = windows.popitem(last=False)
            gone = self._runs[gone_user]
            gone.remove(gone_epoch)
            if not gone:
                del self._runs[gone_user]
        return window


def coarsened(prefixes: frozenset[str], limit: int, max_length: int) -> frozenset[str]:
    """At most ``limit`` prefixes, none longer than ``max_length``, that start every topic
    one of ``prefixes`` starts (and perhaps more): each cut to the longest length that
    keeps at most ``limit`` distinct (down to ``""``, every topic), then those another
    of them starts dropped.  What a relay advertises upstream when its tree wants more
    than its upstream keeps: it gets too many events, never too few, and filters them
    for the links below itself (one minion's 1,024 prefixes pushed its siblings' out)."""
    def fits(length: int) -> bool:  # (stops once past limit: a failed length costs little)
        seen: set[str] = set()
        for prefix in prefixes:
            seen.add(prefix[:length])
            if len(seen) > limit:
                return False
        return True

    # fits(0) ({""}); find the longest length that does
    low, high = 0, min(max_length, max(map(len, prefixes), default=0))
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    kept: list[str] = []
    for prefix in sorted({prefix[:low] for prefix in prefixes}):  # (a prefix sorts
        # before everything it starts)
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return frozenset(kept)


def keepalive_phase(name: str, link: str) -> float:
    """When in its first interval (0.5 to 1.0 of it) the node ``name`` sends its keepalive
    to the link ``link``."""
    return 0.5 + 0.5 * zlib.crc32(f"{name}\0{link}".encode()) / 2**32


class BusNode:
    """One node of the bus tree; see the module docstring."""

    def __init__(self, name: str, *, role: str = "", config: BusConfig | None = None,
                 now: float = 0.0) -> None:
        """A node called ``name`` (its estate or yard name) with no links yet."""
        self.name = name
        self.role = role or name
        self.config = config or BusConfig()
        self.stats = BusStats()
        self.upstreams: list[str] = []
        """The links toward main in use, in order (requests go to the first live one)."""
        self._above: set[str] = set()  # upstreams and standby links (also toward a main)
        self.now = now
        self._links: dict[str, _Neighbour] = {}
        self._services: dict[str, _Registered] = {}
        self._pending: dict[int, _Pending] = {}
        # matchtag of ours -> a request relayed under it, oldest first (bounded by
        # config.max_forwarded; an entry lives request_timeout): responses are routed
        # back by this table, never by the route a response carries
        self._forwarded: OrderedDict[int, _Forwarded] = OrderedDict()
        self._forwarded_from: dict[str, int] = {}  # came_from -> its entries in _forwarded
        # a random start each run: a relay restarted with responses to its previous run's
        # requests still on their way took one as the answer to a new request relayed
        # under the same matchtag (the sequence and topic must match too, below)
        self._matchtag = secrets.randbelow(ID_MODULUS - 1)
        self._request_sequence = 0
        self._event_sequence = 0
        self.epoch = secrets.randbits(62) + 1
        """This run of the node (stamped on its requests and events)."""
        # (userid, epoch) -> numbers seen: a restarted sender is a new run, never a repeat
        self._seen = _Windows(self.config.dedup_window, self.config.max_senders)
        # (sender, run, number) -> (the response, about how many bytes it holds): bounded
        # by config.answered_memory and config.answered_bytes (an echo of 1,024 requests
        # of 16 MB each was held)
        self._answered: OrderedDict[tuple[str, int, int], tuple[BusMessage, int]] = OrderedDict()
        self._answered_bytes = 0
        self._event_seen = _Windows(self.config.dedup_window, self.config.max_senders)
        self._subscriptions: dict[str, list[OnEvent]] = {}
        self._routes: dict[str, str] = {}  # a name below a relay link -> that link
        self._advertised: frozenset[str] = frozenset()
        # prefix -> links below (not _above) subscribed to it, kept as links change so a
        # keepalive need not walk every link: a main of 2,000 estates spent 3.6 M calls
        # (9.6 s of a 253 s run) in that walk (docs/relay.md)
        self._below_prefixes: dict[str, set[str]] = {}
        # length -> how many of _below_prefixes have it: an event's topic is matched by
        # looking up its prefixes of these lengths, not by a scan of every link's prefixes
        # (200,000 prefixes from one link cost 45 ms an event)
        self._prefix_lengths: dict[int, int] = {}
        self._prefixes_changed = False  # a prefix came or went since the last _readvertise
        # Each link has its own round: the first at a point of the interval after the link
        # came, fixed by the two names (half to all of it), and every round an interval
        # after.  Nodes started together (a worker of 2,000 estates, minions after a power
        # cut) do not all send theirs at once, nor does a main to its thousands of links:
        # in step, 2,000 estates' 4,000 keepalives stalled their worker for ~2 s every
        # round and both mains declared ~480 of them lost (docs/relay.md).  The heap holds
        # (due, link); an entry whose due is not _keepalive_due[link] is stale (skipped)
        self._keepalive_due: dict[str, float] = {}
        self._keepalive_heap: list[tuple[float, str]] = []
        self._tell_below_at: float | None = None  # when upstream hears of the names below
        # a coarsened set (a tree wanting more prefixes than max_subscriptions) is made
        # again no sooner than this: it walks every prefix below several times (1 M of
        # them, 0.8 s), where a change of the set cost one union before
        self._coarsen_after = -math.inf
        # no link falls silent before this: a lower bound (last_heard only grows), so
        # get_timer need not look at every link: with 1,000 links (a relay) 3.5 us a
        # call instead of 358 us for the scan (tools/scale_tree.py calls it per datagram)
        self._silence_check = math.inf
        # bounded (config.max_events): a node nobody drains (the command line's) kept one
        # EventGap per gapped event a peer sent, without end
        self._events: deque[BusEvent] = deque()

    # == links =============================================================

    @property
    def links(self) -> list[str]:
        """Names of the node's links."""
        return list(self._links)

    @property
    def upstream(self) -> str | None:
        """The upstream a request goes to now: the first live one (else the first), or None."""
        for name in self.upstreams:
            neighbour = self._links[name]
            if not neighbour.lost and neighbour.link.alive:
                return name
        return self.upstreams[0] if self.upstreams else None

    def add_link(self, link: Link, *, upstream: bool = False, standby: bool = False,
                 trusted: bool | None = None, now: float | None = None) -> None:
        """Add a neighbour; ``upstream`` marks one toward main (trusted by default).

        ``standby`` marks a link toward a main that is not in use (a failover
        estate's other mains, raetlike.multimain): trusted, its events are
        distributed here as an upstream's are, a request from it is never sent up,
        and nothing goes up through it until :meth:`set_upstream` makes it an upstream.
        A trusted link's stamps (userid, role, rolemask) are kept: it relays
        for others.  Every other link's messages are stamped with its own
        authenticated identity.
        """
        if link.name in self._links:
            raise LocalProtocolError(f"{self.name}: link {link.name!r} already added")
        self._tick(now)
        above = upstream or standby
        self._links[link.name] = _Neighbour(link, above if trusted is None else trusted,
                                            self.now)
        self._silence_check = min(self._silence_check, self.now + self.config.keepalive_timeout)
        self._schedule_keepalive(
            link.name, self.now + self.config.keepalive_interval * keepalive_phase(self.name,
                                                                                   link.name))
        if above:
            self.set_upstream(link.name, upstream)
        else:
            self._below_changed()

    def set_upstream(self, name: str, upstream: bool) -> None:
        """Make the link ``name`` an upstream (told our subscriptions) or a standby one.

        What a failover estate does when its active main changes
        (raetlike.multimain): both are trusted links toward a main (no routes down
        through them).
        """
        neighbour = self._links[name]
        neighbour.trusted = True
        self._set_subscriptions(name, neighbour, frozenset())
        self._set_below(name, neighbour, ())
        self._above.add(name)
        if upstream and name not in self.upstreams:
            self.upstreams.append(name)
            self._send_keepalive(name)
        elif not upstream and name in self.upstreams:
            self.upstreams.remove(name)
        self._readvertise()

    def remove_link(self, name: str) -> None:
        """Forget the neighbour ``name`` (and the routes through it)."""
        neighbour = self._links.get(name)
        if neighbour is not None:
            self._set_subscriptions(name, neighbour, frozenset())
            del self._links[name]
            del self._keepalive_due[name]  # (its heap entry is stale now)
            self._set_below(name, neighbour, ())
            if name in self.upstreams:
                self.upstreams.remove(name)
            self._below_changed()
        self._above.discard(name)
        self._readvertise()

    def route_to(self, name: str) -> str | None:
        """The link toward the node ``name``: itself if a link, else a relay's, else None."""
        return name if name in self._links else self._routes.get(name)

    def is_lost(self, name: str) -> bool:
        """True while the link ``name`` is silent past the keepalive timeout."""
        return self._links[name].lost

    # == services and requests =============================================

    def serve(self, prefix: str, handler: Service, *,
              roles: frozenset[str] | None = None) -> None:
        """Handle every request whose topic starts with ``prefix`` (e.g. ``"kvs."``).

        ``handler`` is one handler, or a mapping from the rest of the topic
        (after the prefix) to a handler.  The longest matching prefix wins;
        ``roles`` (if given) are the roles allowed in (the local node always is).
        """
        self._services[prefix] = _Registered(handler, roles)

    def unserve(self, prefix: str) -> None:
        """Stop handling ``prefix``."""
        self._services.pop(prefix, None)

    def register_service(self, name: str, service: Service, *,
                         roles: frozenset[str] | None = None) -> None:
        """Serve ``name.*`` with ``service``: ``serve(name + ".", service, roles=roles)``."""
        if not name or "." in name:
            raise LocalProtocolError(f"a service name has no dots: {name!r}")
        self.serve(f"{name}.", service, roles=roles)

    def unregister_service(self, name: str) -> None:
        """Stop serving ``name``."""
        self.unserve(f"{name}.")

    def provides(self, topic: str) -> bool:
        """True when a local handler takes ``topic``."""
        return self._served(topic) is not None

    def _served(self, topic: str) -> str | None:
        """The longest registered prefix of ``topic``, or None."""
        matches = [prefix for prefix in self._services if topic.startswith(prefix)]
        return max(matches, key=len) if matches else None

    def send(self, destination: str, message: Call, on_reply: OnReply, *,
             now: float | None = None, timeout: float | None = None) -> int:
        """Send a request to ``destination`` (ANY, UPSTREAM or a node name); returns its matchtag.

        ``on_reply`` runs exactly once: with the response, or with an error
        reply (ETIMEDOUT after ``timeout``, EHOSTUNREACH, ENOBUFS, ENOSYS, EPERM).
        ``now`` defaults to the node's latest time (from its last call).
        """
        self._tick(now)
        now = self.now
        if "." not in message.topic:
            raise LocalProtocolError(f"a request topic is service.method: {message.topic!r}")
        matchtag = self._next_matchtag()
        self._request_sequence = self._request_sequence % (ID_MODULUS - 1) + 1
        request = BusMessage(MessageType.REQUEST, message.topic, message.payload,
                             matchtag=matchtag, sequence=self._request_sequence,
                             epoch=self.epoch, target=destination, userid=self.name, role=self.role,
                             rolemask=Rolemask.OWNER)
        life = self.config.request_timeout if timeout is None else timeout
        self._pending[matchtag] = _Pending(request, on_reply, now + life,
                                           now + self.config.retry_interval)
        self._route_request(request, None)
        return matchtag

    def cancel(self, matchtag: int) -> bool:
        """Stop waiting for a reply; ``on_reply`` will not run.  True if it was pending."""
        return self._pending.pop(matchtag, None) is not None

    def _next_matchtag(self) -> int:
        while True:
            self._matchtag = self._matchtag % (ID_MODULUS - 1) + 1
            if self._matchtag not in self._pending and self._matchtag not in self._forwarded:
                return self._matchtag

    # == events ============================================================

    def publish(self, topic: str, payload: Any = None, *, now: float) -> int:
        """Publish an event through main; returns its sequence number."""
        self._tick(now)
        self._event_sequence = self._event_sequence % (ID_MODULUS - 1) + 1
        event = BusMessage(MessageType.EVENT, topic, payload, sequence=self._event_sequence,
                           epoch=self.epoch, userid=self.name, role=self.role,
                           rolemask=Rolemask.OWNER)
        if not self.upstreams:
            self._distribute(event)
        else:
            self._forward_up(event)
        return self._event_sequence

    def subscribe(self, prefix: str, callback: OnEvent, *, now: float | None = None) -> None:
        """Call ``callback`` with every event whose topic starts with ``prefix``."""
        self._tick(now)
        if prefix not in self._subscriptions:
            self._prefixes_changed = True
        self._subscriptions.setdefault(prefix, []).append(callback)
        self._readvertise()

    def unsubscribe(self, prefix: str, callback: OnEvent | None = None, *,
                    now: float | None = None) -> None:
        """Drop ``callback`` (or every callback) subscribed to ``prefix``."""
        self._tick(now)
        callbacks = self._subscriptions.get(prefix, [])
        kept = [] if callback is None else [c for c in callbacks if c != callback]
        if kept:
            self._subscriptions[prefix] = kept
        elif self._subscriptions.pop(prefix, None) is not None:
            self._prefixes_changed = True
        self._readvertise()

    # == input from the stack ==============================================

    def receive(self, link_name: str, body: object, now: float) -> None:
        """Take one stack message from the link ``link_name``; garbage is counted, not raised."""
        self._tick(now)
        neighbour = self._links.get(link_name)
        if neighbour is None:
            self.stats.unknown_link += 1
            return
        try:
            message = decode(body, self.config.max_hops)
            if not carriable(message.payload):  # (bytes from a msgpack road: no JSON lane
                # carries them, and a lane that could not ended a manor's estate)
                raise PacketError("malformed-bus", "a payload not every link carries")
        except PacketError as error:
            self.stats.malformed += 1
            logger.debug("%s: malformed bus message from %s: %s", self.name, link_name, error)
            return
        self.stats.received += 1
        self._heard(neighbour)
        if not neighbour.trusted or not message.userid:
            link = neighbour.link
            if message.userid and (message.userid, message.role) != (link.userid, link.role):
                self.stats.restamped += 1
            message = message.stamped(link.userid, link.role, Rolemask.USER)
        elif link_name not in self._above:
            # a trusted relay below speaks for its minions, never as our owner: whatever
            # bits it sent, OWNER is cleared and USER set
            rolemask = (message.rolemask & ~Rolemask.OWNER) | Rolemask.USER
            if rolemask != message.rolemask:
                self.stats.restamped += 1
                message = replace(message, rolemask=rolemask)
        if message.type is MessageType.REQUEST:
            self._route_request(replace(message, route=(*message.route, link_name)), link_name)
        elif message.type is MessageType.RESPONSE:
            self._response_from(link_name, message)
        elif message.type is MessageType.EVENT:
            self._event_from(link_name, message)
        elif link_name not in self._above:
            self._keepalive_from(link_name, neighbour, message)

    def _event_from(self, link_name: str, event: BusMessage) -> None:
        """An event from a link: up toward main, or (from above, or at main) down."""
        if link_name in self._above or not self.upstreams:
            self._distribute(event)
        else:
            self._forward_up(event)

    def _keepalive_from(self, link_name: str, neighbour: _Neighbour,
                        keepalive: BusMessage) -> None:
        """A keepalive from a link below: what it subscribes to, and (a relay) who is below."""
        config, wanted = self.config, dict[str, None]()
        for prefix in keepalive.subscriptions:
            if len(prefix) <= config.max_topic_length and (
                    prefix in wanted or len(wanted) < config.max_subscriptions):
                wanted[prefix] = None
            else:
                self.stats.subscriptions_refused += 1
        self._set_subscriptions(link_name, neighbour, frozenset(wanted))
        if neighbour.trusted:
            self._set_below(link_name, neighbour, keepalive.below)
        else:  # only a relay we trust speaks for names below it
            self.stats.routes_refused += len(keepalive.below)
        self._readvertise()

    def undeliverable(self, link_name: str, body: object, now: float) -> None:
        """A stack message to ``link_name`` could not be delivered: fail its request (113)."""
        self._tick(now)
        try:
            message = decode(body, self.config.max_hops)
        except PacketError:
            return
        self.stats.undeliverable += 1
        if message.type is MessageType.REQUEST:  # (as we sent it: under our matchtag)
            self._answer(link_name, BusMessage(
                MessageType.RESPONSE, message.topic, matchtag=message.matchtag,
                sequence=message.sequence, epoch=message.epoch, errno=Errno.EHOSTUNREACH,
                error=f"{link_name} is unreachable", userid=self.name, role=self.role,
                rolemask=Rolemask.OWNER))

    # == routing ===========================================================

    def _route_request(self, request: BusMessage, came_from: str | None) -> None:
        """Handle ``request`` here, pass it on, or fail it."""
        target = request.target
        if target == self.name or (target == ANY and self.provides(request.topic)):
            self._handle(request)
        elif target in (ANY, UPSTREAM):
            if self.upstreams and came_from not in self._above:
                self._forward(self._up_for_request(), replace(request, target=ANY))
            elif target == ANY:
                self._fail(request, Errno.ENOSYS, f"no service {request.service!r}")
            else:
                self._fail(request, Errno.EHOSTUNREACH, f"{self.name} has no upstream")
        elif (via := self.route_to(target)) is not None and via != came_from:
            if self._links[via].lost or not self._links[via].link.alive:
                self._fail(request, Errno.EHOSTUNREACH, f"{via} is not responding")
            else:
                self._forward(via, request)
        elif self.upstreams and came_from not in self._above:
            self._forward(self._up_for_request(), request)
        else:
            self._fail(request, Errno.EHOSTUNREACH, f"no route to {target}")

    def _response_from(self, link_name: str, response: BusMessage) -> None:
        """A response from a link: taken only for a request that went out on that link."""
        if not self._answer(link_name, response):
            self.stats.stray_responses += 1

    def _same_way(self, link_name: str, out_link: str | None) -> bool:
        """Whether an answer from ``link_name`` may answer what went out on ``out_link``:
        the same link, or both toward a main (a failover estate's request moves to the
        new main, which answers it)."""
        return link_name == out_link or (link_name in self._above and out_link in self._above)

    def _answer(self, link_name: str, response: BusMessage) -> bool:
        """Route ``response`` (to a request that went out on ``link_name``) back: to the
        link the request came from, or to our own ``on_reply``; False when no request of
        that matchtag, run, sequence and topic went out on that link (a forged or late
        response, or one to a request relayed before this node restarted)."""
        entry = self._forwarded.get(response.matchtag)
        if entry is not None:
            if not self._same_way(link_name, entry.out_link) or response.epoch != entry.epoch \
                    or response.sequence != entry.sequence \
                    or hash(response.topic) != entry.topic_hash:
                return False
            self._forget(response.matchtag)
            self._forward(entry.came_from, replace(
                response, matchtag=entry.matchtag, route=entry.route[:-1], hops=response.hops))
            return True
        pending = self._pending.get(response.matchtag)
        if pending is None or response.epoch != self.epoch \
                or response.sequence != pending.message.sequence \
                or response.topic != pending.message.topic \
                or not self._same_way(link_name, pending.link):
            # (an answer to our run before a restart: its matchtag may be taken again)
            return False
        self._complete(response)
        return True

    def _up_for_request(self) -> str:
        """Where a request goes up: the first live upstream (else the first, which queues it)."""
        upstream = self.upstream
        assert upstream is not None  # noqa: S101 - callers check self.upstreams
        return upstream

    def _forward_up(self, event: BusMessage) -> None:
        """An event goes to every upstream (each main's bus gets it; their dedup and the
        subscribers' take repeats)."""
        for name in self.upstreams:
            self._forward(name, event)

    def _forward(self, link_name: str, message: BusMessage) -> None:
        """Send ``message`` one hop on; a refused request fails with 113, or with 105
        (ENOBUFS) when it is our own and the link's outbox is full: a busy asker, not an
        unreachable target (a fan-out past the outbox read as estates that did not answer).

        A message never crosses more than ``max_hops`` links: past it a request fails
        with EPROTO and anything else is dropped (a loop of relays).  A relayed request
        goes on under a matchtag of ours, remembered in ``_forwarded`` with the link it
        came from; our own request's link is kept in its ``_Pending``: a response is
        taken only from the link its request went out on."""
        if message.hops >= self.config.max_hops:
            self.stats.too_many_hops += 1
            if message.type is MessageType.REQUEST:
                self._fail(message, Errno.EPROTO, "too many hops")
            return
        neighbour = self._links.get(link_name)
        accepted = full = False
        wire = replace(message, hops=message.hops + 1)
        relayed = message.type is MessageType.REQUEST and bool(message.route)
        if relayed:
            came_from = message.route[-1]
            self._expire_forwarded()
            if came_from not in self._above and self._forwarded_from.get(came_from, 0) \
                    >= self.config.max_forwarded_per_link:
                # (one peer's flood pushed every other link's way back out of the table)
                self.stats.forwarded_refused += 1
                self._fail(message, Errno.ENOBUFS, f"{self.name} relays enough of "
                           f"{came_from}'s requests")
                return
            wire = replace(wire, matchtag=self._next_matchtag())
        if neighbour is not None:
            try:
                accepted = neighbour.link.send(encode(wire))
            except BackpressureError:
                full = True
            except RaetError as error:  # a link that cannot carry it: undeliverable, not raised
                logger.debug("%s: link %s cannot carry a %s: %s", self.name, link_name,
                             message.type.value, error)
        if accepted:
            self.stats.sent += 1
            if message.type is MessageType.REQUEST:
                self._went_out(link_name, message, wire.matchtag)
            return
        self.stats.undeliverable += 1
        logger.debug("%s: %s to %s not taken", self.name, message.type.value, link_name)
        if message.type is MessageType.REQUEST:
            if full and not message.route:  # (ours: it came in on no link)
                self._fail(message, Errno.ENOBUFS, f"the outbox to {link_name} is full")
            else:
                self._fail(message, Errno.EHOSTUNREACH, f"{link_name} refused the request")

    def _went_out(self, link_name: str, request: BusMessage, matchtag: int) -> None:
        """``request`` went out on ``link_name`` (under ``matchtag``): remember the way
        back (relayed) or the link its answer must come from (ours)."""
        if request.route:
            self._remember(matchtag, _Forwarded(
                link_name, request.route[-1], request.matchtag, request.epoch,
                request.sequence, hash(request.topic), request.route,
                self.now + self.config.request_timeout))
        elif (pending := self._pending.get(request.matchtag)) is not None:
            pending.link = link_name

    def _remember(self, matchtag: int, entry: _Forwarded) -> None:
        """Keep a relayed request's way back: expired entries go first, then the oldest
        past ``max_forwarded`` (its response will count as stray)."""
        table = self._forwarded
        self._expire_forwarded()
        while len(table) >= self.config.max_forwarded:
            self._forget(next(iter(table)))
            self.stats.forwarded_forgotten += 1
        table[matchtag] = entry
        self._forwarded_from[entry.came_from] = self._forwarded_from.get(entry.came_from, 0) + 1

    def _expire_forwarded(self) -> None:
        """Forget the relayed requests past their time (the oldest are first)."""
        table = self._forwarded
        while table and next(iter(table.values())).deadline <= self.now:
            self._forget(next(iter(table)))

    def _forget(self, matchtag: int) -> None:
        """Drop a relayed request's way back (and its count for the link it came from)."""
        came_from = self._forwarded.pop(matchtag).came_from
        left = self._forwarded_from[came_from] - 1
        if left:
            self._forwarded_from[came_from] = left
        else:
            del self._forwarded_from[came_from]

    def _fail(self, request: BusMessage, errno: Errno, error: str) -> None:
        """Answer ``request`` with an error, back the way it came."""
        self._respond(request, None, errno, error)

    def _respond(self, request: BusMessage, payload: Any, errno: Errno, error: str) -> None:
        """Send a response to ``request`` back the way it came."""
        self._send_response(request, BusMessage(
            MessageType.RESPONSE, request.topic, payload, matchtag=request.matchtag,
            sequence=request.sequence, epoch=request.epoch, errno=errno, error=error,
            userid=self.name, role=self.role, rolemask=Rolemask.OWNER))

    def _send_response(self, request: BusMessage, response: BusMessage) -> None:
        """``response`` to the link ``request`` came in on (the last name of its route,
        put there by this node), or to our own ``on_reply`` (a request of ours)."""
        if not request.route:
            self._complete(response)
            return
        *rest, came_from = request.route
        self._forward(came_from, replace(response, matchtag=request.matchtag,
                                         route=tuple(rest), hops=0))

    # == local handling ====================================================

    def _handle(self, request: BusMessage) -> None:
        """Run the service for ``request`` once per (sender, sequence); answer again if resent."""
        window = self._seen.get(request.userid, request.epoch)
        key = (request.userid, request.epoch, request.sequence)
        if not window.check_and_mark(request.sequence % ID_MODULUS):
            self.stats.duplicates += 1
            answered = self._answered.get(key)
            if answered is not None:  # (under this copy's matchtag: each hop chose its own)
                self._send_response(request, answered[0])
            return
        payload, errno, error = self._run(request)
        self._keep_answer(key, BusMessage(
            MessageType.RESPONSE, request.topic, payload, matchtag=request.matchtag,
            sequence=request.sequence, epoch=request.epoch, errno=errno, error=error,
            userid=self.name,
            role=self.role, rolemask=Rolemask.OWNER))
        self._respond(request, payload, errno, error)

    def _keep_answer(self, key: tuple[str, int, int], response: BusMessage) -> None:
        """Keep ``response`` to answer a resent request again: at most ``answered_memory``
        of them holding ``answered_bytes`` in all (the oldest go first); one holding more
        than a sixteenth of that is not kept."""
        config, answered = self.config, self._answered
        limit = config.answered_bytes // 16
        size = _ANSWER_BYTES + len(response.topic) + len(response.error)
        size += _weight(response.payload, limit - size)
        if size > limit:
            self.stats.answers_not_kept += 1
            return
        old = answered.pop(key, None)  # (its window was forgotten: the number came again)
        if old is not None:
            self._answered_bytes -= old[1]
        answered[key] = (response, size)
        self._answered_bytes += size
        while len(answered) > config.answered_memory \
                or self._answered_bytes > config.answered_bytes:
            self._answered_bytes -= answered.popitem(last=False)[1][1]

    def _run(self, request: BusMessage) -> tuple[Any, Errno, str]:
        """Call the handler; (payload, errno, error text)."""
        prefix = self._served(request.topic)
        if prefix is None:
            return None, Errno.ENOSYS, f"no service {request.service!r}"
        registered = self._services[prefix]
        if registered.roles is not None and request.rolemask is not Rolemask.OWNER \
                and request.role not in registered.roles:
            return None, Errno.EPERM, f"role {request.role!r} may not call {request.topic}"
        handler: Handler | None
        if isinstance(registered.service, Mapping):
            handler = registered.service.get(request.topic[len(prefix):])
        else:
            handler = registered.service
        if handler is None:
            return None, Errno.ENOSYS, f"no method {request.topic!r}"
        self.stats.handled += 1
        incoming = Request(request.topic, request.payload, request.userid, request.role,
                           request.rolemask, request.matchtag)
        try:
            return handler(incoming), Errno.OK, ""
        except BusError as error:
            return None, error.errno, error.text
        except Exception as error:  # a failing handler answers EIO, never kills the node
            logger.exception("%s: handler for %s failed", self.name, request.topic)
            return None, Errno.EIO, f"{type(error).__name__}: {error}"

    def _complete(self, response: BusMessage) -> None:
        """A response to one of our requests: run its callback once."""
        pending = self._pending.pop(response.matchtag, None)
        if pending is None:
            self.stats.stray_responses += 1
            return
        pending.on_reply(Reply(response.matchtag, response.topic, response.payload,
                               response.errno, response.error, response.userid))

    def _distribute(self, event: BusMessage) -> None:
        """Main, or an event from upstream: deliver here and to subscribed links below."""
        window = self._event_seen.get(event.userid, event.epoch)
        before = window.max_seen
        if not window.check_and_mark(event.sequence % ID_MODULUS):
            self.stats.duplicates += 1
            return
        if before is not None and (event.sequence - before) % ID_MODULUS > 1 \
                and window.max_seen == event.sequence:
            self._report(EventGap(event.userid, (event.sequence - before - 1) % ID_MODULUS))
        called: list[OnEvent] = []
        for prefix, callbacks in self._subscriptions.items():
            if event.topic.startswith(prefix):
                called.extend(c for c in callbacks if all(c is not d for d in called))
        for callback in called:
            self.stats.events_delivered += 1
            callback(event)
        topic, index = event.topic, self._below_prefixes
        matched: set[str] = set()
        for length in self._prefix_lengths:
            if length <= len(topic) and (links := index.get(topic[:length])):
                matched |= links
        for name in sorted(matched):
            self._forward(name, event)

    # == keepalives and subscriptions ======================================

    def _set_subscriptions(self, link_name: str, neighbour: _Neighbour,
                           subscriptions: frozenset[str]) -> None:
        """What the link subscribes to now, indexed in ``_below_prefixes`` while it is below."""
        old = neighbour.subscriptions
        if subscriptions == old:
            return
        neighbour.subscriptions = subscriptions
        if link_name in self._above:
            return
        index, lengths = self._below_prefixes, self._prefix_lengths
        for prefix in old - subscriptions:
            links = index[prefix]
            links.discard(link_name)
            if not links:
                del index[prefix]
                lengths[len(prefix)] -= 1
                if not lengths[len(prefix)]:
                    del lengths[len(prefix)]
                self._prefixes_changed = True
        for prefix in subscriptions - old:
            if prefix in index:
                index[prefix].add(link_name)
            else:
                index[prefix] = {link_name}
                lengths[len(prefix)] = lengths.get(len(prefix), 0) + 1
                self._prefixes_changed = True

    def _readvertise(self) -> None:
        """Tell upstream at once when the prefixes wanted at or below this node change
        (counted as they change: no walk of the links).  More than ``max_subscriptions``
        of them (or one longer than ``max_topic_length``), which an upstream configured
        as this node would not keep in full, are advertised coarser (:func:`coarsened`),
        made at most once a ``keepalive_interval`` (changes meanwhile wait for it)."""
        if not self._prefixes_changed:
            return
        if self.now < self._coarsen_after:  # (told at _tell_below_at, below)
            if self.upstreams:
                self._tell_below_at = min(self._tell_below_at or math.inf, self._coarsen_after)
            return
        self._prefixes_changed = False
        wanted = frozenset(self._subscriptions).union(self._below_prefixes)
        config = self.config
        if len(wanted) > config.max_subscriptions or any(
                len(prefix) > config.max_topic_length for prefix in self._subscriptions):
            # what an upstream keeps (as we do): a coarser set, never a part of it; made
            # at most once a keepalive interval
            wanted = coarsened(wanted, config.max_subscriptions, config.max_topic_length)
            self._coarsen_after = self.now + config.keepalive_interval
        if wanted != self._advertised:
            self._advertised = wanted
            for name in self.upstreams:
                self._send_keepalive(name)

    def _set_below(self, link_name: str, neighbour: _Neighbour, names: tuple[str, ...]) -> None:
        """Route ``names`` (what a trusted link below advertised) through ``link_name``.

        A name that is ours or a direct link's is refused, as is another link's route
        while that link is not lost (the first route holds; a name below a lost relay
        moves to the relay that has it now), and any past ``max_routes``; names it no
        longer advertises go.
        """
        wanted = frozenset(names)
        if wanted == neighbour.below:
            return
        routes = self._routes
        for name in neighbour.below - wanted:
            if routes.get(name) == link_name:
                del routes[name]
        kept = set(neighbour.below & wanted)
        for name in wanted - neighbour.below:
            holder = routes.get(name)
            if (name == self.name or name in self._links
                    or (holder is not None and not self._links[holder].lost)
                    or (holder is None and len(routes) >= self.config.max_routes)):
                self.stats.routes_refused += 1
                continue
            if holder is not None:  # from a lost relay
                self._links[holder].below = self._links[holder].below - {name}
            routes[name] = link_name
            kept.add(name)
        neighbour.below = frozenset(kept)
        self._below_changed()

    def _below_changed(self) -> None:
        """The names reachable through us changed: tell upstream after ``route_delay``
        (one keepalive for a burst of joins, not one per join)."""
        if self.upstreams and self._tell_below_at is None:
            self._tell_below_at = self.now + self.config.route_delay

    def _schedule_keepalive(self, link_name: str, due: float) -> None:
        """The link's next keepalive is at ``due``; the heap is rebuilt when stale entries
        (links removed or re-added) outnumber the links, so it stays within twice them."""
        self._keepalive_due[link_name] = due
        heap = self._keepalive_heap
        if len(heap) > 2 * len(self._keepalive_due) + 16:
            heap[:] = [(at, name) for name, at in self._keepalive_due.items()]
            heapq.heapify(heap)
        else:
            heapq.heappush(heap, (due, link_name))

    def _keepalive_round(self, now: float) -> None:
        """Send the keepalives due by ``now``; each link's next is the next point of its grid
        (its first round plus whole intervals) after ``now``."""
        heap, due_at, interval = self._keepalive_heap, self._keepalive_due, \
            self.config.keepalive_interval
        while heap and heap[0][0] <= now:
            due, name = heapq.heappop(heap)
            if due_at.get(name) != due:
                continue  # stale
            self._send_keepalive(name)
            # on the link's own grid: links held up together (a stalled loop) do not all
            # send in step ever after; rounds missed are skipped
            self._schedule_keepalive(name, due + ((now - due) // interval + 1) * interval)

    def _send_keepalive(self, link_name: str) -> None:
        subscriptions: tuple[str, ...] = ()
        below: tuple[str, ...] = ()
        if link_name in self.upstreams:
            subscriptions = tuple(sorted(self._advertised))
            # every name reachable through us: live links below, and the routes through them
            links = self._links
            below = (*(name for name, n in links.items() if not n.lost and name not in self._above),
                     *(name for name, via in self._routes.items() if not links[via].lost))
        self.stats.keepalives_sent += 1
        self._forward(link_name, BusMessage(MessageType.KEEPALIVE, subscriptions=subscriptions,
                                            below=below))

    def _heard(self, neighbour: _Neighbour) -> None:
        neighbour.last_heard = self.now
        if neighbour.lost:
            neighbour.lost = False
            self._silence_check = min(self._silence_check,
                                      self.now + self.config.keepalive_timeout)
            self._report(PeerAlive(neighbour.link.name))
            self._below_changed()

    # == timers and events =================================================

    def _tick(self, now: float | None) -> None:
        if now is not None:
            self.now = max(self.now, now)

    def get_timer(self) -> float | None:
        """The next keepalive, resend, timeout or silence deadline."""
        times = [self._keepalive_heap[0][0]] if self._keepalive_heap else []
        if self._tell_below_at is not None:
            times.append(self._tell_below_at)
        times.extend(min(p.deadline, p.resend_at) for p in self._pending.values())
        times.append(self._silence_check)
        soonest = min(times)
        return None if soonest == math.inf else soonest

    def handle_timer(self, now: float) -> None:
        """Send keepalives, resend and time out requests, report silent links."""
        self._tick(now)
        self._keepalive_round(now)
        if self._tell_below_at is not None and self._tell_below_at <= now:
            self._tell_below_at = None
            self._readvertise()  # (a change held back by _coarsen_after)
            for name in self.upstreams:
                self._send_keepalive(name)
        if self._silence_check <= now:
            self._check_silence(now)
        for matchtag, pending in list(self._pending.items()):
            if pending.deadline <= now:
                del self._pending[matchtag]
                pending.on_reply(Reply(matchtag, pending.message.topic, None, Errno.ETIMEDOUT,
                                       "no response in time"))
            elif pending.resend_at <= now and matchtag in self._pending:
                pending.resend_at = now + self.config.retry_interval
                self.stats.retries += 1
                self._route_request(pending.message, None)

    def _check_silence(self, now: float) -> None:
        """Report links silent past the timeout; the next check is the earliest deadline."""
        timeout, soonest = self.config.keepalive_timeout, math.inf
        for name, neighbour in self._links.items():
            if neighbour.lost:
                continue
            # the same sum as the bound's, so a timer that fires always acts (no float gap)
            deadline = neighbour.last_heard + timeout
            if deadline <= now:
                neighbour.lost = True
                silent = now - neighbour.last_heard
                logger.info("%s: link %s silent for %.1f s", self.name, name, silent)
                self._report(PeerLost(name, silent))
                self._below_changed()
            else:
                soonest = min(soonest, deadline)
        self._silence_check = soonest

    def _report(self, event: BusEvent) -> None:
        """Queue ``event`` for :meth:`next_event`; past ``max_events`` the oldest goes
        (counted in ``stats.events_dropped``)."""
        events = self._events
        while len(events) >= self.config.max_events:
            events.popleft()
            self.stats.events_dropped += 1
        events.append(event)

    def next_event(self) -> BusEvent | None:
        """The next peer change or event gap, or None."""
        return self._events.popleft() if self._events else None
