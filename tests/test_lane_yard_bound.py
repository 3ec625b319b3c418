"""The yards a lane stack knows are bounded (``LaneConfig.max_yards``): a local process
sending under ever new names makes the stack forget its least recently heard idle yards,
never grow past the bound; yards with something queued, main yards and yards others are
routed through are kept, and with no idle yard a new one is refused and counted."""
from __future__ import annotations

import pytest

from lane import LaneConfig, LaneStack, LocalYard, events
from lane.stats import Drop
from raetlike.errors import BackpressureError, LocalProtocolError
from raetlike.wire.kinds import PageKind
from raetlike.wire.page import paginate

SESSION = "01" + "c" * 16


def _stack(max_yards: int, *, main: bool = False, main_yard: str | None = None) -> LaneStack:
    return LaneStack(LocalYard("me", "lane", "/lanes", main=main),
                     LaneConfig(max_yards=max_yards, main_yard=main_yard))


def _hear(stack: LaneStack, source: str, number: int = 0, *, to: str = "me",
          path: str | None = None) -> None:
    page = paginate(source, to, SESSION, number, {"n": number}, PageKind.JSON)[0]
    stack.receive_datagram(page, path, stack.now + 1.0)


def test_a_flood_of_new_names_never_grows_the_table_past_max_yards() -> None:
    stack = _stack(64)
    for number in range(1000):
        _hear(stack, f"y{number:x}", number)
        assert len(stack.yards) <= 64
    assert stack.stats.messages_received == 1000  # idle yards make room: nobody refused
    assert stack.stats.yards_added == 1000
    assert stack.stats.yards_evicted == 1000 - 64
    assert sorted(stack.yards) == sorted(f"y{number:x}" for number in range(1000 - 64, 1000))


def test_the_default_bound_holds_against_a_flood() -> None:
    stack = LaneStack(LocalYard("me", "lane", "/lanes"))
    bound = 4096
    for number in range(bound + 100):
        _hear(stack, f"y{number:x}", number)
        while stack.next_event() is not None:
            pass
    assert len(stack.yards) == bound
    assert stack.stats.messages_received == bound + 100
    assert LaneConfig().max_yards == bound


def test_the_least_recently_heard_idle_yard_makes_room() -> None:
    stack = _stack(3)
    for name in ("a", "b", "c"):
        _hear(stack, name)
    _hear(stack, "a", 1)  # heard again: b is now the least recently heard
    _hear(stack, "d")
    assert sorted(stack.yards) == ["a", "c", "d"]
    stack.transmit({"to": "c"}, to="c")  # sending to a yard counts as hearing it
    stack.datagrams_to_send(stack.now)
    stack.handle_timer(stack.now)  # taken by the kernel: nothing queued for c any more
    _hear(stack, "e")
    assert sorted(stack.yards) == ["c", "d", "e"]


def test_yards_with_something_queued_stay_and_a_full_table_refuses_new_yards() -> None:
    stack = _stack(2)
    stack.transmit({"n": 1}, to="x")
    stack.transmit({"n": 2}, to="y")  # both wait in their outboxes
    _hear(stack, "z")
    assert sorted(stack.yards) == ["x", "y"]
    assert stack.stats.dropped[Drop.YARDS_FULL] == 1
    with pytest.raises(BackpressureError, match="max_yards"):
        stack.transmit({"n": 3}, to="w")
    with pytest.raises(BackpressureError, match="max_yards"):
        stack.add_yard("w")
    stack.datagrams_to_send(stack.now)
    stack.handle_timer(stack.now)  # the kernel took both: x and y are idle now
    _hear(stack, "z", 1)
    assert sorted(stack.yards) == ["y", "z"]
    assert stack.stats.messages_received == 1


def test_the_main_yard_is_never_forgotten() -> None:
    stack = _stack(2, main_yard="main")
    for number in range(10):
        _hear(stack, f"y{number}", number)
    assert sorted(stack.yards) == ["main", "y9"]
    stack.transmit({"n": 1}, to="elsewhere")  # an unknown yard: routed through main
    assert stack.yards["elsewhere"].via == "main"


def test_a_main_yard_routing_to_ever_new_destinations_stays_within_max_yards() -> None:
    stack = _stack(3, main=True)
    sender = "/lanes/lane.a.uxd"
    for number in range(10):  # each routed page waits for its destination: no idle yard
        _hear(stack, "a", number, to=f"d{number}", path=sender)
    assert sorted(stack.yards) == ["a", "d0", "d1"]
    assert stack.stats.pages_forwarded == 2
    assert stack.stats.dropped[Drop.YARDS_FULL] == 8


def test_a_yard_admitted_again_after_being_forgotten_gets_new_book_ids() -> None:
    stack = _stack(1)
    _hear(stack, "a")
    for number in range(5):
        stack.transmit({"n": number}, to="a")
    stack.datagrams_to_send(stack.now)
    stack.handle_timer(stack.now)
    assert stack.yards["a"].last_book_id == 5
    _hear(stack, "b")  # a is forgotten
    _hear(stack, "a", 1)  # and comes back
    added = [event.yard for event in iter(stack.next_event, None)
             if isinstance(event, events.YardAdded)]
    assert added == ["a", "b", "a"]
    assert stack.yards["a"].next_book_id() == 6  # never a book id a half-read book may hold


@pytest.mark.parametrize("bad", [0, -1])
def test_max_yards_must_be_at_least_one(bad: int) -> None:
    with pytest.raises(LocalProtocolError, match="max_yards must be an int of at least 1"):
        LaneConfig(max_yards=bad)


def test_max_yards_must_be_an_int() -> None:
    # the compiled build refuses it before __post_init__, as it does any mistyped field
    with pytest.raises((LocalProtocolError, TypeError),
                       match=r"max_yards must be an int|int object expected; got str"):
        LaneConfig(max_yards="5")  # type: ignore[arg-type]


def _main(max_forward_bytes: int) -> LaneStack:
    return LaneStack(LocalYard("me", "lane", "/lanes", main=True),
                     LaneConfig(max_forward_bytes=max_forward_bytes))


def test_pages_a_main_yard_routes_hold_at_most_max_forward_bytes() -> None:
    stack = _main(20_000)
    body = {"pad": "x" * 900}
    for number in range(200):  # to made-up yards that never read: nothing is taken
        page = paginate("sender", f"nobody{number % 50}", SESSION, number, body,
                        PageKind.JSON)[0]
        stack.receive_datagram(page, None, stack.now + 0.001)
    size = len(paginate("sender", "nobody0", SESSION, 0, body, PageKind.JSON)[0])
    held = sum(len(o.pages[0]) for r in stack.yards.values() for o in r.outbox)
    assert held <= 20_000
    assert stack.stats.pages_forwarded == 20_000 // size
    assert stack.stats.dropped[Drop.FORWARD_FULL] == 200 - 20_000 // size
    # what the kernel takes (or what is given up) frees its bytes for more
    stack.datagrams_to_send(stack.now)
    stack.datagrams_to_send(stack.now)  # the first round's pages confirmed sent
    page = paginate("sender", "late", SESSION, 999, body, PageKind.JSON)[0]
    stack.receive_datagram(page, None, stack.now + 0.001)
    assert stack.stats.pages_forwarded == 20_000 // size + 1


def test_max_forward_bytes_must_be_a_whole_number() -> None:
    with pytest.raises(LocalProtocolError, match="max_forward_bytes"):
        LaneConfig(max_forward_bytes=-1)
    for bad in (1.5, None):  # the compiled class refuses the type itself (TypeError)
        with pytest.raises((LocalProtocolError, TypeError)):
            LaneConfig(max_forward_bytes=bad)  # type: ignore[arg-type]
