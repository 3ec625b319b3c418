"""Anti-amplification (RFC 9000, section 8.1) and per-source join rates, by address.

An address is *validated* once it has shown it receives what we send: it
completed an allow with us (only the holder of the keys and the address can),
or our own code chose to contact it (``RoadStack.join``).  Until then we send
it at most ``amplification_factor`` times the bytes we received from it; what
would exceed that is withheld and counted (``stats.amplification_limited``).
A join request with a forged source address therefore reflects at most three
times its own size to the forged host, however many answers and resends the
join would otherwise make.

The table of unvalidated addresses is bounded (``max_unvalidated_addresses``);
the oldest entry goes first.  An evicted address starts again from nothing:
its next datagram credits a fresh budget, so the bound of three times what was
received holds across evictions as well.

:class:`JoinRate` is a token bucket per source IP address for join requests
(``join_rate_per_source`` a second, bursts of ``join_burst_per_source``), in a
table bounded the same way.
"""

from __future__ import annotations

from collections import OrderedDict

from road.remote import Address

__all__ = ["AMPLIFICATION_FACTOR", "AddressBudget", "JoinRate"]

AMPLIFICATION_FACTOR = 3
"""RFC 9000's limit: bytes sent to an unvalidated address per byte received from it."""


class AddressBudget:
    """Which addresses are validated, and what the others may still be sent."""

    __slots__ = ("_budgets", "limit", "validated")

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.validated: dict[Address, None] = {}
        self._budgets: OrderedDict[Address, int] = OrderedDict()  # address -> bytes we may send

    def validate(self, address: Address) -> None:
        """``address`` is proven (an allow completed) or chosen by us: no limit from now on."""
        self.validated[address] = None
        self._budgets.pop(address, None)

    def forget(self, address: Address) -> None:
        """Nothing of ours lives at ``address`` any more: it must prove itself again."""
        self.validated.pop(address, None)

    def credit(self, address: Address, size: int) -> None:
        """A datagram of ``size`` bytes came from the unvalidated ``address``."""
        budgets = self._budgets
        budgets[address] = budgets.pop(address, 0) + AMPLIFICATION_FACTOR * size
        while len(budgets) > self.limit:
            budgets.popitem(last=False)

    def spend(self, address: Address, size: int) -> bool:
        """Whether ``size`` more bytes may go to the unvalidated ``address`` (and take them)."""
        left = self._budgets.get(address, 0)
        if size > left:
            return False
        self._budgets[address] = left - size
        return True

    def left(self, address: Address) -> int | None:
        """Bytes ``address`` may still be sent; None when it is validated (no limit)."""
        if address in self.validated:
            return None
        return self._budgets.get(address, 0)

    def __len__(self) -> int:
        return len(self._budgets)


class JoinRate:
    """Token buckets of join requests, one per source IP address, in a bounded table."""

    __slots__ = ("_buckets", "burst", "limit", "rate")

    def __init__(self, rate: float, burst: float, limit: int) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)
        self.limit = max(1, limit)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # host -> (tokens, at)

    def take(self, host: str, now: float) -> bool:
        """Whether a join request from ``host`` may start now (a rate of 0 or less: always)."""
        if self.rate <= 0:
            return True
        buckets = self._buckets
        tokens, at = buckets.pop(host, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        allowed = tokens >= 1.0
        buckets[host] = (tokens - 1.0 if allowed else tokens, now)
        while len(buckets) > self.limit:
            buckets.popitem(last=False)
        return allowed
