"""Paired evidence (contract section 4): every status, the missing-evidence names and the ratios."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from specselect._core import EvidenceStatus, PairEvidence, RunStatus, SideMetrics, build_pair_evidence

COMMON: dict[str, Any] = {
    "run_status": "completed",
    "target_snapshot": "abc123",
    "workload_key": "general@1#ff00",
    "sampling_key": "t0-max256",
    "quality_ok": True,
}


def base(**changes: Any) -> SideMetrics:
    fields = {
        **COMMON,
        "role": "baseline",
        "execution_path": "target_only",
        "throughput_tokens_per_s": 100.0,
        "ttft_p95_ms": 200.0,
        "e2e_p95_ms": 4000.0,
        "peak_memory_mb": 5000.0,
    }
    return SideMetrics.model_validate({**fields, **changes})


def cand(**changes: Any) -> SideMetrics:
    fields = {
        **COMMON,
        "role": "candidate",
        "execution_path": "speculative",
        "mechanism_active": True,
        "throughput_tokens_per_s": 150.0,
        "ttft_p95_ms": 210.0,
        "e2e_p95_ms": 3000.0,
        "peak_memory_mb": 5600.0,
    }
    return SideMetrics.model_validate({**fields, **changes})


def test_comparable_ratios_are_candidate_over_baseline() -> None:
    ev = build_pair_evidence(base(), cand())
    assert ev.evidence_status is EvidenceStatus.COMPARABLE
    assert ev.throughput_speedup == pytest.approx(1.5)
    assert ev.ttft_ratio == pytest.approx(1.05)
    assert ev.e2e_p95_ratio == pytest.approx(0.75)
    assert ev.candidate_peak_memory_mb == 5600.0
    assert ev.quality_ok is True
    assert (ev.mismatches, ev.missing_evidence, ev.candidate_run_status) == ((), (), RunStatus.COMPLETED)


@pytest.mark.parametrize(
    ("b_status", "c_status"),
    [("failed", "completed"), ("completed", "failed"), ("completed", "capacity_blocked"), (None, "completed")],
)
def test_not_both_completed_is_not_evaluated_and_keeps_run_status(b_status: str | None, c_status: str) -> None:
    ev = build_pair_evidence(base(run_status=b_status), cand(run_status=c_status))
    assert ev.evidence_status is EvidenceStatus.NOT_EVALUATED
    assert ev.missing_evidence == ("completed_pair",)
    assert ev.candidate_run_status == RunStatus(c_status)
    assert ev.throughput_speedup is None


def test_candidate_without_status_is_not_evaluated() -> None:
    ev = build_pair_evidence(base(), cand(run_status=None))
    assert (ev.evidence_status, ev.candidate_run_status) == (EvidenceStatus.NOT_EVALUATED, None)


@pytest.mark.parametrize(
    ("b_changes", "c_changes", "mismatches"),
    [
        ({}, {"target_snapshot": "other"}, ("target_snapshot",)),
        ({}, {"workload_key": "repetition@1#aa"}, ("workload_key",)),
        ({"sampling_key": "t0.7"}, {}, ("sampling_key",)),
        ({"target_snapshot": None}, {}, ("target_snapshot",)),
        ({}, {"workload_key": "", "sampling_key": "x"}, ("workload_key", "sampling_key")),
    ],
)
def test_fixed_field_mismatch_is_incomparable(
    b_changes: dict[str, Any], c_changes: dict[str, Any], mismatches: tuple[str, ...]
) -> None:
    ev = build_pair_evidence(base(**b_changes), cand(**c_changes))
    assert ev.evidence_status is EvidenceStatus.INCOMPARABLE
    assert ev.mismatches == mismatches
    assert ev.throughput_speedup is None


def test_mismatch_wins_over_missing_evidence() -> None:
    ev = build_pair_evidence(base(), cand(target_snapshot="x", ttft_p95_ms=None))
    assert ev.evidence_status is EvidenceStatus.INCOMPARABLE
    assert ev.missing_evidence == ("ttft_p95_ms",)


def test_fixed_field_absent_on_both_sides_is_missing() -> None:
    ev = build_pair_evidence(base(sampling_key=None), cand(sampling_key="  "))
    assert ev.evidence_status is EvidenceStatus.INCOMPLETE
    assert ev.missing_evidence == ("sampling_key",)


@pytest.mark.parametrize(
    ("b_changes", "c_changes", "missing", "detail"),
    [
        ({}, {"execution_path": "target_only"}, ("speculative_execution_path",), None),
        ({}, {"execution_path": None}, ("speculative_execution_path",), None),
        ({"execution_path": "speculative"}, {}, ("target_only_execution_path",), None),
        ({}, {"mechanism_active": False}, ("observed_speculative_proposals",), None),
        ({}, {"mechanism_active": None}, ("observed_speculative_proposals",), None),
        ({}, {"ttft_p95_ms": None}, ("ttft_p95_ms",), ("candidate.ttft_p95_ms",)),
        ({"e2e_p95_ms": math.nan}, {}, ("e2e_p95_ms",), ("baseline.e2e_p95_ms",)),
        ({}, {"peak_memory_mb": math.inf}, ("peak_memory_mb",), ("candidate.peak_memory_mb",)),
        ({}, {"throughput_tokens_per_s": -1.0}, ("throughput_tokens_per_s",), ("candidate.throughput_tokens_per_s",)),
        ({"throughput_tokens_per_s": 0.0}, {}, ("throughput_tokens_per_s",), ("baseline.throughput_tokens_per_s",)),
        ({"ttft_p95_ms": 0}, {"ttft_p95_ms": 0}, ("ttft_p95_ms",), ("baseline.ttft_p95_ms", "candidate.ttft_p95_ms")),
        ({"quality_ok": None}, {}, ("quality_ok",), ("baseline.quality_ok",)),
        ({}, {"quality_ok": None}, ("quality_ok",), ("candidate.quality_ok",)),
    ],
)
def test_incomplete_lists_what_is_missing(
    b_changes: dict[str, Any],
    c_changes: dict[str, Any],
    missing: tuple[str, ...],
    detail: tuple[str, ...] | None,
) -> None:
    ev = build_pair_evidence(base(**b_changes), cand(**c_changes))
    assert ev.evidence_status is EvidenceStatus.INCOMPLETE
    assert ev.missing_evidence == missing
    assert ev.missing_detail == (detail or missing)
    assert ev.throughput_speedup is None


def test_missing_names_come_in_a_fixed_order() -> None:
    ev = build_pair_evidence(
        base(workload_key=None, peak_memory_mb=None),
        cand(workload_key=None, execution_path=None, mechanism_active=None, ttft_p95_ms=None, peak_memory_mb=None),
    )
    assert ev.missing_evidence == (
        "workload_key",
        "speculative_execution_path",
        "observed_speculative_proposals",
        "ttft_p95_ms",
        "peak_memory_mb",
    )
    assert ev.missing_detail[-2:] == ("baseline.peak_memory_mb", "candidate.peak_memory_mb")


def test_zero_baseline_never_divides() -> None:
    ev = build_pair_evidence(
        base(throughput_tokens_per_s=0.0, ttft_p95_ms=0.0, e2e_p95_ms=0.0),
        cand(),
    )
    assert ev.evidence_status is EvidenceStatus.INCOMPLETE
    assert ev.missing_evidence == ("throughput_tokens_per_s", "ttft_p95_ms", "e2e_p95_ms")


def test_overflowing_ratio_is_incomplete_not_infinite() -> None:
    ev = build_pair_evidence(base(throughput_tokens_per_s=1e-300), cand(throughput_tokens_per_s=1e300))
    assert ev.evidence_status is EvidenceStatus.INCOMPLETE
    assert ev.missing_evidence == ("throughput_speedup",)


def test_quality_is_the_conjunction_of_both_verdicts() -> None:
    assert build_pair_evidence(base(), cand(quality_ok=False)).quality_ok is False
    assert build_pair_evidence(base(quality_ok=False), cand()).quality_ok is False


def test_roles_must_be_in_order() -> None:
    with pytest.raises(ValueError, match="baseline first"):
        build_pair_evidence(cand(), base())


def test_side_metrics_refuse_junk_types() -> None:
    with pytest.raises(ValidationError):
        SideMetrics(role="baseline", throughput_tokens_per_s="100")
    with pytest.raises(ValidationError):
        SideMetrics(role="baseline", ttft_p95_ms=True)
    with pytest.raises(ValidationError):
        SideMetrics(role="baseline", execution_path="fast")
    with pytest.raises(ValidationError):
        SideMetrics(role="baseline", unknown_field=1)  # type: ignore[call-arg]


def test_comparable_evidence_must_carry_its_numbers() -> None:
    with pytest.raises(ValidationError, match="throughput_speedup"):
        PairEvidence(evidence_status=EvidenceStatus.COMPARABLE, ttft_ratio=1.0, e2e_p95_ratio=1.0)
    with pytest.raises(ValidationError, match="quality_ok"):
        PairEvidence(
            evidence_status="comparable",
            throughput_speedup=1.2,
            ttft_ratio=1.0,
            e2e_p95_ratio=math.nan,
            candidate_peak_memory_mb=1.0,
        )


def test_evidence_round_trips_through_json() -> None:
    ev = build_pair_evidence(base(), cand())
    assert PairEvidence.model_validate_json(ev.model_dump_json()) == ev
