"""The seed-compatible dict functions (contract section 7): names, keys and junk tolerance."""

from __future__ import annotations

import math
from typing import Any

import pytest

from specselect import contract
from specselect.contract import (
    admit_speculative_candidate,
    build_speculative_pair_evidence,
    classify_speculative_strategy,
    decide_speculative_candidate,
)

READY: dict[str, Any] = {
    "enabled": True,
    "family": "ngram",
    "backend_supported": True,
    "asset_ready": True,
    "compatible": True,
    "estimated_memory_gb": 6.0,
    "memory_limit_gb": 16.0,
}

BASELINE: dict[str, Any] = {
    "run_status": "completed",
    "role": "baseline",
    "target_snapshot": "abc",
    "workload_key": "general",
    "sampling_key": "t0",
    "execution_path": "target_only",
    "throughput_tokens_per_s": 100.0,
    "ttft_p95_ms": 100.0,
    "e2e_p95_ms": 1000.0,
    "peak_memory_mb": 5000.0,
    "quality_ok": True,
    "mechanism_active": False,
}
CANDIDATE: dict[str, Any] = {
    **BASELINE,
    "role": "candidate",
    "execution_path": "speculative",
    "throughput_tokens_per_s": 125.0,
    "ttft_p95_ms": 105.0,
    "e2e_p95_ms": 800.0,
    "peak_memory_mb": 5500.0,
    "mechanism_active": True,
}


def test_public_names() -> None:
    assert contract.__all__ == [
        "admit_speculative_candidate",
        "build_speculative_pair_evidence",
        "classify_speculative_strategy",
        "decide_speculative_candidate",
    ]
    assert set(classify_speculative_strategy("eagle3")) == {"family", "asset_kind", "dependency", "telemetry"}


# --- admission -------------------------------------------------------------------------------------


def test_admit_runnable() -> None:
    assert admit_speculative_candidate(READY) == {"run_status": "runnable", "reason": "admitted"}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"enabled": False}, ("skipped", "disabled")),
        ({"backend_supported": False}, ("unsupported", "backend_unsupported")),
        ({"asset_ready": False}, ("asset_missing", "asset_not_ready")),
        ({"compatible": False}, ("incompatible", "incompatible_identities")),
        ({"estimated_memory_gb": 20.0}, ("capacity_blocked", "memory_over_budget")),
        ({"enabled": False, "backend_supported": False}, ("skipped", "disabled")),
        ({"backend_supported": False, "asset_ready": False}, ("unsupported", "backend_unsupported")),
        ({"asset_ready": False, "compatible": False}, ("asset_missing", "asset_not_ready")),
        ({"compatible": False, "estimated_memory_gb": 99.0}, ("incompatible", "incompatible_identities")),
    ],
)
def test_admit_gate_order(changes: dict[str, Any], expected: tuple[str, str]) -> None:
    result = admit_speculative_candidate({**READY, **changes})
    assert (result["run_status"], result["reason"]) == expected
    assert all(type(value) is str for value in result.values())


@pytest.mark.parametrize("key", ["enabled", "backend_supported", "asset_ready", "compatible"])
def test_missing_or_none_boolean_counts_as_false(key: str) -> None:
    without = {k: v for k, v in READY.items() if k != key}
    assert admit_speculative_candidate(without)["run_status"] != "runnable"
    assert admit_speculative_candidate({**READY, key: None}) == admit_speculative_candidate(without)
    assert admit_speculative_candidate({**READY, key: math.nan}) == admit_speculative_candidate(without)


@pytest.mark.parametrize(
    "changes",
    [
        {"estimated_memory_gb": None},
        {"memory_limit_gb": None},
        {"estimated_memory_gb": math.nan, "memory_limit_gb": 1.0},
        {"estimated_memory_gb": 99.0, "memory_limit_gb": None},
    ],
)
def test_memory_gate_only_with_both_numbers(changes: dict[str, Any]) -> None:
    assert admit_speculative_candidate({**READY, **changes})["run_status"] == "runnable"


def test_memory_gate_is_inclusive_and_takes_ints() -> None:
    assert admit_speculative_candidate({**READY, "estimated_memory_gb": 16, "memory_limit_gb": 16})["reason"] == (
        "admitted"
    )


def test_admit_family_names_and_errors() -> None:
    assert admit_speculative_candidate({**READY, "family": "EAGLE-3"})["run_status"] == "runnable"
    with pytest.raises(ValueError, match="did you mean 'ngram'"):
        admit_speculative_candidate({**READY, "family": "ngrm"})
    with pytest.raises(ValueError, match="no 'family'"):
        admit_speculative_candidate({k: v for k, v in READY.items() if k != "family"})
    with pytest.raises(ValueError, match="unknown proposer family"):
        admit_speculative_candidate({**READY, "enabled": False, "family": "bogus"})


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"enabled": "yes"}, TypeError),
        ({"compatible": 1}, TypeError),
        ({"estimated_memory_gb": "6"}, TypeError),
        ({"memory_limit_gb": True}, TypeError),
        ({"memory_limit_gb": -1.0}, ValueError),
        ({"family": 7}, ValueError),
    ],
)
def test_admit_junk_raises_clear_errors(changes: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=r"admit_speculative_candidate|family must be a string"):
        admit_speculative_candidate({**READY, **changes})


def test_admit_needs_a_mapping() -> None:
    with pytest.raises(TypeError, match="expected a dict"):
        admit_speculative_candidate(["ngram"])  # type: ignore[arg-type]


# --- evidence -------------------------------------------------------------------------------------


def test_evidence_comparable_keys_and_values() -> None:
    out = build_speculative_pair_evidence(BASELINE, CANDIDATE)
    assert out == {
        "evidence_status": "comparable",
        "mismatches": [],
        "missing_evidence": [],
        "candidate_run_status": "completed",
        "throughput_speedup": 1.25,
        "ttft_ratio": 1.05,
        "e2e_p95_ratio": 0.8,
        "candidate_peak_memory_mb": 5500.0,
        "quality_ok": True,
    }


def test_evidence_not_evaluated_keeps_candidate_status() -> None:
    out = build_speculative_pair_evidence(BASELINE, {**CANDIDATE, "run_status": "failed"})
    assert out == {
        "evidence_status": "not_evaluated",
        "mismatches": [],
        "missing_evidence": ["completed_pair"],
        "candidate_run_status": "failed",
    }


def test_evidence_incomparable_and_incomplete() -> None:
    out = build_speculative_pair_evidence(BASELINE, {**CANDIDATE, "sampling_key": "t1"})
    assert (out["evidence_status"], out["mismatches"]) == ("incomparable", ["sampling_key"])
    out = build_speculative_pair_evidence(BASELINE, {**CANDIDATE, "mechanism_active": None, "ttft_p95_ms": math.nan})
    assert (out["evidence_status"], out["missing_evidence"]) == (
        "incomplete",
        ["observed_speculative_proposals", "ttft_p95_ms"],
    )
    assert "throughput_speedup" not in out


def test_evidence_ignores_extra_keys_and_infers_missing_roles() -> None:
    base = {k: v for k, v in BASELINE.items() if k != "role"} | {"notes": "x"}
    cand = {k: v for k, v in CANDIDATE.items() if k != "role"} | {"candidate": "ngram-k4"}
    assert build_speculative_pair_evidence(base, cand)["evidence_status"] == "comparable"


def test_evidence_tolerates_spelling_of_statuses() -> None:
    cand = {**CANDIDATE, "run_status": "Completed", "execution_path": "Speculative"}
    base = {**BASELINE, "execution_path": "target-only"}
    assert build_speculative_pair_evidence(base, cand)["evidence_status"] == "comparable"


@pytest.mark.parametrize(
    ("side", "changes", "match"),
    [
        ("candidate", {"throughput_tokens_per_s": "fast"}, "throughput_tokens_per_s"),
        ("baseline", {"ttft_p95_ms": True}, "ttft_p95_ms"),
        ("candidate", {"run_status": "done"}, "run_status"),
        ("candidate", {"workload_key": 3}, "workload_key"),
        ("baseline", {"role": "candidate"}, "baseline first"),
        ("candidate", {"quality_ok": "perhaps"}, "quality_ok"),
    ],
)
def test_evidence_junk_raises_one_line_value_error(side: str, changes: dict[str, Any], match: str) -> None:
    base = {**BASELINE, **changes} if side == "baseline" else BASELINE
    cand = {**CANDIDATE, **changes} if side == "candidate" else CANDIDATE
    with pytest.raises(ValueError, match=match) as info:
        build_speculative_pair_evidence(base, cand)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("build_speculative_pair_evidence:")


# --- decision -------------------------------------------------------------------------------------


def test_decide_end_to_end_with_defaults() -> None:
    evidence = build_speculative_pair_evidence(BASELINE, CANDIDATE)
    assert decide_speculative_candidate(evidence, {}) == {"decision": "accept", "reason": "meets_thresholds"}
    assert decide_speculative_candidate(evidence) == {"decision": "accept", "reason": "meets_thresholds"}
    strict = {"min_throughput_speedup": 1.3, "max_peak_memory_mb": None}
    assert decide_speculative_candidate(evidence, strict) == {"decision": "tune", "reason": "below_min_speedup"}
    tight = {"max_peak_memory_mb": 5000, "max_ttft_regression_ratio": 1.01}
    assert decide_speculative_candidate(evidence, tight)["reason"] == "ttft_regression+memory_over_budget"


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        ({"evidence_status": "not_evaluated", "missing_evidence": ["completed_pair"]}, "not_evaluated"),
        ({"evidence_status": "incomparable", "mismatches": ["target_snapshot"]}, "not_evaluated"),
        ({"evidence_status": "incomplete", "missing_evidence": ["ttft_p95_ms"]}, "tune"),
    ],
)
def test_decide_non_comparable(evidence: dict[str, Any], expected: str) -> None:
    assert decide_speculative_candidate(evidence, {})["decision"] == expected


def test_decide_quality_failed_rejects() -> None:
    evidence = build_speculative_pair_evidence(BASELINE, {**CANDIDATE, "quality_ok": False})
    assert decide_speculative_candidate(evidence, {}) == {"decision": "reject", "reason": "quality_failed"}


@pytest.mark.parametrize(
    "changes",
    [
        {"throughput_speedup": None},
        {"ttft_ratio": math.nan},
        {"e2e_p95_ratio": math.inf},
        {"candidate_peak_memory_mb": "5000"},
        {"quality_ok": None},
        {"throughput_speedup": -1.0},
    ],
)
def test_decide_comparable_with_unusable_numbers_is_incomplete(changes: dict[str, Any]) -> None:
    evidence = {**build_speculative_pair_evidence(BASELINE, CANDIDATE), **changes}
    assert decide_speculative_candidate(evidence, {}) == {"decision": "tune", "reason": "incomplete_evidence"}


@pytest.mark.parametrize(
    ("thresholds", "match"),
    [
        ({"min_speedup": 1.2}, "unknown keys min_speedup"),
        ({"min_throughput_speedup": math.nan}, "min_throughput_speedup"),
        ({"max_peak_memory_mb": "16GB"}, "max_peak_memory_mb"),
        ({"max_ttft_regression_ratio": 0}, "max_ttft_regression_ratio"),
    ],
)
def test_decide_bad_thresholds(thresholds: dict[str, Any], match: str) -> None:
    evidence = build_speculative_pair_evidence(BASELINE, CANDIDATE)
    with pytest.raises(ValueError, match=match) as info:
        decide_speculative_candidate(evidence, thresholds)
    assert "\n" not in str(info.value)


def test_decide_none_thresholds_take_defaults() -> None:
    evidence = build_speculative_pair_evidence(BASELINE, {**CANDIDATE, "throughput_tokens_per_s": 105.0})
    thresholds = dict.fromkeys(
        ["min_throughput_speedup", "max_ttft_regression_ratio", "max_e2e_p95_regression_ratio", "max_peak_memory_mb"]
    )
    assert decide_speculative_candidate(evidence, thresholds) == {"decision": "tune", "reason": "below_min_speedup"}


@pytest.mark.parametrize(
    ("evidence", "error"),
    [
        ({}, ValueError),
        ({"evidence_status": "great"}, ValueError),
        ({"evidence_status": ["comparable"]}, ValueError),
        ({"evidence_status": "incomplete", "missing_evidence": "ttft"}, TypeError),
        ("comparable", TypeError),
    ],
)
def test_decide_junk_evidence(evidence: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="decide_speculative_candidate"):
        decide_speculative_candidate(evidence, {})
