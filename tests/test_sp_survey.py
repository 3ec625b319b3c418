"""SURVEYOR/RESPONDENT: every channel asked, answers until the deadline, late ones dropped."""

from __future__ import annotations

import random

import pytest

from raetlike.errors import LocalProtocolError
from raetlike.sp import (
    Device,
    Framing,
    MemoryNetwork,
    Respondent,
    SurveyDone,
    Surveyor,
    SurveyResponse,
)


def star(count: int, survey_time: float = 10.0) -> tuple[MemoryNetwork, Surveyor, list[Respondent]]:
    network = MemoryNetwork()
    surveyor = Surveyor(name="surveyor", survey_time=survey_time, rng=random.Random(1))
    respondents = [Respondent(name=f"r{index}", rng=random.Random(index)) for index in range(count)]
    for respondent in respondents:
        network.connect(surveyor, respondent)
    return network, surveyor, respondents


def answer_all(respondents: list[Respondent]) -> int:
    answered = 0
    for respondent in respondents:
        while (survey := respondent.next_event()) is not None:
            respondent.respond(survey, respondent.name.encode() + b":" + survey.body)
            answered += 1
    return answered


def drain(surveyor: Surveyor) -> list[object]:
    events = []
    while (event := surveyor.next_event()) is not None:
        events.append(event)
    return events


def test_a_survey_reaches_every_channel_and_collects_every_answer() -> None:
    network, surveyor, respondents = star(5)
    survey_id = surveyor.survey(b"q", 0.0)
    network.run(0.0)
    assert answer_all(respondents) == 5
    network.run(1.0)
    events = drain(surveyor)
    assert sorted(events, key=repr) == sorted(
        (SurveyResponse(survey_id, f"r{index}:q".encode(), f"r{index}") for index in range(5)),
        key=repr,
    )
    assert surveyor.get_timer() == 10.0
    surveyor.handle_timer(10.0)
    assert drain(surveyor) == [SurveyDone(survey_id, 5)]
    assert surveyor.get_timer() is None


def test_responses_after_the_deadline_are_dropped_and_counted() -> None:
    network, surveyor, respondents = star(3)
    survey_id = surveyor.survey(b"q", 0.0)
    network.run(0.0)
    answer_all(respondents[:1])
    network.run(9.0)
    answer_all(respondents[1:])
    network.run(10.0)
    surveyor.handle_timer(10.0)
    network.run(11.0)
    events = drain(surveyor)
    assert events == [SurveyResponse(survey_id, b"r0:q", "r0"), SurveyDone(survey_id, 1)]
    assert surveyor.stats.late == 2


def test_the_default_survey_time_is_sixty_seconds_and_each_survey_may_set_its_own() -> None:
    network = MemoryNetwork()
    surveyor = Surveyor(name="s", rng=random.Random(1))
    network.connect(surveyor, Respondent(name="r"))
    first = surveyor.survey(b"", 5.0)
    assert surveyor.get_timer() == 65.0
    second = surveyor.survey(b"", 5.0, survey_time=2.0)
    assert surveyor.get_timer() == 7.0
    surveyor.handle_timer(7.0)
    assert drain(surveyor) == [SurveyDone(second, 0)]
    assert surveyor.in_flight() == [first]
    with pytest.raises(LocalProtocolError):
        surveyor.survey(b"", 0.0, survey_time=0.0)


def test_two_surveys_in_flight_are_told_apart_by_id() -> None:
    network, surveyor, respondents = star(2)
    first = surveyor.survey(b"one", 0.0)
    second = surveyor.survey(b"two", 0.0, survey_time=20.0)
    assert first != second
    network.run(0.0)
    answer_all(respondents)
    network.run(1.0)
    by_survey: dict[int, set[bytes]] = {first: set(), second: set()}
    for event in drain(surveyor):
        assert isinstance(event, SurveyResponse)
        by_survey[event.survey_id].add(event.body)
    assert by_survey == {first: {b"r0:one", b"r1:one"}, second: {b"r0:two", b"r1:two"}}
    surveyor.handle_timer(10.0)
    assert drain(surveyor) == [SurveyDone(first, 2)]
    surveyor.handle_timer(20.0)
    assert drain(surveyor) == [SurveyDone(second, 2)]


def test_a_cancelled_survey_takes_no_more_responses() -> None:
    network, surveyor, respondents = star(2)
    survey_id = surveyor.survey(b"q", 0.0)
    network.run(0.0)
    assert surveyor.cancel(survey_id)
    assert not surveyor.cancel(survey_id)
    assert surveyor.get_timer() is None
    answer_all(respondents)
    network.run(1.0)
    surveyor.handle_timer(100.0)
    assert drain(surveyor) == []
    assert surveyor.stats.stray == 2
    assert surveyor.stats.cancelled == 1


def test_a_respondent_can_cancel_a_survey_it_will_not_answer() -> None:
    network, surveyor, respondents = star(1)
    surveyor.survey(b"q", 0.0)
    network.run(0.0)
    survey = respondents[0].next_event()
    assert survey is not None
    assert respondents[0].cancel_survey(survey)
    with pytest.raises(LocalProtocolError):
        respondents[0].respond(survey, b"no")


@pytest.mark.parametrize("framing", list(Framing))
def test_a_survey_through_a_device_fans_out_and_answers_come_back(framing: Framing) -> None:
    network = MemoryNetwork()
    # its one channel leads to a device that stands for four respondents
    surveyor = Surveyor(
        name="surveyor", framing=framing, responses_per_channel=4, rng=random.Random(1)
    )
    device = Device(
        Respondent(name="front", raw=True, framing=framing, rng=random.Random(2)),
        Surveyor(name="back", raw=True, framing=framing, rng=random.Random(3)),
    )
    network.connect(surveyor, device.front)
    respondents = [
        Respondent(name=f"r{i}", framing=framing, rng=random.Random(i)) for i in range(4)
    ]
    for respondent in respondents:
        network.connect(device.back, respondent)
    survey_id = surveyor.survey("q" if framing is Framing.MAPPING else b"q", 0.0)
    network.run(0.0, [device])
    for respondent in respondents:
        survey = respondent.next_event()
        assert survey is not None
        assert survey.backtrace.hops == 2
        name = respondent.name
        respondent.respond(survey, name.encode() if framing is Framing.BYTES else name)
    network.run(0.0, [device])
    events = drain(surveyor)
    bodies = {event.body for event in events if isinstance(event, SurveyResponse)}
    names = {f"r{index}" for index in range(4)}
    assert bodies == (names if framing is Framing.MAPPING else {n.encode() for n in names})
    assert len(events) == 4
    assert all(
        isinstance(event, SurveyResponse) and event.survey_id == survey_id for event in events
    )
    assert device.front.outstanding() == 0


def test_a_channel_answers_a_survey_once_and_repeats_are_counted_as_duplicates() -> None:
    network, surveyor, respondents = star(3)
    survey_id = surveyor.survey(b"how many?", 0.0)
    network.run(0.0)
    to_r0 = network.channels()[1]
    assert to_r0.name == "r0"  # the surveyor's channel to r0
    stuffer = respondents[0]
    survey = stuffer.next_event()
    assert survey is not None
    stuffer.respond(survey, b"first")
    network.run(0.0)
    for index in range(99):  # the same stack, answered again and again
        surveyor.receive(to_r0, stuffer_payload(survey_id, index), 0.1)
    answer_all(respondents[1:])
    network.run(0.2)
    events = drain(surveyor)
    assert [event.channel_name for event in events if isinstance(event, SurveyResponse)] == [
        "r0", "r1", "r2"]
    assert surveyor.stats.duplicate == 99
    surveyor.handle_timer(10.0)
    assert drain(surveyor) == [SurveyDone(survey_id, 3)]


def stuffer_payload(survey_id: int, index: int) -> bytes:
    return survey_id.to_bytes(4, "big") + b"again %d" % index


def test_each_survey_keeps_its_own_count_per_channel() -> None:
    network, surveyor, respondents = star(2)
    first = surveyor.survey(b"one", 0.0)
    second = surveyor.survey(b"two", 0.0)
    network.run(0.0)
    answer_all(respondents)
    answer_all(respondents)
    network.run(0.0)
    events = drain(surveyor)
    assert sorted((e.survey_id, e.channel_name) for e in events
                  if isinstance(e, SurveyResponse)) == sorted(
        [(first, "r0"), (first, "r1"), (second, "r0"), (second, "r1")])
    assert surveyor.stats.duplicate == 0


def test_responses_per_channel_must_be_positive() -> None:
    with pytest.raises(LocalProtocolError):
        Surveyor(name="s", responses_per_channel=0)
