"""The base of every raetlike deed, and the typed helpers they share.

A deed is an ioflo ``Doer``: ioflo registers each subclass under its class
name, and FloScript's ``do raetlike road stack service`` names the class
``RaetlikeRoadStackService``.  A deed's *iois* (``Ioinits``) are shares of the
house's store under its *inode* (``.raetlike.road.stack.`` unless the plan
says ``per inode "..."``); ioflo turns each into an attribute of the deed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

# ioflo 2.0.3 imports here because raetlike/flo/__init__.py imported _compat first
from ioflo.aid.odicting import odict
from ioflo.base import doing

from raetlike.errors import BackpressureError, LocalProtocolError

__all__ = ["RaetlikeDeed", "fresh_deque", "stack_ioinits"]

log = logging.getLogger(__name__)


def fresh_deque() -> odict:
    """An ioinit value that starts a share's ``value`` as an empty deque (once per store)."""
    return odict(ival=deque())


def stack_ioinits(inode: str, local: dict[str, Any], status: dict[str, int]) -> odict:
    """The iois every deed of one kind of stack shares, under ``inode``.

    ``stack`` and ``driver`` hold the sans-IO stack and its socket driver;
    ``local`` the settings the plan ``init``s; ``address`` where the stack is
    bound; ``status`` counters the plan's transitions read; ``rxmsgs`` the
    messages received as ``(body, sender)`` pairs; ``txmsgs`` the messages
    waiting to be transmitted as ``(body, destination)`` pairs; ``events``
    every event the stack reported; ``destination`` the default destination
    of the sender deed.
    """
    return odict(
        inode=inode,
        stack="stack",
        driver="driver",
        local=odict(ipath="local", ival=odict(local)),
        address=odict(ipath="address", ival=odict(host="", port=0, path="")),
        status=odict(ipath="status", ival=odict(status)),
        rxmsgs=odict(ipath="rxmsgs", **fresh_deque()),
        txmsgs=odict(ipath="txmsgs", **fresh_deque()),
        events=odict(ipath="events", **fresh_deque()),
        destination=odict(ipath="destination", ival=""),
    )


class RaetlikeDeed(doing.Doer):  # type: ignore[misc]  # ioflo ships no type information
    """Base of the raetlike deeds: typed access to the house's store and clock.

    Subclasses set ``Ioinits`` (see :func:`stack_ioinits`) and implement
    ``action(**parms)``; the ``with`` data of the plan's ``do`` arrives in
    ``parms``.
    """

    @property
    def now(self) -> float:
        """The house's clock: the store's stamp (seconds, advanced by the skedder each tick)."""
        stamp = self.store.stamp
        return float(stamp) if stamp is not None else 0.0

    @property
    def house_name(self) -> str:
        """The name of the house this deed runs in."""
        house = self.store.house
        return str(house.name) if house is not None else ""

    def count(self, field: str, step: int = 1) -> None:
        """Add ``step`` to the counter ``field`` of the ``status`` share."""
        status = self.status
        status.update({field: int(status.get(field, 0) or 0) + step})

    def transmit_waiting(self, transmit: Callable[..., Any], now: float) -> None:
        """Hand the plan's ``txmsgs`` to the stack (``transmit(body, to=..., now=...)``).

        A full outbox leaves the rest for the next tick; a refused message is
        counted as failed, logged and dropped from ``txmsgs``.
        """
        txmsgs = self.txmsgs.value
        while txmsgs:
            body, destination = txmsgs[0]
            try:
                transmit(body, to=destination, now=now)
            except BackpressureError:
                return  # the rest waits for the next tick
            except LocalProtocolError as exc:
                self.count("failed")
                log.warning("house %s: message to %s refused: %s", self.house_name,
                            destination, exc)
            txmsgs.popleft()

    def serve(self, transmit: Callable[..., Any], collect_events: Callable[[], None]) -> None:
        """One tick: hand ``txmsgs`` to the stack, let the driver read, fire timers and write,
        then take the stack's events (``collect_events()``)."""
        now = self.now
        self.transmit_waiting(transmit, now)
        self.driver.value.service(now)
        collect_events()

    def queue_message(self, target: str, body: dict[str, Any]) -> None:
        """Put ``body`` in ``txmsgs`` for ``target``; with no target, count it failed (logged)."""
        if not target:
            self.count("failed")
            log.error("house %s: sender has no destination", self.house_name)
            return
        self.txmsgs.value.append((body, str(target)))

    def log_received(self) -> None:
        """Log (and take) each message waiting in ``rxmsgs``."""
        rxmsgs = self.rxmsgs.value
        while rxmsgs:
            body, sender = rxmsgs.popleft()
            log.info("house %s: message from %s: %r", self.house_name, sender, body)

    def close_stack(self, close: Callable[..., Any], collect_events: Callable[[], None]) -> None:
        """Close the stack (``close(now=...)``), flush the driver, take the last events
        (``collect_events()``), close the socket and empty the ``stack`` and ``driver`` shares."""
        now = self.now
        close(now=now)
        driver = self.driver.value
        driver.send(now)
        collect_events()
        driver.close()
        self.stack.value = None
        self.driver.value = None

    def setting(self, field: str, default: Any) -> Any:
        """The ``local`` share's ``field``, or ``default`` when the plan left it out."""
        value = self.local.get(field, default)
        return default if value is None else value
