"""The decision rule of section 5, plus the statistical-confidence guard on accepting.

Order: evidence not comparable/incomplete -> ``not_evaluated``; incomplete -> ``tune``; quality failed ->
``reject``; all four thresholds met -> ``accept``; otherwise ``tune``. Acceptance rate is never a gate.

With a speedup interval, an accept whose interval reaches below ``min_throughput_speedup`` becomes
``tune`` (``insufficient_confidence``) with an estimate of the extra repeats needed, assuming the
interval's lower half-width shrinks as 1/sqrt(n); a threshold-failed tune whose whole interval lies
below 1.0 is a ``net_slowdown``. Confidence is about the throughput speedup only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from specselect.core.evidence import PairEvidence
from specselect.core.status import Decision, EvidenceStatus

__all__ = [
    "CHECK_NAMES",
    "CHECK_REASONS",
    "Confidence",
    "ConfidenceStatus",
    "DecisionResult",
    "SpeedupInterval",
    "Thresholds",
    "decide",
    "summarize_verdict",
]

_Limit = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
_Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]

CHECK_REASONS: tuple[tuple[str, str], ...] = (
    ("min_throughput_speedup", "below_min_speedup"),
    ("max_ttft_regression_ratio", "ttft_regression"),
    ("max_e2e_p95_regression_ratio", "e2e_p95_regression"),
    ("max_peak_memory_mb", "memory_over_budget"),
)
"""Threshold check -> the reason a failure of it contributes, in the order reasons are combined."""

CHECK_NAMES: tuple[str, ...] = ("quality_ok", *(name for name, _ in CHECK_REASONS))
"""The keys of `DecisionResult.checks`."""

ConfidenceStatus = Literal["confident", "insufficient", "not_assessed"]

_DECISION_ORDER: tuple[Decision, ...] = (Decision.ACCEPT, Decision.TUNE, Decision.REJECT, Decision.NOT_EVALUATED)


class Thresholds(BaseModel):
    """The acceptance policy; ``max_peak_memory_mb=None`` means no memory limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_throughput_speedup: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] = 1.10
    max_ttft_regression_ratio: _Limit = 1.10
    max_e2e_p95_regression_ratio: _Limit = 1.05
    max_peak_memory_mb: _Limit | None = None


class SpeedupInterval(BaseModel):
    """A confidence interval of the throughput speedup (made by ``specselect.evidence.stats``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: _Finite
    high: _Finite
    level: Annotated[float, Field(strict=True, gt=0, lt=1)]
    n_samples: Annotated[StrictInt, Field(ge=1)]
    samples_per_repeat: Annotated[StrictInt, Field(ge=1)] | None = None
    """Paired samples one repeat contributes; None when each sample is one repeat."""
    method: str = Field(min_length=1)
    point: _Finite | None = None
    """The interval's own point estimate; when given, the extra-repeats projection starts from it."""

    @model_validator(mode="after")
    def _ordered(self) -> SpeedupInterval:
        if self.low > self.high:
            raise ValueError(f"interval low {self.low} is above high {self.high}; pass (low, high) in order")
        return self


class Confidence(BaseModel):
    """How sure the speedup verdict is, given an interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ConfidenceStatus = "not_assessed"
    interval: SpeedupInterval | None = None
    extra_repeats_estimate: int | None = None
    """Extra repeats for the interval to clear the threshold; None when not applicable or unbounded."""


class DecisionResult(BaseModel):
    """The decision for one candidate in one scenario, with the policy applied and each check's outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Decision
    reason: str
    """Stable snake_case; several failed thresholds are joined with ``+`` in `CHECK_REASONS` order."""
    policy: Thresholds
    checks: dict[str, bool | None]
    """`CHECK_NAMES` -> passed / failed / None (not assessed, or no limit set)."""
    confidence: Confidence = Field(default_factory=Confidence)
    evidence_status: EvidenceStatus
    failed_checks: tuple[str, ...] = ()
    missing_evidence: tuple[str, ...] = ()
    detail: str = ""
    """One human-readable line: what failed or what is missing."""


def _present(value: float | None, name: str) -> float:
    # PairEvidence's validator guarantees comparable numbers; this only narrows the type.
    if value is None:
        raise ValueError(f"comparable evidence lacks {name}; build it with build_pair_evidence")
    return value


def _checks(evidence: PairEvidence, policy: Thresholds) -> dict[str, bool | None]:
    speedup = _present(evidence.throughput_speedup, "throughput_speedup")
    ttft = _present(evidence.ttft_ratio, "ttft_ratio")
    e2e = _present(evidence.e2e_p95_ratio, "e2e_p95_ratio")
    memory = _present(evidence.candidate_peak_memory_mb, "candidate_peak_memory_mb")
    limit = policy.max_peak_memory_mb
    return {
        "quality_ok": evidence.quality_ok,
        "min_throughput_speedup": speedup >= policy.min_throughput_speedup,
        "max_ttft_regression_ratio": ttft <= policy.max_ttft_regression_ratio,
        "max_e2e_p95_regression_ratio": e2e <= policy.max_e2e_p95_regression_ratio,
        "max_peak_memory_mb": None if limit is None else memory <= limit,
    }


def _failure_detail(name: str, evidence: PairEvidence, policy: Thresholds) -> str:
    value, limit, op = {
        "min_throughput_speedup": (evidence.throughput_speedup, policy.min_throughput_speedup, "<"),
        "max_ttft_regression_ratio": (evidence.ttft_ratio, policy.max_ttft_regression_ratio, ">"),
        "max_e2e_p95_regression_ratio": (evidence.e2e_p95_ratio, policy.max_e2e_p95_regression_ratio, ">"),
        "max_peak_memory_mb": (evidence.candidate_peak_memory_mb, policy.max_peak_memory_mb, ">"),
    }[name]
    return f"{name}: {value:.4g} {op} {limit:.4g}"


def _extra_repeats(point: float, threshold: float, interval: SpeedupInterval) -> int | None:
    """Extra repeats so that ``point - (point - low) * sqrt(n / n')`` reaches ``threshold``."""
    margin = point - threshold
    spread = point - interval.low
    if margin <= 0 or spread <= 0:
        return None
    needed = interval.n_samples * (spread / margin) ** 2
    if not math.isfinite(needed) or needed > 1e12:
        return None
    # The tolerance keeps float noise (45.000000001) from costing a whole extra repeat.
    extra_samples = max(math.ceil(needed - interval.n_samples - 1e-9 * needed), 1)
    per_repeat = interval.samples_per_repeat or 1
    return max(math.ceil(extra_samples / per_repeat), 1)


def decide(evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None = None) -> DecisionResult:
    """Apply section 5 to one pair's evidence; writes the policy and every check's outcome."""
    status = evidence.evidence_status
    unassessed = Confidence(interval=interval)
    no_checks: dict[str, bool | None] = dict.fromkeys(CHECK_NAMES)
    if status is EvidenceStatus.NOT_EVALUATED or status is EvidenceStatus.INCOMPARABLE:
        run = evidence.candidate_run_status.value if evidence.candidate_run_status else "unknown"
        if status is EvidenceStatus.INCOMPARABLE:
            reason, detail = "incomparable_evidence", "mismatched: " + (", ".join(evidence.mismatches) or "unspecified")
        else:
            reason, detail = "evidence_not_evaluated", f"no completed pair (candidate run_status {run})"
        return DecisionResult(
            decision=Decision.NOT_EVALUATED,
            reason=reason,
            policy=thresholds,
            checks=no_checks,
            confidence=unassessed,
            evidence_status=status,
            missing_evidence=evidence.missing_evidence,
            detail=detail,
        )
    if status is EvidenceStatus.INCOMPLETE:
        missing = evidence.missing_detail or evidence.missing_evidence
        return DecisionResult(
            decision=Decision.TUNE,
            reason="incomplete_evidence",
            policy=thresholds,
            checks=no_checks,
            confidence=unassessed,
            evidence_status=status,
            missing_evidence=evidence.missing_evidence,
            detail="missing: " + (", ".join(missing) or "unspecified"),
        )

    checks = _checks(evidence, thresholds)
    if checks["quality_ok"] is False:
        return DecisionResult(
            decision=Decision.REJECT,
            reason="quality_failed",
            policy=thresholds,
            checks=checks,
            confidence=unassessed,
            evidence_status=status,
            failed_checks=("quality_ok",),
            detail="temperature-0 outputs differ from the baseline",
        )

    failed = tuple(name for name, _ in CHECK_REASONS if checks[name] is False)
    point = _present(evidence.throughput_speedup, "throughput_speedup")
    threshold = thresholds.min_throughput_speedup
    if not failed:
        if interval is None:
            return DecisionResult(
                decision=Decision.ACCEPT,
                reason="meets_thresholds",
                policy=thresholds,
                checks=checks,
                evidence_status=status,
                detail=f"throughput_speedup {point:.4g} >= {threshold:.4g}",
            )
        if interval.low >= threshold:
            return DecisionResult(
                decision=Decision.ACCEPT,
                reason="meets_thresholds",
                policy=thresholds,
                checks=checks,
                confidence=Confidence(status="confident", interval=interval),
                evidence_status=status,
                detail=f"speedup interval low {interval.low:.4g} >= {threshold:.4g}",
            )
        return DecisionResult(
            decision=Decision.TUNE,
            reason="insufficient_confidence",
            policy=thresholds,
            checks=checks,
            confidence=Confidence(
                status="insufficient",
                interval=interval,
                extra_repeats_estimate=_extra_repeats(
                    point if interval.point is None else interval.point, threshold, interval
                ),
            ),
            evidence_status=status,
            detail=f"speedup interval low {interval.low:.4g} < {threshold:.4g} (point {point:.4g})",
        )

    reason = "+".join(code for name, code in CHECK_REASONS if name in failed)
    detail = "; ".join(_failure_detail(name, evidence, thresholds) for name in failed)
    confidence = unassessed
    if interval is not None:
        clear = interval.low >= threshold or interval.high < threshold
        confidence = Confidence(status="confident" if clear else "insufficient", interval=interval)
        if interval.high < 1.0:
            reason = "net_slowdown"
            detail = f"speedup interval high {interval.high:.4g} < 1; {detail}"
    return DecisionResult(
        decision=Decision.TUNE,
        reason=reason,
        policy=thresholds,
        checks=checks,
        confidence=confidence,
        evidence_status=status,
        failed_checks=failed,
        detail=detail,
    )


def summarize_verdict(decisions: Mapping[str, DecisionResult]) -> str:
    """One line per-scenario verdict, e.g. ``accept for repetition-c1, tune for general-c1``.

    Ordered by decision (accept, tune, reject, not_evaluated) then scenario name; each scenario is
    named on its own, so a gain on one workload is never stated for another.
    """
    if not decisions:
        return "no scenarios decided"
    ordered = sorted(decisions.items(), key=lambda item: (_DECISION_ORDER.index(item[1].decision), item[0]))
    return ", ".join(f"{result.decision.value} for {scenario}" for scenario, result in ordered)
