"""Concurrency crossover and the early-stop rule, on constructed speedup estimates."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specselect._core.decision import CHECK_NAMES, Confidence, DecisionResult, Thresholds
from specselect._core.status import Decision, EvidenceStatus
from specselect._evidence import SweepPoint, clearly_losing, early_stop_reason, find_crossover
from specselect.records.evidence.stats import RatioEstimate
from specselect.records.evidence.sweeps import Crossover, CrossoverRule


def est(point: float | None, low: float | None = None, high: float | None = None) -> RatioEstimate:
    return RatioEstimate(
        metric="throughput_speedup",
        statistic="ratio_of_totals(tokens/e2e_s)",
        point=point,
        low=low,
        high=high,
        level=0.95,
        n_samples=30,
        n_clusters=10,
        n_dropped=0,
        method="paired_cluster_bootstrap_percentile" if low is not None else "none",
        n_resamples=2000,
        seed=0,
        reason=None if low is not None else "too_few_clusters",
    )


def pt(
    c: int,
    speedup: RatioEstimate,
    meets: bool | None = None,
    decision: DecisionResult | None = None,
    candidate: str = "ngram",
) -> SweepPoint:
    return SweepPoint(
        candidate=candidate,
        workload="general",
        concurrency=c,
        speedup=speedup,
        meets_thresholds=meets,
        decision=decision,
    )


def tune(reason: str, failed: tuple[str, ...] = (), confidence: str = "not_assessed") -> DecisionResult:
    return DecisionResult(
        decision=Decision.TUNE,
        reason=reason,
        policy=Thresholds(),
        checks=dict.fromkeys(CHECK_NAMES),
        confidence=Confidence.model_validate({"status": confidence}),
        evidence_status=EvidenceStatus.COMPARABLE,
        failed_checks=failed,
    )


PAYS = est(1.4, 1.25, 1.55)
FLAT = est(1.0, 0.94, 1.06)
LOSES = est(0.8, 0.72, 0.9)


def test_clear_crossover_reports_cut_off_and_both_sides() -> None:
    points = [
        pt(1, PAYS, True),
        pt(2, est(1.2, 1.12, 1.3), True),
        pt(4, LOSES, False),
        pt(8, est(0.6, 0.5, 0.7), False),
    ]
    result = find_crossover(points)
    assert result.status == "crossover"
    assert (result.pays_up_to, result.crossover_at) == (2, 4)
    assert result.interval_before == points[1].speedup
    assert result.interval_at_crossover == points[2].speedup
    assert result.recommendation == "enable up to 2 concurrent requests"
    assert result.levels == (1, 2, 4, 8)
    assert "pays_up_to" in result.rule and result.level_rule == CrossoverRule()
    assert [v.verdict for v in result.per_level] == ["pays", "pays", "clear_stop", "clear_stop"]


def test_pays_at_all_levels_needs_no_cut_off() -> None:
    result = find_crossover([pt(c, PAYS, True) for c in (1, 2, 4, 8, 16, 32)])
    assert result.status == "pays_at_all_levels"
    assert (result.pays_up_to, result.crossover_at) == (32, None)
    assert result.recommendation == "no cut-off needed up to 32 concurrent requests"
    assert result.interval_before == PAYS and result.interval_at_crossover is None


def test_never_pays_crosses_at_the_lowest_level() -> None:
    result = find_crossover([pt(c, LOSES, False) for c in (1, 4, 16)])
    assert result.status == "never_pays"
    assert (result.pays_up_to, result.crossover_at) == (None, 1)
    assert result.interval_before is None and result.interval_at_crossover == LOSES
    assert result.recommendation == "do not enable"


@pytest.mark.parametrize("meets", [None, False])
def test_flat_around_one_is_no_clear_difference(meets: bool | None) -> None:
    # meets=False is what a 'tune: below_min_speedup' decision gives on flat data: not a clear stop.
    points = [pt(c, est(1.0 + d, 0.9 + d, 1.1 + d), meets) for c, d in ((1, 0.02), (2, -0.01), (4, 0.0))]
    result = find_crossover(points)
    assert result.status == "no_clear_difference"
    assert (result.pays_up_to, result.crossover_at) == (None, None)
    assert result.recommendation == "do not enable"
    assert "no clear difference" in result.reason


def test_noisy_non_monotone_cuts_at_first_clear_loss_and_says_so() -> None:
    points = [pt(1, PAYS, True), pt(2, LOSES, False), pt(4, PAYS, True), pt(8, LOSES, False)]
    result = find_crossover(points)
    assert result.status == "crossover"
    assert (result.pays_up_to, result.crossover_at) == (1, 2)
    assert "non-monotone" in result.reason and "[4]" in result.reason
    assert result.recommendation == "enable up to 1 concurrent request"


def test_paying_above_an_unclear_level_is_not_enabled() -> None:
    result = find_crossover([pt(1, PAYS, True), pt(2, FLAT, None), pt(4, PAYS, True), pt(8, LOSES, False)])
    assert (result.pays_up_to, result.crossover_at) == (1, 8)
    assert "pays at [4] but a lower level does not pay" in result.reason


@pytest.mark.parametrize(
    ("speedup", "meets", "status", "recommendation"),
    [
        (PAYS, True, "pays_at_all_levels", "no cut-off needed up to 4 concurrent requests"),
        (LOSES, False, "never_pays", "do not enable"),
        (FLAT, None, "no_clear_difference", "do not enable"),
        (est(None), None, "insufficient_data", "no recommendation: insufficient data"),
    ],
)
def test_single_level(speedup: RatioEstimate, meets: bool | None, status: str, recommendation: str) -> None:
    result = find_crossover([pt(4, speedup, meets)])
    assert result.status == status
    assert result.recommendation == recommendation
    assert result.levels == (4,)


def test_point_estimate_without_interval_is_never_clear() -> None:
    # A point of 0.5 looks terrible, but without an interval it neither pays nor clearly stops.
    assert not clearly_losing(est(0.5))
    result = find_crossover([pt(1, PAYS, None), pt(2, est(0.5), None), pt(4, est(0.4), False)])
    assert result.status == "crossover"
    assert (result.pays_up_to, result.crossover_at) == (1, None)
    assert "inconclusive" in result.reason
    assert [v.verdict for v in result.per_level] == ["pays", "unclear", "unclear"]
    assert find_crossover([pt(1, est(0.5)), pt(2, est(0.6))]).status == "no_clear_difference"


def test_missing_estimates_everywhere_is_insufficient_data() -> None:
    result = find_crossover([pt(1, est(None)), pt(2, est(None))])
    assert result.status == "insufficient_data"
    assert result.pays_up_to is None and result.crossover_at is None


def test_unsorted_input_gives_the_same_answer() -> None:
    points = [pt(8, LOSES, False), pt(1, PAYS, True), pt(4, FLAT, False), pt(2, PAYS, True)]
    assert find_crossover(points) == find_crossover(sorted(points, key=lambda p: p.concurrency))
    assert find_crossover(points).levels == (1, 2, 4, 8)


def test_undecided_level_pays_only_with_interval_above_one() -> None:
    result = find_crossover([pt(1, est(1.3, 1.05, 1.5)), pt(2, est(1.3, 0.98, 1.5))])
    assert [v.verdict for v in result.per_level] == ["pays", "unclear"]


def test_threshold_failure_is_a_clear_stop_when_definite() -> None:
    faster = est(1.3, 1.2, 1.4)
    ttft = tune("ttft_regression", ("max_ttft_regression_ratio",))
    result = find_crossover([pt(1, PAYS, True), pt(4, faster, False, decision=ttft)])
    assert (result.status, result.crossover_at) == ("crossover", 4)
    assert "max_ttft_regression_ratio" in result.per_level[1].why
    # Not confident about the speedup threshold: uncertain, so no clear stop.
    shaky = tune("insufficient_confidence", (), "insufficient")
    result = find_crossover([pt(1, PAYS, True), pt(4, faster, False, decision=shaky)])
    assert (result.pays_up_to, result.crossover_at) == (1, None)
    confident = tune("below_min_speedup", ("min_throughput_speedup",), "confident")
    assert (
        find_crossover([pt(1, PAYS, True), pt(4, est(1.04, 1.02, 1.06), False, decision=confident)]).crossover_at == 4
    )


def test_threshold_failure_without_decision_counts_unless_interval_crosses_one() -> None:
    assert find_crossover([pt(1, PAYS, True), pt(2, est(1.3, 1.2, 1.4), False)]).crossover_at == 2
    assert find_crossover([pt(1, PAYS, True), pt(2, FLAT, False)]).crossover_at is None


def test_rule_can_ignore_threshold_failures_and_records_it() -> None:
    rule = CrossoverRule(threshold_failure_stops=False)
    result = find_crossover([pt(1, PAYS, True), pt(2, est(1.3, 1.2, 1.4), False)], level_rule=rule)
    assert result.crossover_at is None and result.level_rule == rule
    assert "(off)" in result.rule


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError, match="no sweep points"):
        find_crossover([])
    with pytest.raises(ValueError, match="several candidates"):
        find_crossover([pt(1, PAYS), pt(2, PAYS, candidate="suffix")])
    with pytest.raises(ValueError, match="duplicate concurrency"):
        find_crossover([pt(1, PAYS), pt(1, LOSES)])
    with pytest.raises(ValueError, match="contradicts decision"):
        pt(1, PAYS, True, decision=tune("ttft_regression"))


def test_crossover_round_trips_through_json() -> None:
    result = find_crossover([pt(1, PAYS, True), pt(2, LOSES, False)])
    assert Crossover.model_validate_json(result.model_dump_json()) == result
    assert result.schema_version == 1


def test_early_stop_only_on_interval_entirely_below_one() -> None:
    assert clearly_losing(LOSES)
    assert not clearly_losing(FLAT) and not clearly_losing(PAYS) and not clearly_losing(est(None))
    assert not clearly_losing(est(0.99, 0.9, 1.0))  # high == 1.0 is not below it
    reason = early_stop_reason(pt(4, LOSES, False))
    assert reason is not None and reason.startswith("clearly_losing:")
    assert "concurrency 4" in reason and "ngram" in reason and "[0.72, 0.9]" in reason
    assert early_stop_reason(pt(4, est(0.3), False)) is None
    assert early_stop_reason(pt(4, FLAT, False)) is None


level_estimates = st.sampled_from([PAYS, FLAT, LOSES, est(0.5), est(None), est(1.3, 1.2, 1.4)])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(level_estimates, st.sampled_from([None, True, False])), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_crossover_invariants(levels: list[tuple[RatioEstimate, bool | None]], rnd: random.Random) -> None:
    points = [pt(2**i, speedup, meets) for i, (speedup, meets) in enumerate(levels)]
    shuffled = list(points)
    rnd.shuffle(shuffled)
    result = find_crossover(shuffled)
    assert result == find_crossover(points)
    if result.pays_up_to is not None and result.crossover_at is not None:
        assert result.pays_up_to < result.crossover_at
    assert (result.status == "pays_at_all_levels") == (result.pays_up_to == points[-1].concurrency)
    assert result.recommendation.startswith("enable up to") == (
        result.status == "crossover" and result.pays_up_to is not None
    )
    if result.crossover_at is not None:
        assert result.interval_at_crossover is not None
        stop = next(v for v in result.per_level if v.concurrency == result.crossover_at)
        assert stop.verdict == "clear_stop"
        assert all(v.verdict != "clear_stop" for v in result.per_level if v.concurrency < result.crossover_at)
