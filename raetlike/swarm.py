"""Many respondent estates in one process, and the surveying estate they join.

:class:`Swarm` runs ``count`` estates, each a :class:`RoadStack` with its own
UDP socket on one :class:`Loop`, each a cooked SP RESPONDENT answering every
survey from the estate it joined with ``{"estate": name, "survey": body}``.
:class:`SurveyHub` is the main estate with a cooked SURVEYOR whose channels
are the remotes it has allowed.  Used by the survey tests and
``tools/bench_bus.py``; ``python -m raetlike.swarm --count N --join HOST:PORT``
runs a swarm until SIGINT/SIGTERM (first line: ``swarm N estates``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from raetlike.channels import Hosted, RoadChannel, SpLink
from raetlike.errors import LocalProtocolError
from raetlike.run import Loop
from raetlike.sp import Framing, Respondent, Survey, SurveyDone, Surveyor, SurveyResponse
from raetlike.udp import Address, UdpDriver, parse_host_port
from raetlike.wire.kinds import AutoMode
from road import events
from road.keeping import MemoryKeep
from road.stack import LocalEstate, RoadConfig, RoadStack

__all__ = ["SurveyHub", "Swarm", "main"]

log = logging.getLogger(__name__)


class _Member:
    """One respondent estate: answers surveys from the estate it joined."""

    __slots__ = ("link", "respondent", "stack")

    def __init__(self, stack: RoadStack) -> None:
        self.stack = stack
        self.respondent = Respondent(name=stack.name, framing=Framing.MAPPING)
        self.link = SpLink(self.respondent, on_event=self._answer)

    def _answer(self, event: Any) -> None:
        if isinstance(event, Survey):
            self.respondent.respond(event, {"estate": self.stack.name, "survey": event.body})

    def on_event(self, event: Any) -> None:
        """Link the joined (main) estate as a channel once allowed."""
        if isinstance(event, events.Allowed):
            remote = self.stack.names.get(event.remote)
            if remote is not None and remote.main:
                try:
                    self.link.add_channel(RoadChannel(self.stack, event.remote))
                except LocalProtocolError:  # already linked: a re-allow
                    log.debug("swarm %s: %s already linked", self.stack.name, event.remote)


class Swarm:
    """``count`` respondent estates on one loop, joining the main estate at ``join``."""

    def __init__(self, count: int, join: Address, *, prefix: str = "r", host: str = "127.0.0.1",
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Bind ``count`` sockets on ``host`` and start joining ``join``."""
        self.clock = clock
        self.loop = Loop(clock)
        self.members: list[_Member] = []
        config = RoadConfig(auto=AutoMode.ALWAYS)
        for index in range(count):
            stack = RoadStack(LocalEstate(f"{prefix}{index}"), config,
                              MemoryKeep(AutoMode.ALWAYS), now=clock())
            member = _Member(stack)
            # alone: only its socket, timers and handler (which answers on its own stack)
            # command it, so a round visits the busy members only (docs/drivers.md)
            driver = self.loop.add(UdpDriver(Hosted(stack, [member.link]), host, 0),
                                   on_event=member.on_event, alone=True)
            stack.join(join, now=clock())
            self.loop.touch(driver)
            self.members.append(member)

    def answered(self) -> int:
        """Surveys answered so far, over all members."""
        return sum(member.respondent.stats.sent for member in self.members)


class SurveyHub:
    """A main estate whose SURVEYOR's channels are the remotes it has allowed."""

    def __init__(self, name: str = "hub", *, host: str = "127.0.0.1", port: int = 0,
                 survey_time: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        """Bind the main estate ``name`` on ``host:port``."""
        self.clock = clock
        # a swarm's members all come from one address: lift the per-address join rate
        config = RoadConfig(auto=AutoMode.ALWAYS, join_rate_per_source=1e6,
                            join_burst_per_source=1_000_000)
        self.stack = RoadStack(LocalEstate(name, main=True), config,
                               MemoryKeep(AutoMode.ALWAYS), now=clock())
        self.surveyor = Surveyor(name=name, framing=Framing.MAPPING, survey_time=survey_time)
        self.results: list[SurveyResponse | SurveyDone] = []
        self.link = SpLink(self.surveyor, on_event=self._collect)
        self.loop = Loop(clock)
        self.driver = UdpDriver(Hosted(self.stack, [self.link]), host, port)
        self.loop.add(self.driver, on_event=self._on_event)
        self.channels: set[str] = set()

    @property
    def address(self) -> Address:
        """Where the hub listens."""
        return self.driver.address

    def _collect(self, event: Any) -> None:
        if isinstance(event, SurveyResponse | SurveyDone):
            self.results.append(event)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, events.Allowed) and event.remote not in self.channels:
            self.channels.add(event.remote)
            self.link.add_channel(RoadChannel(self.stack, event.remote))

    def wait_for(self, count: int, timeout: float) -> bool:
        """Run until ``count`` remotes are channels (or ``timeout``)."""
        return self.loop.run_until(lambda: len(self.channels) >= count, timeout)

    def survey(self, body: Any, expected: int, timeout: float) -> tuple[list[SurveyResponse],
                                                                        float, bool]:
        """Survey every channel; (responses, seconds until the last one, done before deadline).

        Runs until ``expected`` responses came in or the survey ended.
        """
        start = self.clock()
        survey_id = self.surveyor.survey(body, start)
        responses: list[SurveyResponse] = []
        finished: list[SurveyDone] = []

        def collected() -> bool:
            for result in self.results:
                if isinstance(result, SurveyResponse) and result.survey_id == survey_id:
                    responses.append(result)
                elif isinstance(result, SurveyDone) and result.survey_id == survey_id:
                    finished.append(result)
            self.results.clear()
            return len(responses) >= expected or bool(finished)

        self.loop.run_until(collected, timeout)
        elapsed = self.clock() - start
        return responses, elapsed, not finished and survey_id in self.surveyor.in_flight()

    def close(self) -> None:
        """Close the stack's socket."""
        self.loop.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m raetlike.swarm --count N --join HOST:PORT [--prefix P]``."""
    parser = argparse.ArgumentParser(prog="raetlike.swarm", description=__doc__)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--join", type=parse_host_port, required=True)
    parser.add_argument("--prefix", default="r")
    args = parser.parse_args(argv)
    # a load generator: its thousand joiners' retries are not news, only errors are
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    swarm = Swarm(args.count, args.join, prefix=args.prefix)
    sys.stdout.write(f"swarm {args.count} estates\n")
    sys.stdout.flush()
    report = swarm.loop.serve()
    log.info("swarm: stopped (%s)", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
