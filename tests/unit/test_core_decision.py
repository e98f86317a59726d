"""The decision rule (contract section 5), confidence guard and per-scenario verdict."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from specselect._core import (
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
from specselect._core.decision import LATENCY_UNSETTLED, NO_INTERVAL, NO_LAUNCH_REPLICATION

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


def interval(low: float, high: float, *, rounds: bool = True, point: float | None = None) -> SpeedupInterval:
    """A paired-round interval (launch variation in it), or with `rounds=False` one round's items alone."""
    return SpeedupInterval(
        low=low, high=high, level=0.95, method="paired_rounds_t", point=point, df=4.0, launch_variance_included=rounds
    )


def test_defaults() -> None:
    assert DEFAULT.model_dump() == {
        "min_throughput_speedup": 1.10,
        "max_ttft_regression_ratio": 1.10,
        "max_e2e_p95_regression_ratio": 1.05,
        "max_peak_memory_mb": None,
        "latency_gate": "not_clearly_worse",
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
    assert result.detail == "speedup interval low 1.15 >= 1.1 (95.0%)"


def test_an_interval_across_the_minimum_is_insufficient_confidence() -> None:
    result = decide(comparable(throughput_speedup=1.3), DEFAULT, interval(1.0, 1.6))
    assert (result.decision, result.reason) == (Decision.TUNE, "insufficient_confidence")
    assert result.confidence.status == "insufficient"
    assert all(value in (True, None) for value in result.checks.values())


def test_one_rounds_interval_cannot_accept_however_far_above_the_minimum() -> None:
    result = decide(comparable(throughput_speedup=2.6), DEFAULT, interval(2.4, 2.8, rounds=False))
    assert (result.decision, result.reason) == (Decision.TUNE, NO_LAUNCH_REPLICATION)
    assert result.confidence.status == "insufficient"
    assert result.detail == "speedup interval low 2.4 >= 1.1 from one round's items alone"


def test_one_rounds_interval_below_the_minimum_still_settles_a_tune() -> None:
    result = decide(comparable(throughput_speedup=0.8), DEFAULT, interval(0.7, 0.9, rounds=False))
    assert (result.reason, result.confidence.status) == ("net_slowdown", "confident")


def test_an_interval_is_required_when_asked_for() -> None:
    assert decide(comparable(), DEFAULT).decision is Decision.ACCEPT  # the contract's points alone
    result = decide(comparable(), DEFAULT, require_interval=True)
    assert (result.decision, result.reason) == (Decision.TUNE, NO_INTERVAL)


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
        {"df": 0.0},
        {"low": math.nan},
        {"level": 1.0},
        {"method": ""},
    ],
)
def test_interval_refuses_nonsense(fields: dict[str, Any]) -> None:
    good: dict[str, Any] = {"low": 1.0, "high": 1.2, "level": 0.95, "method": "m"}
    with pytest.raises(ValidationError):
        SpeedupInterval.model_validate({**good, **fields})


def test_result_round_trips_through_json() -> None:
    result = decide(comparable(), Thresholds(max_peak_memory_mb=7000.0), interval(1.0, 1.6))
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


TTFT, E2E = "max_ttft_regression_ratio", "max_e2e_p95_regression_ratio"


SHOWN = Thresholds(latency_gate="shown_within")


def test_a_mean_ratio_clearly_above_its_limit_is_a_tune_of_its_own_under_either_gate() -> None:
    latency = {TTFT: interval(1.15, 1.4, point=1.27), E2E: interval(0.8, 1.0)}
    for policy in (DEFAULT, SHOWN):
        result = decide(comparable(ttft_ratio=1.04), policy, interval(1.2, 1.4), latency=latency)
        assert (result.decision, result.reason) == (Decision.TUNE, "ttft_mean_regression")
        assert result.failed_checks == ("ttft_mean_gate",)
        assert result.checks["ttft_mean_gate"] is False and result.checks["e2e_mean_gate"] is True
        assert result.detail == "ttft_mean_gate: interval low 1.15 > max_ttft_regression_ratio (point 1.27)"


def test_not_clearly_worse_lets_an_interval_across_the_limit_pass() -> None:
    latency = {TTFT: interval(0.95, 1.16), E2E: interval(0.8, 1.0)}
    result = decide(comparable(ttft_ratio=1.04), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert (result.decision, result.reason) == (Decision.ACCEPT, "meets_thresholds")
    assert result.confidence.latency_gate == "not_clearly_worse"
    assert result.confidence.latency_intervals == latency


def test_shown_within_holds_an_accept_back_while_an_interval_reaches_above_its_limit() -> None:
    latency = {TTFT: interval(0.95, 1.16, point=1.04), E2E: interval(0.8, 1.0)}
    result = decide(comparable(ttft_ratio=1.04), SHOWN, interval(1.2, 1.4), latency=latency)
    assert (result.decision, result.reason) == (Decision.TUNE, LATENCY_UNSETTLED)
    assert result.checks[TTFT] is True  # the p95 point passes; the mean's interval does not show it
    assert result.checks["ttft_mean_gate"] is False
    assert result.failed_checks == ()
    assert result.confidence.status == "insufficient"
    assert result.confidence.unsettled_checks == (TTFT,)
    assert result.detail == "ttft_mean_gate: interval high 1.16 > max_ttft_regression_ratio (point 1.04)"


def test_latency_intervals_inside_their_limits_keep_the_accept_and_are_recorded() -> None:
    latency = {TTFT: interval(0.9, 1.10), E2E: interval(0.8, 1.05)}  # the limits are inclusive
    result = decide(comparable(), SHOWN, interval(1.2, 1.4), latency=latency)
    assert (result.decision, result.reason) == (Decision.ACCEPT, "meets_thresholds")
    assert result.confidence.latency_intervals == latency and result.confidence.unsettled_checks == ()


def test_both_latency_gates_unsettled_are_named_in_check_order() -> None:
    latency = {E2E: interval(0.9, 1.2), TTFT: interval(0.9, 1.3)}
    result = decide(comparable(), SHOWN, interval(1.2, 1.4), latency=latency)
    assert result.confidence.unsettled_checks == (TTFT, E2E)


def test_a_clearly_worse_mean_joins_the_failed_point_checks() -> None:
    latency = {E2E: interval(1.1, 1.3, point=1.2)}
    result = decide(comparable(ttft_ratio=1.2), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert result.reason == "ttft_regression+e2e_mean_regression"
    assert result.failed_checks == ("max_ttft_regression_ratio", "e2e_mean_gate")


def test_a_mean_gate_replaces_a_confidence_reason_but_not_a_reject() -> None:
    latency = {TTFT: interval(1.2, 1.5, point=1.3)}
    unsure = decide(comparable(), DEFAULT, interval(1.0, 1.6), latency=latency)
    assert unsure.reason == "ttft_mean_regression"
    rejected = decide(comparable(quality_ok=False), DEFAULT, interval(1.2, 1.4), latency=latency)
    assert (rejected.decision, rejected.reason) == (Decision.REJECT, "quality_failed")
    assert rejected.confidence.latency_intervals == latency


def test_a_latency_interval_for_another_check_is_refused() -> None:
    with pytest.raises(ValueError, match="min_throughput_speedup"):
        decide(comparable(), DEFAULT, interval(1.2, 1.4), latency={"min_throughput_speedup": interval(1.0, 1.2)})
