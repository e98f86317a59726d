"""Property tests: admission stays inside its statuses; evidence and decisions never crash or divide by zero."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specselect._core import (
    ADMISSION_STATUSES,
    CHECK_NAMES,
    GATE_ORDER,
    GATE_STATUS,
    AdmissionInput,
    Decision,
    EvidenceStatus,
    GateCheck,
    PairEvidence,
    RunStatus,
    SideMetrics,
    SpeedupInterval,
    Thresholds,
    admit,
    build_pair_evidence,
    decide,
    family_names,
)
from specselect.contract import (
    admit_speculative_candidate,
    build_speculative_pair_evidence,
    decide_speculative_candidate,
)

FAST = settings(max_examples=60, deadline=None)
WIDE = settings(max_examples=150, deadline=None)


def outcome(fn: Any, *args: Any) -> tuple[Any, str | None]:
    """The result of `fn(*args)`, or the message of the TypeError/ValueError it raised."""
    try:
        return fn(*args), None
    except (TypeError, ValueError) as exc:
        return None, str(exc)


reasons = st.sampled_from(["requires_cuda", "proposer_not_found", "vocab_size_mismatch", "memory_over_budget", "x1"])
fact_values = st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(["", "a", "cpu"])
gate_checks = st.builds(
    lambda passed, reason, facts: GateCheck(passed=passed, reason="ok" if passed else reason, facts=facts),
    st.booleans(),
    reasons,
    st.dictionaries(st.sampled_from(["k", "v", "n"]), fact_values, max_size=3),
)
family_inputs = st.sampled_from([*family_names(), "N-Gram", "EAGLE-3", "d_spark"])


@FAST
@given(st.booleans(), st.fixed_dictionaries(dict.fromkeys(GATE_ORDER, gate_checks)), family_inputs)
def test_admission_status_is_an_admission_status(enabled: bool, gates: dict[str, GateCheck], family: str) -> None:
    inp = AdmissionInput(enabled=enabled, **gates)
    result = admit("c", family, inp)
    assert result.run_status in ADMISSION_STATUSES
    first_failing = next((g for g in GATE_ORDER if not getattr(inp, g).passed), "none")
    expected_gate = "enabled" if not enabled else first_failing
    assert result.gate == expected_gate
    assert result.run_status is GATE_STATUS[expected_gate]


junk = st.none() | st.just(math.nan) | st.text(max_size=4) | st.integers(-3, 3) | st.lists(st.integers(), max_size=2)
flags = st.booleans() | junk
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 100) | junk


@FAST
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "enabled": flags,
            "family": family_inputs | junk,
            "backend_supported": flags,
            "asset_ready": flags,
            "compatible": flags,
            "estimated_memory_gb": numbers,
            "memory_limit_gb": numbers,
        },
    )
)
def test_dict_admission_never_crashes_unexpectedly(candidate: dict[str, Any]) -> None:
    result, error = outcome(admit_speculative_candidate, candidate)
    if error is not None:
        assert error
        assert "\n" not in error
        return
    assert RunStatus(result["run_status"]) in ADMISSION_STATUSES


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` 19 times in 20, so that whole pairs are often comparable and every branch is reached."""
    return st.integers(0, 19).flatmap(lambda i: good if i else bad)


bad_metric = st.none() | st.just(0.0) | st.just(0) | st.floats(allow_nan=True, allow_infinity=True)
metric = mostly(st.floats(min_value=1e-3, max_value=1e6) | st.integers(1, 10**6), bad_metric)
keys = mostly(st.just("a"), st.sampled_from([None, "", "b"]))
run_statuses = mostly(st.just(RunStatus.COMPLETED), st.sampled_from([None, *RunStatus]))


def optional_bool(good: bool) -> st.SearchStrategy[bool | None]:
    return mostly(st.just(good), st.sampled_from([None, not good]))


def sides(role: str) -> st.SearchStrategy[SideMetrics]:
    path = "target_only" if role == "baseline" else "speculative"
    return st.builds(
        SideMetrics,
        role=st.just(role),
        run_status=run_statuses,
        target_snapshot=keys,
        workload_key=keys,
        sampling_key=keys,
        execution_path=mostly(st.just(path), st.sampled_from([None, "target_only", "speculative"])),
        throughput_tokens_per_s=metric,
        ttft_p95_ms=metric,
        e2e_p95_ms=metric,
        peak_memory_mb=metric,
        quality_ok=optional_bool(True),
        mechanism_active=optional_bool(role == "candidate"),
    )


intervals = st.none() | st.builds(
    lambda a, b, df, rounds: SpeedupInterval(
        low=min(a, b), high=max(a, b), level=0.95, method="test", df=df, launch_variance_included=rounds
    ),
    st.floats(-10, 10),
    st.floats(-10, 10),
    st.none() | st.floats(0.5, 1e4),
    st.booleans(),
)
thresholds = st.builds(
    Thresholds,
    min_throughput_speedup=st.floats(0, 10),
    max_ttft_regression_ratio=st.floats(1e-6, 10),
    max_e2e_p95_regression_ratio=st.floats(1e-6, 10),
    max_peak_memory_mb=st.none() | st.floats(1e-3, 1e7),
)


@WIDE
@given(sides("baseline"), sides("candidate"), thresholds, intervals)
def test_typed_evidence_and_decision_never_crash(
    baseline: SideMetrics, candidate: SideMetrics, policy: Thresholds, interval: SpeedupInterval | None
) -> None:
    evidence = build_pair_evidence(baseline, candidate)
    assert evidence.candidate_run_status == candidate.run_status
    if evidence.evidence_status is EvidenceStatus.COMPARABLE:
        for value in (evidence.throughput_speedup, evidence.ttft_ratio, evidence.e2e_p95_ratio):
            assert value is not None
            assert math.isfinite(value)
    elif evidence.evidence_status is EvidenceStatus.INCOMPARABLE:
        assert evidence.mismatches
    else:
        assert evidence.missing_evidence
    result = decide(evidence, policy, interval)
    assert result.decision in set(Decision)
    assert set(result.checks) == set(CHECK_NAMES)
    assert result.policy == policy
    if result.decision is Decision.ACCEPT:
        assert evidence.evidence_status is EvidenceStatus.COMPARABLE
        assert all(value in (True, None) for value in result.checks.values())
        # An accept never rests on an interval without launch variation, or on one below the minimum.
        assert interval is None or (interval.launch_variance_included and interval.low >= policy.min_throughput_speedup)


side_values = st.one_of(metric, junk, st.booleans())
dict_keys = [
    "run_status",
    "role",
    "target_snapshot",
    "workload_key",
    "sampling_key",
    "execution_path",
    "throughput_tokens_per_s",
    "ttft_p95_ms",
    "e2e_p95_ms",
    "peak_memory_mb",
    "quality_ok",
    "mechanism_active",
]


def side_dicts(role: str) -> st.SearchStrategy[dict[str, Any]]:
    plausible = {
        "run_status": mostly(st.just("completed"), st.sampled_from(["failed", None, math.nan])),
        "target_snapshot": keys,
        "workload_key": keys,
        "sampling_key": keys,
        "execution_path": st.just("target_only" if role == "baseline" else "speculative"),
        "quality_ok": optional_bool(True),
        "mechanism_active": optional_bool(role == "candidate"),
    }
    values = {key: mostly(plausible.get(key, metric), side_values) for key in dict_keys if key != "role"}
    return st.fixed_dictionaries(values)


@WIDE
@given(
    side_dicts("baseline"),
    side_dicts("candidate"),
    st.dictionaries(st.sampled_from(list(Thresholds.model_fields)), numbers),
)
def test_dict_evidence_and_decision_never_crash(
    baseline: dict[str, Any], candidate: dict[str, Any], policy: dict[str, Any]
) -> None:
    evidence, error = outcome(build_speculative_pair_evidence, baseline, candidate)
    if error is not None:
        assert "\n" not in error
        return
    assert EvidenceStatus(evidence["evidence_status"])
    result, error = outcome(decide_speculative_candidate, evidence, policy)
    if error is not None:
        # Only the policy may be refused here: evidence made by the contract is always decidable.
        assert error.startswith("decide_speculative_candidate: thresholds")
        return
    assert Decision(result["decision"])


@FAST
@given(
    st.fixed_dictionaries(
        {"evidence_status": st.sampled_from([s.value for s in EvidenceStatus])},
        optional={
            "throughput_speedup": numbers,
            "ttft_ratio": numbers,
            "e2e_p95_ratio": numbers,
            "candidate_peak_memory_mb": numbers,
            "quality_ok": flags,
            "mismatches": st.none() | st.lists(st.text(max_size=3), max_size=2),
            "missing_evidence": st.none() | st.lists(st.text(max_size=3), max_size=2),
            "candidate_run_status": junk | st.sampled_from([s.value for s in RunStatus]),
        },
    )
)
def test_dict_decision_on_junk_evidence_never_crashes(evidence: dict[str, Any]) -> None:
    result = decide_speculative_candidate(evidence, {})
    assert Decision(result["decision"])
    if result["decision"] == "accept":
        assert evidence["evidence_status"] == "comparable"


@pytest.mark.parametrize("field", ["throughput_speedup", "ttft_ratio", "e2e_p95_ratio", "candidate_peak_memory_mb"])
@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, -1.0])
def test_typed_comparable_evidence_never_holds_unusable_numbers(field: str, value: float | None) -> None:
    fields: dict[str, Any] = {
        "evidence_status": "comparable",
        "throughput_speedup": 1.2,
        "ttft_ratio": 1.0,
        "e2e_p95_ratio": 1.0,
        "candidate_peak_memory_mb": 1.0,
        "quality_ok": True,
        field: value,
    }
    with pytest.raises(ValueError, match=field):
        PairEvidence.model_validate(fields)
