"""The decision rule (contract section 5), confidence guard and per-scenario verdict."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from specselect.core import (
    CHECK_NAMES,
    Decision,
    DecisionResult,
    EvidenceStatus,
    PairEvidence,
    RunStatus,
    SpeedupInterval,
    Thresholds,
    decide,
    summarize_verdict,
)
from specselect.core.decision import NOISE_FLOOR_CHECK, WITHIN_NOISE_FLOOR, NoiseFloor

DEFAULT = Thresholds()


def comparable(**changes: Any) -> PairEvidence:
    fields: dict[str, Any] = {
        "evidence_status": "comparable",
        "candidate_run_status": "completed",
        "throughput_speedup": 1.3,
        "ttft_ratio": 1.0,
        "e2e_p95_ratio": 0.9,
        "candidate_peak_memory_mb": 6000.0,
        "quality_ok": True,
    }
    return PairEvidence.model_validate({**fields, **changes})


def interval(low: float, high: float, n: int = 20, per_repeat: int | None = None) -> SpeedupInterval:
    return SpeedupInterval(
        low=low, high=high, level=0.95, n_samples=n, samples_per_repeat=per_repeat, method="paired_bootstrap_percentile"
    )


def test_defaults() -> None:
    assert DEFAULT.model_dump() == {
        "min_throughput_speedup": 1.10,
        "max_ttft_regression_ratio": 1.10,
        "max_e2e_p95_regression_ratio": 1.05,
        "max_peak_memory_mb": None,
    }


def test_accept_writes_policy_and_checks() -> None:
    result = decide(comparable(), DEFAULT)
    assert (result.decision, result.reason) == (Decision.ACCEPT, "meets_thresholds")
    assert result.policy == DEFAULT
    assert result.checks == {
        "quality_ok": True,
        "min_throughput_speedup": True,
        "max_ttft_regression_ratio": True,
        "max_e2e_p95_regression_ratio": True,
        "max_peak_memory_mb": None,
    }
    assert result.confidence.status == "not_assessed"
    assert result.failed_checks == ()


def test_thresholds_are_inclusive() -> None:
    policy = Thresholds(max_peak_memory_mb=6000.0)
    edge = comparable(throughput_speedup=1.10, ttft_ratio=1.10, e2e_p95_ratio=1.05, candidate_peak_memory_mb=6000.0)
    result = decide(edge, policy)
    assert result.decision is Decision.ACCEPT
    assert result.checks["max_peak_memory_mb"] is True


@pytest.mark.parametrize(
    ("changes", "reason", "failed"),
    [
        ({"throughput_speedup": 1.05}, "below_min_speedup", ("min_throughput_speedup",)),
        ({"ttft_ratio": 1.2}, "ttft_regression", ("max_ttft_regression_ratio",)),
        ({"e2e_p95_ratio": 1.06}, "e2e_p95_regression", ("max_e2e_p95_regression_ratio",)),
        ({"candidate_peak_memory_mb": 8001.0}, "memory_over_budget", ("max_peak_memory_mb",)),
        (
            {"throughput_speedup": 0.5, "ttft_ratio": 2.0, "e2e_p95_ratio": 2.0, "candidate_peak_memory_mb": 9e3},
            "below_min_speedup+ttft_regression+e2e_p95_regression+memory_over_budget",
            CHECK_NAMES[1:],
        ),
        ({"ttft_ratio": 1.2, "candidate_peak_memory_mb": 9e3}, "ttft_regression+memory_over_budget", None),
    ],
)
def test_failed_thresholds_tune_naming_each_failure(
    changes: dict[str, Any], reason: str, failed: tuple[str, ...] | None
) -> None:
    result = decide(comparable(**changes), Thresholds(max_peak_memory_mb=8000.0))
    assert (result.decision, result.reason) == (Decision.TUNE, reason)
    if failed is not None:
        assert result.failed_checks == failed
    assert all(result.checks[name] is False for name in result.failed_checks)
    assert result.detail


def test_the_memory_check_names_the_figure_it_compared_and_only_when_it_compared_one() -> None:
    budget = Thresholds(max_peak_memory_mb=8000.0)
    over = decide(comparable(candidate_peak_memory_mb=9000.0, candidate_peak_memory_figure="device_memory"), budget)
    assert (over.reason, over.memory_figure) == ("memory_over_budget", "device_memory")
    assert over.detail == "max_peak_memory_mb: 9000 > 8000 (device_memory)"
    fits = decide(comparable(candidate_peak_memory_figure="host_rss"), budget)
    assert (fits.decision, fits.memory_figure) == (Decision.ACCEPT, "host_rss")
    # No budget: nothing was compared, so no figure is claimed.
    assert decide(comparable(candidate_peak_memory_figure="host_rss"), DEFAULT).memory_figure is None


def test_quality_comes_before_speed() -> None:
    result = decide(comparable(throughput_speedup=3.0, quality_ok=False), DEFAULT, interval(2.5, 3.5))
    assert (result.decision, result.reason) == (Decision.REJECT, "quality_failed")
    assert result.checks["quality_ok"] is False
    assert result.confidence.status == "not_assessed"


def test_incomplete_is_tune_saying_what_is_missing() -> None:
    evidence = PairEvidence(
        evidence_status=EvidenceStatus.INCOMPLETE,
        missing_evidence=("observed_speculative_proposals", "ttft_p95_ms"),
        missing_detail=("observed_speculative_proposals", "candidate.ttft_p95_ms"),
        candidate_run_status=RunStatus.COMPLETED,
    )
    result = decide(evidence, DEFAULT, interval(1.2, 1.4))
    assert (result.decision, result.reason) == (Decision.TUNE, "incomplete_evidence")
    assert result.missing_evidence == ("observed_speculative_proposals", "ttft_p95_ms")
    assert "candidate.ttft_p95_ms" in result.detail
    assert set(result.checks.values()) == {None}
    assert result.confidence.status == "not_assessed"
    assert result.confidence.interval is not None


@pytest.mark.parametrize(
    ("status", "reason"),
    [(EvidenceStatus.NOT_EVALUATED, "evidence_not_evaluated"), (EvidenceStatus.INCOMPARABLE, "incomparable_evidence")],
)
def test_not_comparable_is_not_evaluated(status: EvidenceStatus, reason: str) -> None:
    evidence = PairEvidence(evidence_status=status, candidate_run_status=RunStatus.CAPACITY_BLOCKED)
    result = decide(evidence, DEFAULT)
    assert (result.decision, result.reason) == (Decision.NOT_EVALUATED, reason)
    assert set(result.checks) == set(CHECK_NAMES)
    assert set(result.checks.values()) == {None}


def test_confident_accept() -> None:
    result = decide(comparable(), DEFAULT, interval(1.15, 1.45))
    assert (result.decision, result.reason, result.confidence.status) == (
        Decision.ACCEPT,
        "meets_thresholds",
        "confident",
    )
    assert result.confidence.extra_repeats_estimate is None


@pytest.mark.parametrize(
    ("n", "per_repeat", "extra"),
    [
        # point 1.3, low 1.0, threshold 1.1: the lower half-width 0.3 must shrink to 0.2 -> n * 2.25 samples.
        (20, 10, 3),  # 45 samples needed, 25 more, 10 per repeat
        (4, None, 5),  # each sample is one repeat: 9 needed
        (8, 1, 10),  # 18 needed
    ],
)
def test_insufficient_confidence_with_extra_repeats(n: int, per_repeat: int | None, extra: int) -> None:
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, interval(1.0, 1.6, n, per_repeat))
    assert (result.decision, result.reason) == (Decision.TUNE, "insufficient_confidence")
    assert result.confidence.status == "insufficient"
    assert result.confidence.extra_repeats_estimate == extra
    assert all(value in (True, None) for value in result.checks.values())


def test_extra_repeats_project_from_the_interval_point_when_given() -> None:
    own_point = interval(1.0, 1.6, 4).model_copy(update={"point": 1.3})
    result = decide(comparable(throughput_speedup=1.2), DEFAULT, own_point)
    assert result.confidence.extra_repeats_estimate == 5
    below = interval(1.0, 1.6, 4).model_copy(update={"point": 1.05})
    assert decide(comparable(throughput_speedup=1.2), DEFAULT, below).confidence.extra_repeats_estimate is None


def test_extra_repeats_null_when_point_at_threshold_or_unbounded() -> None:
    at_threshold = decide(comparable(throughput_speedup=1.10), DEFAULT, interval(1.0, 1.2))
    assert at_threshold.reason == "insufficient_confidence"
    assert at_threshold.confidence.extra_repeats_estimate is None
    barely = decide(comparable(throughput_speedup=1.1 + 1e-12), DEFAULT, interval(0.5, 1.7))
    assert barely.reason == "insufficient_confidence"
    assert barely.confidence.extra_repeats_estimate is None


def test_net_slowdown() -> None:
    result = decide(comparable(throughput_speedup=0.8), DEFAULT, interval(0.7, 0.95))
    assert (result.decision, result.reason) == (Decision.TUNE, "net_slowdown")
    assert result.failed_checks == ("min_throughput_speedup",)
    assert result.confidence.status == "confident"


def test_tune_with_interval_reaching_one_keeps_the_check_reason() -> None:
    straddling = decide(comparable(throughput_speedup=1.05), DEFAULT, interval(0.9, 1.2))
    assert (straddling.reason, straddling.confidence.status) == ("below_min_speedup", "insufficient")
    clear_speed = decide(comparable(ttft_ratio=1.5), DEFAULT, interval(1.2, 1.4))
    assert (clear_speed.reason, clear_speed.confidence.status) == ("ttft_regression", "confident")


@pytest.mark.parametrize(
    "fields",
    [
        {"min_throughput_speedup": math.nan},
        {"max_ttft_regression_ratio": 0.0},
        {"max_e2e_p95_regression_ratio": -1.0},
        {"max_peak_memory_mb": math.inf},
        {"min_throughput_speedup": "1.1"},
        {"unknown": 1.0},
    ],
)
def test_thresholds_refuse_nonsense(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Thresholds.model_validate(fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"low": 1.2, "high": 1.1},
        {"level": 1.5},
        {"n_samples": 0},
        {"low": math.nan},
        {"samples_per_repeat": 0},
        {"method": ""},
    ],
)
def test_interval_refuses_nonsense(fields: dict[str, Any]) -> None:
    good: dict[str, Any] = {"low": 1.0, "high": 1.2, "level": 0.95, "n_samples": 10, "method": "m"}
    with pytest.raises(ValidationError):
        SpeedupInterval.model_validate({**good, **fields})


def test_result_round_trips_through_json() -> None:
    result = decide(comparable(), Thresholds(max_peak_memory_mb=7000.0), interval(1.0, 1.6, 20, 10))
    assert DecisionResult.model_validate_json(result.model_dump_json()) == result


def test_summarize_verdict_is_per_scenario_and_stable() -> None:
    accept = decide(comparable(), DEFAULT)
    tune = decide(comparable(throughput_speedup=1.0), DEFAULT)
    reject = decide(comparable(quality_ok=False), DEFAULT)
    decisions = {"general-c4": tune, "repetition-c1": accept, "general-c1": tune, "long-c1": reject}
    expected = "accept for repetition-c1, tune for general-c1, tune for general-c4, reject for long-c1"
    assert summarize_verdict(decisions) == expected
    assert summarize_verdict(dict(reversed(decisions.items()))) == expected
    assert summarize_verdict({"general-c1": tune, "repetition-c1": accept}) == (
        "accept for repetition-c1, tune for general-c1"
    )
    assert summarize_verdict({}) == "no scenarios decided"


AA = NoiseFloor(spread_log=math.log(1.15), level=0.95, method="two_stage_bootstrap_t")
"""An A/A band of +-15%: the baseline showed up to 1.15x against an independent launch of itself."""


def test_without_a_noise_floor_the_checks_are_unchanged() -> None:
    result = decide(comparable(), DEFAULT, interval(1.2, 1.4))
    assert NOISE_FLOOR_CHECK not in result.checks
    assert set(result.checks) == set(CHECK_NAMES)


def test_a_point_inside_the_aa_band_is_within_noise_floor_before_anything_else() -> None:
    result = decide(comparable(throughput_speedup=1.12), DEFAULT, interval(1.11, 1.13), noise_floor=AA)
    assert (result.decision, result.reason) == (Decision.TUNE, WITHIN_NOISE_FLOOR)
    assert result.checks[NOISE_FLOOR_CHECK] is False
    assert result.failed_checks == (NOISE_FLOOR_CHECK,)
    assert result.confidence.status == "insufficient"
    assert result.confidence.extra_repeats_estimate is None
    assert result.detail.startswith("speedup point 1.12 <= 1.15")


def test_an_interval_low_inside_the_aa_band_refuses_accept_even_above_the_threshold() -> None:
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, interval(1.12, 1.5), noise_floor=AA)
    assert (result.decision, result.reason) == (Decision.TUNE, WITHIN_NOISE_FLOOR)
    assert result.detail.startswith("speedup interval low 1.12 <= 1.15")


def test_an_interval_clear_of_the_aa_band_and_the_threshold_is_accepted_and_says_so() -> None:
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, interval(1.2, 1.4), noise_floor=AA)
    assert (result.decision, result.reason) == (Decision.ACCEPT, "meets_thresholds")
    assert result.checks[NOISE_FLOOR_CHECK] is True
    assert set(result.checks) == {*CHECK_NAMES, NOISE_FLOOR_CHECK}


def test_a_point_outside_the_band_with_a_low_below_the_threshold_needs_more_repeats_not_launches() -> None:
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, interval(1.05, 1.5), noise_floor=AA)
    assert result.reason == "insufficient_confidence"
    assert result.checks[NOISE_FLOOR_CHECK] is False


def test_without_an_interval_the_point_is_judged_against_the_band() -> None:
    inside = decide(comparable(throughput_speedup=1.14), DEFAULT, noise_floor=AA)
    outside = decide(comparable(throughput_speedup=1.2), DEFAULT, noise_floor=AA)
    assert (inside.reason, inside.confidence.status) == (WITHIN_NOISE_FLOOR, "not_assessed")
    assert (outside.decision, outside.checks[NOISE_FLOOR_CHECK]) == (Decision.ACCEPT, True)


def test_the_band_judges_the_intervals_own_point_when_it_carries_one() -> None:
    own = SpeedupInterval(low=1.16, high=1.2, level=0.95, n_samples=16, method="two_stage_bootstrap_t", point=1.14)
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, own, noise_floor=AA)
    assert result.reason == WITHIN_NOISE_FLOOR
    assert result.detail.startswith("speedup point 1.14")


def test_quality_and_missing_evidence_keep_their_reasons_with_a_noise_floor() -> None:
    failed = decide(comparable(quality_ok=False), DEFAULT, noise_floor=AA)
    assert (failed.decision, failed.checks[NOISE_FLOOR_CHECK]) == (Decision.REJECT, True)
    missing = decide(PairEvidence(evidence_status=EvidenceStatus.NOT_EVALUATED), DEFAULT, noise_floor=AA)
    assert (missing.reason, missing.checks[NOISE_FLOOR_CHECK]) == ("evidence_not_evaluated", None)
    slow = decide(comparable(throughput_speedup=0.8), DEFAULT, interval(0.7, 0.9), noise_floor=AA)
    assert slow.reason == "net_slowdown"


@pytest.mark.parametrize("spread", [-0.1, math.nan, math.inf])
def test_noise_floor_refuses_nonsense(spread: float) -> None:
    with pytest.raises(ValidationError):
        NoiseFloor(spread_log=spread, level=0.95, method="m")
    assert AA.band_high == pytest.approx(1.15)


TTFT, E2E = "max_ttft_regression_ratio", "max_e2e_p95_regression_ratio"


def test_an_accept_whose_ttft_interval_reaches_above_its_limit_is_a_tune_naming_the_check() -> None:
    latency = {TTFT: interval(0.95, 1.16), E2E: interval(0.8, 1.0)}
    result = decide(comparable(ttft_ratio=1.04), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert (result.decision, result.reason) == (Decision.TUNE, "insufficient_latency_confidence")
    assert result.checks[TTFT] is True  # the point passes; its interval does not
    assert result.failed_checks == ()
    assert result.confidence.status == "insufficient"
    assert result.confidence.unsettled_checks == (TTFT,)
    assert result.confidence.latency_intervals == latency
    assert result.detail == "ttft_ratio interval high 1.16 > 1.1 (point 1.04)"


def test_latency_intervals_inside_their_limits_keep_the_accept_and_are_recorded() -> None:
    latency = {TTFT: interval(0.9, 1.10), E2E: interval(0.8, 1.05)}  # the limits are inclusive
    result = decide(comparable(), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert (result.decision, result.reason) == (Decision.ACCEPT, "meets_thresholds")
    assert result.confidence.latency_intervals == latency and result.confidence.unsettled_checks == ()


def test_both_latency_checks_unsettled_are_named_in_check_order() -> None:
    latency = {E2E: interval(0.9, 1.2), TTFT: interval(0.9, 1.3)}
    result = decide(comparable(), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert result.confidence.unsettled_checks == (TTFT, E2E)
    assert result.detail == (
        "ttft_ratio interval high 1.3 > 1.1 (point 1); e2e_p95_ratio interval high 1.2 > 1.05 (point 0.9)"
    )


def test_a_latency_interval_changes_no_decision_but_an_accept() -> None:
    wide = {TTFT: interval(0.5, 2.0)}
    failing = decide(comparable(ttft_ratio=1.2), DEFAULT, interval(1.2, 1.4), latency=wide)
    assert (failing.decision, failing.reason) == (Decision.TUNE, "ttft_regression")
    slow = decide(comparable(throughput_speedup=0.8), DEFAULT, interval(0.7, 0.9), latency=wide)
    assert (slow.decision, slow.reason) == (Decision.TUNE, "net_slowdown")
    rejected = decide(comparable(quality_ok=False), DEFAULT, interval(1.2, 1.4), latency=wide)
    assert (rejected.decision, rejected.reason) == (Decision.REJECT, "quality_failed")
    assert failing.confidence.latency_intervals == slow.confidence.latency_intervals == wide


def test_a_latency_interval_for_another_check_is_refused() -> None:
    with pytest.raises(ValueError, match="min_throughput_speedup"):
        decide(comparable(), DEFAULT, interval(1.2, 1.4), latency={"min_throughput_speedup": interval(1.0, 1.2)})
