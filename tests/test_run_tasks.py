"""Micro-threads on the cooperative loop, on virtual time (no sockets, no sleeps)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raetlike.run import Loop, Signal, TaskBody, Until
from tests.runkit import VirtualClock, VirtualSelector


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=100.0)


@pytest.fixture
def selector(clock: VirtualClock) -> VirtualSelector:
    return VirtualSelector(clock)


@pytest.fixture
def loop(clock: VirtualClock, selector: VirtualSelector) -> Iterator[Loop]:
    loop = Loop(clock, selector)
    yield loop
    loop.close()


def test_a_task_sleeping_resumes_exactly_at_its_deadline_after_one_wait(
        loop: Loop, clock: VirtualClock, selector: VirtualSelector) -> None:
    def sleeper() -> TaskBody:
        woke = yield 5.0
        return woke

    assert loop.run_task(sleeper()) == 105.0
    assert clock.now == 105.0
    assert selector.waits == [0.0, 5.0]  # the first round starts the task; then one sleep


def test_tasks_interleave_in_deadline_order(loop: Loop, clock: VirtualClock) -> None:
    trace: list[tuple[str, float]] = []

    def ticker(name: str, period: float, count: int) -> TaskBody:
        for _ in range(count):
            now = yield period
            trace.append((name, now - 100.0))

    loop.spawn(ticker("fast", 1.0, 3))
    slow = loop.spawn(ticker("slow", 1.5, 2))
    loop.run_task(iter_until(slow))
    assert trace == [("fast", 1.0), ("slow", 1.5), ("fast", 2.0), ("fast", 3.0), ("slow", 3.0)]


def iter_until(task: object) -> TaskBody:
    """A task that waits for ``task`` to end."""
    yield task


def test_a_signal_wakes_its_waiter_in_the_same_round_with_its_value(
        loop: Loop, clock: VirtualClock) -> None:
    signal = Signal()
    got: list[object] = []

    def waiter() -> TaskBody:
        value = yield signal
        got.append((value, clock.now))

    def setter() -> TaskBody:
        yield 2.0
        signal.set("hello")

    loop.spawn(waiter())
    loop.run_task(setter())
    loop.run_once(max_wait=0.0)
    assert got == [("hello", 102.0)]


def test_waiting_on_a_task_gives_its_result_or_raises_its_error(loop: Loop) -> None:
    def worker(fail: bool) -> TaskBody:
        yield 1.0
        if fail:
            raise ValueError("worker failed")
        return 42

    def boss() -> TaskBody:
        good = yield loop.spawn(worker(fail=False))
        try:
            yield loop.spawn(worker(fail=True))
        except ValueError as exc:
            return good, str(exc)
        return good, "no error"

    assert loop.run_task(boss()) == (42, "worker failed")


def test_until_resumes_when_its_predicate_holds_or_false_at_its_timeout(
        loop: Loop, clock: VirtualClock) -> None:
    box: list[int] = []

    def filler() -> TaskBody:
        yield 3.0
        box.append(1)

    def watcher() -> TaskBody:
        first = yield Until(lambda: bool(box), timeout=10.0)
        at_first = clock.now
        second = yield Until(lambda: len(box) > 1, timeout=4.0)
        return first, at_first, second, clock.now

    loop.spawn(filler())
    assert loop.run_task(watcher()) == (True, 103.0, False, 107.0)


def test_a_task_yielding_none_runs_once_per_round_not_in_a_spin(loop: Loop) -> None:
    rounds: list[int] = []

    def spinner() -> TaskBody:
        for _ in range(3):
            rounds.append(loop.rounds)
            yield None

    loop.run_task(spinner())
    assert rounds == sorted(set(rounds))
    assert len(rounds) == 3


def test_a_task_yielding_nonsense_fails_with_a_type_error(loop: Loop) -> None:
    def confused() -> TaskBody:
        yield "soon"

    with pytest.raises(TypeError, match="yielded 'soon'"):
        loop.run_task(confused())


def test_run_task_raises_timeout_for_a_task_that_never_ends(
        loop: Loop, clock: VirtualClock) -> None:
    def forever() -> TaskBody:
        while True:
            yield 60.0

    with pytest.raises(TimeoutError):
        loop.run_task(forever(), timeout=300.0)
    assert clock.now == pytest.approx(400.0)


def test_an_idle_loop_sleeps_in_one_long_wait(loop: Loop, selector: VirtualSelector) -> None:
    loop.run_once()
    assert selector.waits == [3600.0]
