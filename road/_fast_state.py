"""Fast mode: the state one link keeps with one remote, which every side of the link shares.

:class:`LinkState` holds the fields; the sides that work on them are mixins
over it (road/_fast_send.py builds datagrams, road/_fast_recovery.py settles
acks and finds losses, road/_fast_receive.py takes datagrams in,
road/_fast_timers.py keeps deadlines) and road/_fast.py joins them into
:class:`~road._fast.FastLink`.  Mixins, not helper objects: on the hot path
every ``self.side.field`` would cost an attribute load per access.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from raetlike.crypto import AEAD_TAG_SIZE, AeadKey, random_bytes
from raetlike.errors import LocalProtocolError
from road._fast_control import CongestionControl, ReceivedRanges, ReplayWindow
from road._fast_wire import FAST_HEADER_SIZE, FRAME_MESSAGE_SIZE

if TYPE_CHECKING:
    from road._fast import FastRoad
    from road._fast_receive import Partial
    from road._fast_send import Carried, Sending, Sent
    from road.remote import Outgoing, Remote

__all__ = ["NEVER", "LinkState"]

NEVER = float("inf")
_ACK_ROOM = 2 + 16 * 4  # an ack frame of up to 4 ranges rides along with data


class LinkState:
    """The fast-mode state with one remote: a sending stream and a receiving stream."""

    def __init__(self, road: FastRoad, remote: Remote) -> None:
        self.road = road
        self.stack = road.stack
        self.remote = remote
        config = self.stack.config
        self.datagram_size = config.fast_datagram_size
        self.chunk_size = (self.datagram_size - FAST_HEADER_SIZE - AEAD_TAG_SIZE
                           - FRAME_MESSAGE_SIZE - _ACK_ROOM)
        if self.chunk_size < 64:
            raise LocalProtocolError("fast_datagram_size is too small")
        self.ack_delay = config.fast_ack_delay
        self.short_datagram = self.datagram_size // 2  # acked at once (see _ack_later)
        self.last_ack = -NEVER  # when an ack frame last went
        self.keyed = False
        self.sending_ok = False
        self.key_id = 0
        self.send_key: AeadKey | None = None
        self.receive_key: AeadKey | None = None
        # sending
        self.stream_id = int.from_bytes(random_bytes(4), "big")
        self.next_number = 1
        self.oldest = 1  # no message below this one is in flight (see _oldest)
        self.messages: dict[int, Sending] = {}
        self.queue: deque[tuple[Sending, int]] = deque()
        self.again: deque[tuple[Sending, int]] = deque()
        self.abandons: deque[int] = deque()
        self.sent: dict[int, Sent] = {}
        self.next_packet = 0
        self.sent_floor = 0  # no packet below this one awaits its ack (see _first_sent)
        self.largest_acked = -1
        self.last_eliciting = 0.0
        self.loss_time: float | None = None
        self.probes = 0
        self.probe_count = 0
        self.paused = False
        self.control = CongestionControl(self.datagram_size, config.fast_max_window)
        self.expiry_check = 0.0
        # the soonest expiry of a message that joined the outbox through FastRoad.queued
        self.outbox_expiry = NEVER
        # fallback: has the peer acknowledged any fast datagram under the current keys?
        self.answered = False
        self.unanswered_since: float | None = None
        # receiving (everything below changes only after a datagram's AEAD tag verified)
        self.peer_stream: int | None = None
        self.stream_pinned = False  # the peer's stream is fixed for the current keys
        self.floor = 1  # every message number below it is done (delivered or abandoned)
        self.delivered: set[int] = set()  # numbers done above the floor (may hold stale ones)
        # how far above the floor a message may be before the floor moves up to it
        self.dedup_window = max(config.dedup_window, 2 * config.fast_messages_in_flight)
        self.partials: dict[int, Partial] = {}
        self.partials_check = NEVER  # when partials may next have gone quiet too long
        self.replay = ReplayWindow()
        self.received = ReceivedRanges()
        self.ack_pending = 0
        self.ack_due: float | None = None


    if TYPE_CHECKING:  # what one side calls on another (defined by the side named)
        def _requeue(self, chunks: list[Carried], abandons: list[int]) -> None:
            """road/_fast_recovery.py"""

        def _forget_sent(self) -> None:
            """road/_fast_recovery.py"""

        def _first_sent(self) -> int:
            """road/_fast_recovery.py"""

        def _on_ack(self, ranges: list[tuple[int, int]], now: float) -> None:
            """road/_fast_recovery.py"""

        def _detect_losses(self, now: float) -> None:
            """road/_fast_recovery.py"""

        def _outbox_ready(self) -> bool:
            """road/_fast_send.py"""

        def pause(self) -> None:
            """road/_fast.py"""

        def take_back(self) -> list[Outgoing]:
            """road/_fast.py"""

        def release_partials(self) -> None:
            """road/_fast_receive.py"""

        def sweep_partials(self, now: float) -> None:
            """road/_fast_receive.py"""
