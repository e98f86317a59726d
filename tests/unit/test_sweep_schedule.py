"""The per-batch-size schedule a sweep derives from its lengths' measurements, and its measured comparison with
the best static setting and speculation off."""

from __future__ import annotations

from typing import Any

import pytest

from specselect._evidence.sweeps import (
    SweepPoint,
    capped_schedule,
    compare_schedule,
    cutoff_schedule,
    derive_schedule,
    schedule_ranges,
)
from specselect.records.evidence.stats import RatioEstimate
from specselect.records.evidence.sweeps import Crossover, LengthChoice, LevelVerdict

MEMBERS = {"g1.k1": 1, "g1.k3": 3, "g1.k5": 5}


def _verdict(level: int, verdict: str, low: float | None = None) -> LevelVerdict:
    return LevelVerdict(
        concurrency=level,
        verdict=verdict,  # type: ignore[arg-type]
        why="",
        speedup_point=None if low is None else low + 0.1,
        speedup_low=low,
        speedup_high=None if low is None else low + 0.2,
        meets_thresholds=verdict == "pays",
    )


def _crossover(candidate: str, workload: str, *verdicts: LevelVerdict) -> Crossover:
    return Crossover.model_construct(candidate=candidate, workload=workload, per_level=verdicts)


def _choice(workload: str, level: int, recommended: str | None) -> LengthChoice:
    return LengthChoice.model_construct(
        workload=workload, concurrency=level, recommended_candidate=recommended, best_candidate=recommended
    )


def _derive(choices: list[LengthChoice], crossovers: list[Crossover], workloads: tuple[str, ...] = ("rep",)) -> Any:
    return derive_schedule(
        "g1", MEMBERS, workloads=list(workloads), levels=[1, 2, 4], choices=choices, crossovers=crossovers
    )


def test_each_level_gets_the_recommended_length_where_it_pays_and_off_where_none_pays() -> None:
    crossovers = [
        _crossover("g1.k1", "rep", _verdict(1, "pays", 1.2), _verdict(2, "pays", 1.15), _verdict(4, "clear_stop", 0.8)),
        _crossover("g1.k3", "rep", _verdict(1, "pays", 1.6), _verdict(2, "pays", 1.3), _verdict(4, "unclear", 0.9)),
        _crossover("g1.k5", "rep", _verdict(1, "pays", 1.9), _verdict(2, "clear_stop", 1.2), _verdict(4, "clear_stop")),
    ]
    choices = [_choice("rep", 1, "g1.k5"), _choice("rep", 2, "g1.k5"), _choice("rep", 4, "g1.k3")]
    schedule = _derive(choices, crossovers)
    assert schedule.status == "derived"
    # c2: the recommended k5 failed there, so the paying length with the best lower bound (k3, 1.3) is used.
    assert [(lv.concurrency, lv.proposal_length) for lv in schedule.levels] == [(1, 5), (2, 3), (4, 0)]
    assert "g1.k3 pays with the highest speedup lower bound (1.3)" in schedule.levels[1].why
    assert schedule.ranges == ((1, 1, 5), (2, 3, 3), (4, None, 0))


def test_one_server_serves_every_workload_so_a_level_takes_the_smallest_length_and_any_loss_turns_it_off() -> None:
    crossovers = [
        _crossover("g1.k3", "rep", _verdict(1, "pays", 1.5), _verdict(2, "pays", 1.4), _verdict(4, "pays", 1.2)),
        _crossover("g1.k1", "code", _verdict(1, "pays", 1.1), _verdict(2, "pays", 1.1), _verdict(4, "clear_stop")),
    ]
    choices = [_choice("rep", c, "g1.k3") for c in (1, 2, 4)] + [_choice("code", c, "g1.k1") for c in (1, 2, 4)]
    schedule = _derive(choices, crossovers, workloads=("rep", "code"))
    assert [lv.proposal_length for lv in schedule.levels] == [1, 1, 0]
    assert schedule.ranges == ((1, 3, 1), (4, None, 0))


def test_a_sweep_where_nothing_pays_derives_no_schedule_to_measure() -> None:
    crossovers = [_crossover(name, "rep", _verdict(1, "clear_stop"), _verdict(2, "clear_stop")) for name in MEMBERS]
    schedule = _derive([_choice("rep", 1, None), _choice("rep", 2, None)], crossovers)
    assert schedule.status == "off_everywhere"
    assert schedule.ranges == ((1, None, 0),)
    assert "no proposal length pays" in schedule.reason
    assert "no length was measured here" in schedule.levels[2].why  # level 4 has no data at all


def test_batch_size_ranges_start_at_one_and_the_top_level_holds_above_it() -> None:
    assert schedule_ranges({2: 5, 8: 0}) == ((1, 7, 5), (8, None, 0))
    assert schedule_ranges({1: 3, 2: 3}) == ((1, None, 3),)
    assert cutoff_schedule(3, 4) == ((1, 4, 3), (5, None, 0))
    assert capped_schedule(((1, 1, 5), (2, 3, 3), (4, None, 3)), 2) == ((1, 1, 5), (2, 2, 3), (3, None, 0))


def _point(candidate: str, level: int, point: float, low: float, high: float) -> SweepPoint:
    estimate = RatioEstimate(
        metric="throughput_speedup",
        statistic="s",
        point=point,
        low=low,
        high=high,
        level=0.95,
        n_samples=16,
        n_clusters=8,
        n_dropped=0,
        method="m",
        n_resamples=100,
        seed=0,
    )
    return SweepPoint(candidate=candidate, workload="rep", concurrency=level, speedup=estimate)


def test_the_comparison_puts_the_schedule_next_to_the_best_static_setting_and_off_at_every_level() -> None:
    crossovers = [
        _crossover("g1.k3", "rep", _verdict(1, "pays", 1.5), _verdict(2, "pays", 1.3)),
        _crossover("g1.k5", "rep", _verdict(1, "pays", 1.9), _verdict(2, "clear_stop", 1.0)),
    ]
    choices = [_choice("rep", 1, "g1.k5"), _choice("rep", 2, "g1.k3")]
    schedule = derive_schedule(
        "g1", {"g1.k3": 3, "g1.k5": 5}, workloads=["rep"], levels=[1, 2], choices=choices, crossovers=crossovers
    )
    points = [
        _point("g1.k5", 1, 2.0, 1.9, 2.1),
        _point("g1.k3", 2, 1.4, 1.3, 1.5),
        _point("g1.schedule", 1, 2.0, 1.85, 2.15),
        _point("g1.schedule", 2, 1.8, 1.7, 1.9),
        _point("g9_adaptive", 1, 1.2, 1.1, 1.3),
    ]
    comparison = compare_schedule(
        "g1.schedule",
        schedule,
        {"g1.k3": 3, "g1.k5": 5},
        points=points,
        choices=choices,
        controllers={"g9_adaptive": "suffix_match_length"},
    )
    first, second = comparison.rows
    assert (first.schedule_length, first.static.candidate if first.static else None) == (5, "g1.k5")
    assert first.verdict == "no clear difference"
    assert [c.candidate for c in first.controllers] == ["g9_adaptive"]
    assert (second.schedule_length, second.verdict) == (3, "schedule clearly faster")
    assert comparison.summary == "rep-c1 k=5: no clear difference; rep-c2 k=3: schedule clearly faster"


def test_derive_schedule_refuses_an_empty_sweep() -> None:
    with pytest.raises(ValueError, match="members"):
        derive_schedule("g1", {}, workloads=["rep"], levels=[1], choices=[], crossovers=[])
