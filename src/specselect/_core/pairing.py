"""Paired evidence: can a candidate's result be attributed and compared with its baseline? (section 4)

Choices the contract leaves open, fixed here:

* Fixed fields (target_snapshot, workload_key, sampling_key): a value on one side and none on the other is
  a *mismatch* (the pair cannot be shown to be the same experiment); none on both sides is *missing
  evidence* named after the field. A blank string counts as none.
* Metrics are valid only when finite and strictly positive: a completed run cannot have produced zero
  tokens/s, zero latency or zero memory, so zero means "not measured" (and a zero baseline would divide
  by zero). Invalid metrics are missing evidence.
* ``missing_evidence`` uses the contract's plain names, once each, in a fixed order;
  ``missing_detail`` says which side lacks a metric (``baseline.ttft_p95_ms``).
* The pair's quality verdict is the conjunction of both sides' verdicts: a baseline that fails its own
  check (not deterministic) cannot vouch for the candidate.
* Acceptance is never inferred here: telemetry only says whether proposals were observed at all.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from specselect._core.status import EvidenceStatus, RunStatus

__all__ = [
    "FIXED_FIELDS",
    "METRIC_FIELDS",
    "MISSING_COMPLETED_PAIR",
    "MISSING_PROPOSALS",
    "MISSING_QUALITY",
    "MISSING_SPECULATIVE_PATH",
    "MISSING_TARGET_ONLY_PATH",
    "RATIO_FIELDS",
    "ExecutionPath",
    "MemoryFigure",
    "Number",
    "PairEvidence",
    "Role",
    "SideMetrics",
    "build_pair_evidence",
    "valid_metric",
    "valid_ratio",
]

Number = Annotated[float, Field(strict=True)]
"""A float that refuses bools and numeric strings (ints are widened); NaN/inf are allowed as observations."""

Role = Literal["baseline", "candidate"]
ExecutionPath = Literal["target_only", "speculative"]
MemoryFigure = Literal["device_memory", "host_rss", "declared"]
"""What a peak memory figure is: used device memory (NVML; the largest device of the server's), the server
process tree's resident memory on the host, or the operator's declared figure for an endpoint."""

FIXED_FIELDS: tuple[str, ...] = ("target_snapshot", "workload_key", "sampling_key")
METRIC_FIELDS: tuple[str, ...] = ("throughput_tokens_per_s", "ttft_p95_ms", "e2e_p95_ms", "peak_memory_mb")
RATIO_FIELDS: tuple[str, ...] = ("throughput_speedup", "ttft_ratio", "e2e_p95_ratio")

MISSING_COMPLETED_PAIR = "completed_pair"
MISSING_TARGET_ONLY_PATH = "target_only_execution_path"
MISSING_SPECULATIVE_PATH = "speculative_execution_path"
MISSING_PROPOSALS = "observed_speculative_proposals"
MISSING_QUALITY = "quality_ok"


class SideMetrics(BaseModel):
    """One side of a pair (baseline or candidate) for one scenario, as measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    run_status: RunStatus | None = None
    target_snapshot: str | None = None
    workload_key: str | None = None
    sampling_key: str | None = None
    execution_path: ExecutionPath | None = None
    throughput_tokens_per_s: Number | None = None
    ttft_p95_ms: Number | None = None
    e2e_p95_ms: Number | None = None
    peak_memory_mb: Number | None = None
    peak_memory_figure: MemoryFigure | None = None
    quality_ok: StrictBool | None = None
    """Temperature-0 parity verdict: every output equals the baseline's for the same prompt."""
    mechanism_active: StrictBool | None = None
    """True only when backend telemetry showed speculative proposals."""


QualityCheck = Literal["exact_output", "output_distribution"]


class PairEvidence(BaseModel):
    """The paired evidence of one candidate against its baseline for one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence_status: EvidenceStatus
    mismatches: tuple[str, ...] = ()
    missing_evidence: tuple[str, ...] = ()
    missing_detail: tuple[str, ...] = ()
    """Like `missing_evidence`, with metric names qualified by side (``candidate.peak_memory_mb``)."""
    candidate_run_status: RunStatus | None = None
    throughput_speedup: Number | None = None
    ttft_ratio: Number | None = None
    e2e_p95_ratio: Number | None = None
    candidate_peak_memory_mb: Number | None = None
    candidate_peak_memory_figure: MemoryFigure | None = None
    """Which figure `candidate_peak_memory_mb` is (the memory budget is compared with it)."""
    quality_ok: StrictBool | None = None
    quality_check: QualityCheck = "exact_output"
    """How quality was judged: outputs equal the baseline's (temperature 0), or sampled outputs follow the
    baseline's distribution (a test on distributions, temperature > 0)."""
    lossy: str | None = None
    """Why the candidate's verification is not exact: its outputs are not the target's, its quality is the
    distribution test's alone (none at temperature 0: the pair is then incomplete); None: exact verification."""

    @model_validator(mode="after")
    def _comparable_has_numbers(self) -> PairEvidence:
        # Decisions trust comparable evidence blindly, so it must carry every number it promises.
        if self.evidence_status is EvidenceStatus.COMPARABLE:
            bad = [name for name in (*RATIO_FIELDS, "candidate_peak_memory_mb") if not valid_ratio(getattr(self, name))]
            if self.quality_ok is None:
                bad.append("quality_ok")
            if bad:
                raise ValueError(f"comparable evidence needs finite non-negative values for: {', '.join(bad)}")
        return self


def valid_metric(value: float | None) -> bool:
    """True for a usable measurement: a finite, strictly positive number."""
    return value is not None and math.isfinite(value) and value > 0


def valid_ratio(value: float | None) -> bool:
    """True for a usable derived value: finite and non-negative."""
    return value is not None and math.isfinite(value) and value >= 0


def _blank_to_none(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


def _fixed_field_issues(baseline: SideMetrics, candidate: SideMetrics) -> tuple[list[str], list[str]]:
    mismatches: list[str] = []
    missing: list[str] = []
    for name in FIXED_FIELDS:
        base = _blank_to_none(getattr(baseline, name))
        cand = _blank_to_none(getattr(candidate, name))
        if base is None and cand is None:
            missing.append(name)
        elif base != cand:
            mismatches.append(name)
    return mismatches, missing


def _dedupe(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _missing(baseline: SideMetrics, candidate: SideMetrics, fixed: list[str]) -> tuple[list[str], list[str]]:
    """What a completed pair lacks: names (contract vocabulary) and details (`side.name`), in a fixed order,
    after the fixed fields neither side has (`fixed`)."""
    missing = list(fixed)
    detail = list(fixed)
    paths = (
        (baseline.execution_path != "target_only", MISSING_TARGET_ONLY_PATH),
        (candidate.execution_path != "speculative", MISSING_SPECULATIVE_PATH),
        (candidate.mechanism_active is not True, MISSING_PROPOSALS),
    )
    for lacking, name in paths:
        if lacking:
            missing.append(name)
            detail.append(name)
    for name in (*METRIC_FIELDS, MISSING_QUALITY):
        for side in (baseline, candidate):
            value = getattr(side, name)
            usable = value is not None if name == MISSING_QUALITY else valid_metric(value)
            if not usable:
                missing.append(name)
                detail.append(f"{side.role}.{name}")
    return missing, detail


_RATIOS = {
    "throughput_speedup": "throughput_tokens_per_s",
    "ttft_ratio": "ttft_p95_ms",
    "e2e_p95_ratio": "e2e_p95_ms",
}


def _ratios(baseline: SideMetrics, candidate: SideMetrics) -> tuple[dict[str, float], list[str]]:
    """Candidate / baseline of each compared metric; the ones that overflow (huge / tiny) are listed instead."""
    ratios: dict[str, float] = {}
    overflowed: list[str] = []
    for ratio, metric in _RATIOS.items():
        value = getattr(candidate, metric) / getattr(baseline, metric)
        if math.isfinite(value):
            ratios[ratio] = value
        else:
            overflowed.append(ratio)
    return ratios, overflowed


def build_pair_evidence(baseline: SideMetrics, candidate: SideMetrics) -> PairEvidence:
    """Build the paired evidence of section 4; never divides by zero and never infers acceptance.

    Raises ValueError when the roles are swapped (a caller bug, not a measurement fact).
    """
    if baseline.role != "baseline" or candidate.role != "candidate":
        raise ValueError(
            f"build_pair_evidence: got roles ({baseline.role!r}, {candidate.role!r}); "
            "pass the baseline first and the candidate second"
        )
    run_status = candidate.run_status
    if baseline.run_status is not RunStatus.COMPLETED or run_status is not RunStatus.COMPLETED:
        return PairEvidence(
            evidence_status=EvidenceStatus.NOT_EVALUATED,
            missing_evidence=(MISSING_COMPLETED_PAIR,),
            missing_detail=(MISSING_COMPLETED_PAIR,),
            candidate_run_status=run_status,
        )
    mismatches, fixed_missing = _fixed_field_issues(baseline, candidate)
    missing, detail = _missing(baseline, candidate, fixed_missing)
    ratios: dict[str, float] = {}
    if not missing:
        # Both sides are finite and > 0 here, so only overflow (huge / tiny) can go wrong.
        ratios, overflowed = _ratios(baseline, candidate)
        missing += overflowed
        detail += overflowed
    if mismatches or missing:
        return PairEvidence(
            evidence_status=EvidenceStatus.INCOMPARABLE if mismatches else EvidenceStatus.INCOMPLETE,
            mismatches=tuple(mismatches),
            missing_evidence=_dedupe(missing),
            missing_detail=_dedupe(detail),
            candidate_run_status=run_status,
        )
    return PairEvidence(
        evidence_status=EvidenceStatus.COMPARABLE,
        candidate_run_status=run_status,
        throughput_speedup=ratios["throughput_speedup"],
        ttft_ratio=ratios["ttft_ratio"],
        e2e_p95_ratio=ratios["e2e_p95_ratio"],
        candidate_peak_memory_mb=candidate.peak_memory_mb,
        candidate_peak_memory_figure=candidate.peak_memory_figure,
        quality_ok=bool(baseline.quality_ok and candidate.quality_ok),
    )
