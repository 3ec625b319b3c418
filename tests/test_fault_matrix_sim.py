"""The fault matrix on the simulated link, RAET and fast mode (CI-sized; tools/fault_matrix.py
runs it full-sized and writes docs/reliability.md)."""

from __future__ import annotations

import pytest

from tests import faultkit
from tests.simlink import Impairment


@pytest.mark.parametrize("mode", faultkit.MODES)
@pytest.mark.parametrize("case", list(faultkit.impairments()))
def test_every_message_arrives_exactly_once_through_an_impaired_link(mode: str,
                                                                      case: str) -> None:
    row = faultkit.impaired_exchange(mode, case, faultkit.impairments()[case], count=100)
    assert row.ok, (row.arrived, row.figures)
    assert row.figures["tracked_after"] <= 4


@pytest.mark.parametrize("mode", faultkit.MODES)
def test_messages_queued_before_a_30_second_partition_arrive_once_after_it_heals(
        mode: str) -> None:
    row = faultkit.partition(mode, count=60)
    assert row.ok, (row.arrived, row.figures)


@pytest.mark.parametrize("mode", faultkit.MODES)
def test_an_estate_with_changed_keys_is_rejected_and_delivers_nothing(mode: str) -> None:
    row = faultkit.impersonation(mode)
    assert row.ok, row.arrived
    assert row.figures["rejected"]


@pytest.mark.parametrize("mode", faultkit.MODES)
def test_datagrams_of_an_earlier_session_replayed_deliver_nothing(mode: str) -> None:
    row = faultkit.replay(mode, count=30)
    assert row.ok, row.arrived
    assert row.figures["delivered_again"] == 0


@pytest.mark.parametrize("mode", faultkit.MODES)
def test_forged_and_truncated_datagrams_are_dropped_and_each_counted_once(mode: str) -> None:
    row = faultkit.forged_and_truncated(mode)
    assert row.ok, row.arrived
    assert row.figures["dropped"] == row.figures["injected"] > 0


@pytest.mark.parametrize("mode", faultkit.MODES)
def test_a_vacuous_join_flood_leaves_main_responsive_and_its_records_bounded(mode: str) -> None:
    row = faultkit.join_flood(mode, strangers=150, joined=5, rounds=2, cap=50)
    assert row.ok, (row.arrived, row.figures)
    assert row.figures["evicted"] > 0
    assert row.figures["peak_remotes"] <= 5 + 50


def test_the_impaired_link_really_loses_duplicates_and_corrupts() -> None:
    row = faultkit.impaired_exchange("raet", "all", Impairment(loss=0.05, duplicate=0.05,
                                                                corrupt=0.05), count=50)
    link = row.figures["link"]
    assert link["dropped"] > 0
    assert link["duplicated"] > 0
    assert link["corrupted"] > 0
