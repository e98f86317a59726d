"""The decision rule of section 5, plus the statistical-confidence guard on accepting.

Order: evidence not comparable/incomplete -> ``not_evaluated``; incomplete -> ``tune``; quality failed ->
``reject``; all four thresholds met -> ``accept``; otherwise ``tune``. Acceptance rate is never a gate.

With a speedup interval, an accept whose interval reaches below ``min_throughput_speedup`` becomes
``tune`` (``insufficient_confidence``) with an estimate of the extra repeats needed, assuming the
interval's lower half-width shrinks as 1/sqrt(n); a threshold-failed tune whose whole interval lies
below 1.0 is a ``net_slowdown``.

With latency intervals (the TTFT and E2E p95 ratios', keyed by their check), an accept also needs each interval's
high inside its limit: a latency check whose point passes but whose interval reaches above the limit leaves the
pair ``tune`` (``insufficient_latency_confidence``), the check named in ``Confidence.unsettled_checks``. A
regression is not a point: run to run on a 2-core host the TTFT p95 ratio of one pair moved from 0.89 to 1.74,
enough to flip accept and tune when the points alone were compared.

With an A/A noise floor (the baseline against an independent launch of itself, `NoiseFloor`), an accept also
needs the gain to clear the A/A band: a point inside the band is ``within_noise_floor`` before anything else
(more repeats of the same launches cannot move it out), and so is an interval low inside it once the interval
clears the threshold. The outcome is the check ``outside_noise_floor``, present only when a floor is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from specselect.core.pairing import MemoryFigure, PairEvidence
from specselect.core.status import Decision, EvidenceStatus

__all__ = [
    "CHECK_NAMES",
    "CHECK_REASONS",
    "LATENCY_CHECKS",
    "LATENCY_RATIO_OF",
    "LATENCY_UNSETTLED",
    "NOISE_FLOOR_CHECK",
    "WITHIN_NOISE_FLOOR",
    "Confidence",
    "ConfidenceStatus",
    "DecisionResult",
    "NoiseFloor",
    "SpeedupInterval",
    "Thresholds",
    "clears_noise_floor",
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
"""The keys of `DecisionResult.checks` (plus `NOISE_FLOOR_CHECK` when a noise floor is given)."""

NOISE_FLOOR_CHECK = "outside_noise_floor"
"""The check of a claimed gain against the A/A noise band; in `checks` only when `decide` got a noise floor."""
WITHIN_NOISE_FLOOR = "within_noise_floor"
"""The reason of a tune whose speedup an identical server could show against itself."""
LATENCY_UNSETTLED = "insufficient_latency_confidence"
"""The reason of a tune whose latency points pass but an interval reaches above its limit."""
LATENCY_RATIO_OF: dict[str, str] = {
    "max_ttft_regression_ratio": "ttft_ratio",
    "max_e2e_p95_regression_ratio": "e2e_p95_ratio",
}
"""Latency check -> the `PairEvidence` ratio it compares."""
LATENCY_CHECKS: tuple[str, ...] = tuple(LATENCY_RATIO_OF)
"""The checks `decide` accepts latency intervals for."""

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


class NoiseFloor(BaseModel):
    """The A/A spread: how far from 1.0 the baseline's speedup over an independent launch of itself reaches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spread_log: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
    """max(|log low|, |log high|) of the A/A speedup interval: identical servers land within exp(+-spread_log)."""
    level: Annotated[float, Field(strict=True, gt=0, lt=1)]
    method: str = Field(min_length=1)

    @property
    def band_high(self) -> float:
        """The largest speedup an identical server showed against itself (exp(spread_log))."""
        return math.exp(self.spread_log)


def _claimed(point: float, interval: SpeedupInterval | None) -> float:
    # The interval's own point when it carries one: the check judges one statistic, the one the interval is of.
    return interval.point if interval is not None and interval.point is not None else point


def clears_noise_floor(point: float, interval: SpeedupInterval | None, floor: NoiseFloor) -> bool:
    """True when the claimed gain lies above the A/A band: the interval's low (the point without one) > band high."""
    return (interval.low if interval is not None else _claimed(point, interval)) > floor.band_high


class Confidence(BaseModel):
    """How sure the speedup verdict is, given an interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ConfidenceStatus = "not_assessed"
    interval: SpeedupInterval | None = None
    extra_repeats_estimate: int | None = None
    """Extra repeats for the interval to clear the threshold; None when not applicable or unbounded."""
    latency_intervals: dict[str, SpeedupInterval] = Field(default_factory=dict)
    """`LATENCY_CHECKS` name -> the interval of the ratio that check compares (when `decide` got one)."""
    unsettled_checks: tuple[str, ...] = ()
    """Latency checks whose point passes but whose interval reaches above the limit."""


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
    memory_figure: MemoryFigure | None = None
    """The figure check `max_peak_memory_mb` compared with the budget (None: no budget, or nothing compared)."""


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
    if name == "max_peak_memory_mb":  # megabytes in full, and which figure: device memory or host RSS
        return f"{name}: {value:.0f} {op} {limit:.0f} ({evidence.candidate_peak_memory_figure or 'unnamed figure'})"
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


def _within_noise_floor(
    checks: dict[str, bool | None],
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None,
    floor: NoiseFloor,
) -> DecisionResult:
    point = _claimed(_present(evidence.throughput_speedup, "throughput_speedup"), interval)
    inside_point = point <= floor.band_high
    what, value = ("point", point) if inside_point or interval is None else ("interval low", interval.low)
    return DecisionResult(
        decision=Decision.TUNE,
        reason=WITHIN_NOISE_FLOOR,
        policy=thresholds,
        checks=checks,
        # More repeats of the same launches do not shrink launch-to-launch noise: no extra-repeats estimate.
        confidence=Confidence(status="insufficient" if interval else "not_assessed", interval=interval),
        evidence_status=evidence.evidence_status,
        failed_checks=(NOISE_FLOOR_CHECK,),
        detail=(
            f"speedup {what} {value:.4g} <= {floor.band_high:.4g}, the speedup the baseline showed against an "
            f"independent launch of itself ({floor.level:.0%} A/A band)"
        ),
    )


def _unassessed(
    evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None, floor: bool
) -> DecisionResult:
    """Evidence that is not comparable: not evaluated, or (incomplete) tune until the missing evidence exists."""
    status = evidence.evidence_status
    no_checks: dict[str, bool | None] = dict.fromkeys(CHECK_NAMES)
    if floor:
        no_checks[NOISE_FLOOR_CHECK] = None
    if status is EvidenceStatus.INCOMPLETE:
        decision, reason = Decision.TUNE, "incomplete_evidence"
        detail = "missing: " + (", ".join(evidence.missing_detail or evidence.missing_evidence) or "unspecified")
    elif status is EvidenceStatus.INCOMPARABLE:
        decision, reason = Decision.NOT_EVALUATED, "incomparable_evidence"
        detail = "mismatched: " + (", ".join(evidence.mismatches) or "unspecified")
    else:
        run = evidence.candidate_run_status.value if evidence.candidate_run_status else "unknown"
        decision, reason = Decision.NOT_EVALUATED, "evidence_not_evaluated"
        detail = f"no completed pair (candidate run_status {run})"
    return DecisionResult(
        decision=decision,
        reason=reason,
        policy=thresholds,
        checks=no_checks,
        confidence=Confidence(interval=interval),
        evidence_status=status,
        missing_evidence=evidence.missing_evidence,
        detail=detail,
    )


def _accept(
    checks: dict[str, bool | None], evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None
) -> DecisionResult:
    point = _present(evidence.throughput_speedup, "throughput_speedup")
    threshold = thresholds.min_throughput_speedup
    if interval is None:
        confidence, detail = Confidence(), f"throughput_speedup {point:.4g} >= {threshold:.4g}"
    else:
        confidence = Confidence(status="confident", interval=interval)
        detail = f"speedup interval low {interval.low:.4g} >= {threshold:.4g}"
    return DecisionResult(
        decision=Decision.ACCEPT,
        reason="meets_thresholds",
        policy=thresholds,
        checks=checks,
        confidence=confidence,
        evidence_status=evidence.evidence_status,
        detail=detail,
    )


def _passing(
    checks: dict[str, bool | None],
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None,
    floor: NoiseFloor | None,
) -> DecisionResult:
    """Every threshold passes: accept when the interval (and the A/A band) allow it, else tune for confidence."""
    point = _present(evidence.throughput_speedup, "throughput_speedup")
    threshold = thresholds.min_throughput_speedup
    if floor is not None and _claimed(point, interval) <= floor.band_high:
        return _within_noise_floor(checks, evidence, thresholds, interval, floor)
    if interval is None:
        return _accept(checks, evidence, thresholds, None)
    if interval.low >= threshold:
        if floor is not None and checks[NOISE_FLOOR_CHECK] is False:
            return _within_noise_floor(checks, evidence, thresholds, interval, floor)
        return _accept(checks, evidence, thresholds, interval)
    estimate = _extra_repeats(point if interval.point is None else interval.point, threshold, interval)
    return DecisionResult(
        decision=Decision.TUNE,
        reason="insufficient_confidence",
        policy=thresholds,
        checks=checks,
        confidence=Confidence(status="insufficient", interval=interval, extra_repeats_estimate=estimate),
        evidence_status=evidence.evidence_status,
        detail=f"speedup interval low {interval.low:.4g} < {threshold:.4g} (point {point:.4g})",
    )


def _failing(
    checks: dict[str, bool | None], evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None
) -> DecisionResult:
    """Some threshold fails: tune, naming every failed check (a net slowdown when the whole interval is < 1)."""
    failed = tuple(name for name, _ in CHECK_REASONS if checks[name] is False)
    reason = "+".join(code for name, code in CHECK_REASONS if name in failed)
    detail = "; ".join(_failure_detail(name, evidence, thresholds) for name in failed)
    confidence = Confidence(interval=interval)
    if interval is not None:
        threshold = thresholds.min_throughput_speedup
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
        evidence_status=evidence.evidence_status,
        failed_checks=failed,
        detail=detail,
    )


def _latency_limits(thresholds: Thresholds) -> dict[str, tuple[str, float]]:
    """Latency check -> (the evidence ratio it compares, its limit)."""
    return {check: (ratio, getattr(thresholds, check)) for check, ratio in LATENCY_RATIO_OF.items()}


def _with_latency(
    result: DecisionResult, evidence: PairEvidence, latency: Mapping[str, SpeedupInterval]
) -> DecisionResult:
    """Record the latency intervals; an accept whose latency interval reaches above a limit becomes a tune."""
    unknown = sorted(set(latency) - set(LATENCY_CHECKS))
    if unknown:
        raise ValueError(f"latency intervals for {unknown}: only {list(LATENCY_CHECKS)} take one")
    confidence = result.confidence.model_copy(update={"latency_intervals": dict(latency)})
    limits = _latency_limits(result.policy)
    unsettled = tuple(name for name in LATENCY_CHECKS if name in latency and latency[name].high > limits[name][1])
    if result.decision is not Decision.ACCEPT or not unsettled:
        return result.model_copy(update={"confidence": confidence})
    detail = "; ".join(
        f"{limits[name][0]} interval high {latency[name].high:.4g} > {limits[name][1]:.4g} "
        f"(point {getattr(evidence, limits[name][0]):.4g})"
        for name in unsettled
    )
    return result.model_copy(
        update={
            "decision": Decision.TUNE,
            "reason": LATENCY_UNSETTLED,
            "confidence": confidence.model_copy(update={"status": "insufficient", "unsettled_checks": unsettled}),
            "detail": detail,
        }
    )


def decide(
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None = None,
    noise_floor: NoiseFloor | None = None,
    latency: Mapping[str, SpeedupInterval] | None = None,
) -> DecisionResult:
    """Apply section 5 to one pair's evidence; writes the policy and every check's outcome.

    `noise_floor` (optional): the A/A band an accept must clear (check `outside_noise_floor`).
    `latency` (optional): `LATENCY_CHECKS` name -> interval of its ratio; an accept needs each high in its limit.
    """
    if evidence.evidence_status is not EvidenceStatus.COMPARABLE:
        unassessed = _unassessed(evidence, thresholds, interval, floor=noise_floor is not None)
        return _with_latency(unassessed, evidence, latency) if latency else unassessed
    checks = _checks(evidence, thresholds)
    if noise_floor is not None:
        point = _present(evidence.throughput_speedup, "throughput_speedup")
        checks[NOISE_FLOOR_CHECK] = clears_noise_floor(point, interval, noise_floor)
    result = _decided(checks, evidence, thresholds, interval, noise_floor)
    if latency:
        result = _with_latency(result, evidence, latency)
    if checks["max_peak_memory_mb"] is None:
        return result
    return result.model_copy(update={"memory_figure": evidence.candidate_peak_memory_figure})


def _decided(
    checks: dict[str, bool | None],
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None,
    noise_floor: NoiseFloor | None,
) -> DecisionResult:
    if checks["quality_ok"] is False:
        return DecisionResult(
            decision=Decision.REJECT,
            reason="quality_failed",
            policy=thresholds,
            checks=checks,
            confidence=Confidence(interval=interval),
            evidence_status=evidence.evidence_status,
            failed_checks=("quality_ok",),
            detail="temperature-0 outputs differ from the baseline",
        )
    if any(checks[name] is False for name, _ in CHECK_REASONS):
        return _failing(checks, evidence, thresholds, interval)
    return _passing(checks, evidence, thresholds, interval, noise_floor)


def summarize_verdict(decisions: Mapping[str, DecisionResult]) -> str:
    """One line per-scenario verdict, e.g. ``accept for repetition-c1, tune for general-c1``.

    Ordered by decision (accept, tune, reject, not_evaluated) then scenario name; each scenario is
    named on its own, so a gain on one workload is never stated for another.
    """
    if not decisions:
        return "no scenarios decided"
    ordered = sorted(decisions.items(), key=lambda item: (_DECISION_ORDER.index(item[1].decision), item[0]))
    return ", ".join(f"{result.decision.value} for {scenario}" for scenario, result in ordered)
