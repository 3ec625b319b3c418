"""The register of remote estates a stack knows (by uid, by name, joiners by address), and
the strangers among them (added by a vacuous join, not proven by an allow).

Owned objects of :class:`road.stack.RoadStack` that know nothing of it: the register
keeps the three indexes consistent and hands out uids; :class:`Strangers` bounds the
estates that never finish joining.  What adding or removing a remote means beyond that
(timers, the keep, events) is the stack's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raetlike.errors import LocalProtocolError
from road.remote import Address, Remote

if TYPE_CHECKING:
    from road.config import RoadConfig

__all__ = ["Register", "Strangers"]


class Register:
    """Remotes by uid (``by_uid``), by name (``by_name``) and vacuous joiners by the
    address they joined from (``joinees``); how many remotes have each host address.

    A registered remote's host address changes only through :meth:`readdress`, so the
    count stays true: whether an address is still some remote's is then one lookup,
    not a scan of every remote (a main with 10,000 minions behind a NAT that maps them
    all anew moves each once; a scan per move made that quadratic)."""

    def __init__(self, local_uid: int) -> None:
        self.local_uid = local_uid
        self.by_uid: dict[int, Remote] = {}
        self.by_name: dict[str, Remote] = {}
        self.joinees: dict[Address, Remote] = {}
        self._addressed: dict[Address, int] = {}  # host address -> registered remotes there
        self._last_uid = local_uid

    def next_uid(self) -> int:
        """A uid no remote has, and not ours (counting on from the last, 1 after 2**32-1)."""
        uid = self._last_uid
        while True:
            uid = uid + 1 if uid < 0xFFFFFFFF else 1
            if uid != self.local_uid and uid not in self.by_uid:
                self._last_uid = uid
                return uid

    def named(self, name: str) -> Remote:
        """The remote called ``name``; LocalProtocolError when there is none."""
        remote = self.by_name.get(name)
        if remote is None:
            raise LocalProtocolError(f"no remote estate named {name!r}")
        return remote

    def at(self, address: Address) -> Remote | None:
        """The remote whose host address is ``address``, if any."""
        for remote in self.by_uid.values():
            if remote.host_address == address:
                return remote
        return None

    def add(self, remote: Remote) -> None:
        """File ``remote``; LocalProtocolError when another has its name."""
        if self.by_name.get(remote.name, remote) is not remote:
            raise LocalProtocolError(f"a remote named {remote.name!r} exists already")
        if self.by_uid.get(remote.uid) is not remote:
            self._count(remote.host_address, 1)
        self.by_uid[remote.uid] = remote
        self.by_name[remote.name] = remote

    def readdress(self, remote: Remote, address: Address) -> None:
        """``remote``'s host address is ``address`` from now on."""
        if self.by_uid.get(remote.uid) is remote:
            self._count(remote.host_address, -1)
            self._count(address, 1)
        remote.host_address = address

    def addressed(self, address: Address) -> bool:
        """Whether some registered remote has the host address ``address``."""
        return address in self._addressed

    def _count(self, address: Address, change: int) -> None:
        count = self._addressed.get(address, 0) + change
        if count > 0:
            self._addressed[address] = count
        else:
            self._addressed.pop(address, None)

    def rename(self, remote: Remote, name: str) -> None:
        """Call ``remote`` ``name`` from now on."""
        if self.by_name.get(remote.name) is remote:
            del self.by_name[remote.name]
        remote.name = name
        if remote.uid in self.by_uid:
            self.by_name[name] = remote

    def drop(self, remote: Remote) -> None:
        """Forget ``remote`` in every index."""
        if self.by_uid.get(remote.uid) is remote:
            del self.by_uid[remote.uid]
            self._count(remote.host_address, -1)
        if self.by_name.get(remote.name) is remote:
            del self.by_name[remote.name]
        for address, joinee in list(self.joinees.items()):
            if joinee is remote:
                del self.joinees[address]


class Strangers:
    """Estates a vacuous join added: at most ``max_pending_joins`` not yet joined (oldest
    evicted), and each reaped ``unallowed_reap_after`` seconds after its join (0: never)
    unless an allow proved its keys.  Both are read from the config at each use.

    A join proves nothing (it is unsigned); an allow does.
    """

    __slots__ = ("config", "unjoined", "unproven")

    def __init__(self, config: RoadConfig) -> None:
        self.config = config
        self.unjoined: dict[int, None] = {}  # uids in the order they came
        self.unproven: dict[int, float] = {}  # uid -> when it goes unless allowed by then

    def add(self, uid: int, now: float) -> list[int]:
        """A stranger came; the uids of the oldest ones to evict for it (past the bound)."""
        self.unjoined[uid] = None
        reap_after = self.config.unallowed_reap_after
        if reap_after > 0:
            self.unproven[uid] = now + reap_after
        evicted = []
        while len(self.unjoined) > self.config.max_pending_joins:
            oldest = next(iter(self.unjoined))
            del self.unjoined[oldest]
            evicted.append(oldest)
        return evicted

    def joined(self, uid: int) -> None:
        """Its join completed: no longer counted against ``limit``."""
        self.unjoined.pop(uid, None)

    def proven(self, uid: int) -> None:
        """An allow proved its keys: never reaped as a stranger."""
        self.unproven.pop(uid, None)

    def reap_time(self, uid: int) -> float | None:
        """When an unproven stranger goes (None: it is not one)."""
        return self.unproven.get(uid)

    def forget(self, uid: int) -> None:
        """The remote is gone."""
        self.unjoined.pop(uid, None)
        self.unproven.pop(uid, None)
