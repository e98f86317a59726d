"""The decision rule of section 5, plus the statistical-confidence guards on accepting.

Order: evidence not comparable/incomplete -> ``not_evaluated``; incomplete -> ``tune``; quality failed ->
``reject``; all four thresholds met -> ``accept``; otherwise ``tune``. Acceptance rate is never a gate.

With a speedup interval, an accept needs the interval's low at or above ``min_throughput_speedup`` (else
``tune``, ``insufficient_confidence``), and an interval that carries no launch-to-launch variation (one round:
the items' variation alone) cannot support one (``tune``, ``no_launch_replication``): its width says nothing
about how far the next launch lands. A threshold-failed tune whose whole interval lies below 1.0 is a
``net_slowdown``.

With latency intervals (of the mean TTFT and mean E2E ratios, paired by round, keyed by the check whose limit
they are held to), the plan's ``latency_gate`` says what they must show: ``not_clearly_worse`` -- the
interval's low above the limit fails the gate (``ttft_mean_regression`` / ``e2e_mean_regression``);
``shown_within`` -- also an interval that reaches above the limit keeps an accept back
(``insufficient_latency_confidence``, the check in ``Confidence.unsettled_checks``). The p95 ratios stay
the contract's checks, compared as points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect._core.pairing import MemoryFigure, PairEvidence, QualityCheck
from specselect._core.status import Decision, EvidenceStatus

__all__ = [
    "CHECK_NAMES",
    "CHECK_REASONS",
    "LATENCY_CHECKS",
    "LATENCY_GATE_REASONS",
    "LATENCY_UNSETTLED",
    "NO_INTERVAL",
    "NO_LAUNCH_REPLICATION",
    "QUALITY_FAILURES",
    "Confidence",
    "ConfidenceStatus",
    "DecisionResult",
    "LatencyGate",
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

QUALITY_FAILURES: dict[QualityCheck, tuple[str, str]] = {
    "exact_output": ("quality_failed", "temperature-0 outputs differ from the baseline"),
    "output_distribution": (
        "distribution_mismatch",
        "the sampled outputs do not follow the baseline's distribution (the distribution test failed)",
    ),
}
"""How quality was judged -> the reject's reason and detail when it failed."""

CHECK_NAMES: tuple[str, ...] = ("quality_ok", *(name for name, _ in CHECK_REASONS))
"""The keys of `DecisionResult.checks` (plus the latency gates' when `decide` got latency intervals)."""

LATENCY_CHECKS: tuple[str, ...] = ("max_ttft_regression_ratio", "max_e2e_p95_regression_ratio")
"""The limits `decide` accepts latency intervals for (of the mean TTFT and mean E2E ratios)."""
LATENCY_GATE_REASONS: dict[str, tuple[str, str]] = {
    "max_ttft_regression_ratio": ("ttft_mean_gate", "ttft_mean_regression"),
    "max_e2e_p95_regression_ratio": ("e2e_mean_gate", "e2e_mean_regression"),
}
"""Latency limit -> (its gate's key in `checks`, the reason a clearly worse mean ratio gives)."""
LATENCY_UNSETTLED = "insufficient_latency_confidence"
"""The reason of a tune whose latency interval reaches above its limit under ``shown_within``."""
NO_LAUNCH_REPLICATION = "no_launch_replication"
"""The reason of a tune whose speedup interval holds no launch-to-launch variation (one round)."""
NO_INTERVAL = "no_interval"
"""The reason of a tune that needed an interval (`decide(..., require_interval=True)`) and had none."""

LatencyGate = Literal["not_clearly_worse", "shown_within"]
ConfidenceStatus = Literal["confident", "insufficient", "not_assessed"]

_DECISION_ORDER: tuple[Decision, ...] = (Decision.ACCEPT, Decision.TUNE, Decision.REJECT, Decision.NOT_EVALUATED)


class Thresholds(BaseModel):
    """The acceptance policy; ``max_peak_memory_mb=None`` means no memory limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_throughput_speedup: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] = 1.10
    max_ttft_regression_ratio: _Limit = 1.10
    max_e2e_p95_regression_ratio: _Limit = 1.05
    max_peak_memory_mb: _Limit | None = None
    latency_gate: LatencyGate = "not_clearly_worse"
    """What a latency interval must show: not clearly above its limit, or shown to lie within it."""


class SpeedupInterval(BaseModel):
    """A confidence interval of a ratio (made by ``specselect._evidence``), with what it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: _Finite
    high: _Finite
    level: Annotated[float, Field(strict=True, gt=0, lt=1)]
    method: str = Field(min_length=1)
    point: _Finite | None = None
    """The interval's own point estimate: the number the checks compare."""
    df: Annotated[float, Field(gt=0)] | None = None
    """Degrees of freedom of a t interval (None: not a t interval, or unbounded)."""
    launch_variance_included: bool = False
    """True when the interval holds the launch-to-launch variation (two or more rounds); an accept needs it."""

    @model_validator(mode="after")
    def _ordered(self) -> SpeedupInterval:
        if self.low > self.high:
            raise ValueError(f"interval low {self.low} is above high {self.high}; pass (low, high) in order")
        return self


class Confidence(BaseModel):
    """How sure the verdict is, given intervals."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ConfidenceStatus = "not_assessed"
    interval: SpeedupInterval | None = None
    latency_intervals: dict[str, SpeedupInterval] = Field(default_factory=dict)
    """`LATENCY_CHECKS` name -> the interval of the mean ratio held to that limit (when `decide` got one)."""
    latency_gate: LatencyGate | None = None
    unsettled_checks: tuple[str, ...] = ()
    """Latency limits whose interval reaches above them under ``shown_within`` (they kept an accept back)."""


class DecisionResult(BaseModel):
    """The decision for one candidate in one scenario, with the policy applied and each check's outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Decision
    reason: str
    """Stable snake_case; several failed thresholds are joined with ``+`` in `CHECK_REASONS` order."""
    policy: Thresholds
    checks: dict[str, bool | None]
    """`CHECK_NAMES` -> passed / failed / None (not assessed, or no limit set); plus the latency gates."""
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


def _unassessed(evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None) -> DecisionResult:
    """Evidence that is not comparable: not evaluated, or (incomplete) tune until the missing evidence exists."""
    status = evidence.evidence_status
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
        checks=dict.fromkeys(CHECK_NAMES),
        confidence=Confidence(interval=interval),
        evidence_status=status,
        missing_evidence=evidence.missing_evidence,
        detail=detail,
    )


def _tune(
    checks: dict[str, bool | None], evidence: PairEvidence, thresholds: Thresholds, reason: str, detail: str
) -> DecisionResult:
    return DecisionResult(
        decision=Decision.TUNE,
        reason=reason,
        policy=thresholds,
        checks=checks,
        evidence_status=evidence.evidence_status,
        detail=detail,
    )


def _passing(
    checks: dict[str, bool | None],
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None,
    require_interval: bool,
) -> DecisionResult:
    """Every threshold passes: accept when the interval allows it, else tune for confidence."""
    point = _present(evidence.throughput_speedup, "throughput_speedup")
    threshold = thresholds.min_throughput_speedup
    if interval is None:
        if require_interval:
            return _tune(checks, evidence, thresholds, NO_INTERVAL, "no interval: too few items or rounds")
        detail = f"throughput_speedup {point:.4g} >= {threshold:.4g}"
    elif interval.low < threshold:
        detail = f"speedup interval low {interval.low:.4g} < {threshold:.4g} (point {point:.4g})"
        return _tune(checks, evidence, thresholds, "insufficient_confidence", detail)
    elif not interval.launch_variance_included:
        detail = f"speedup interval low {interval.low:.4g} >= {threshold:.4g} from one round's items alone"
        return _tune(checks, evidence, thresholds, NO_LAUNCH_REPLICATION, detail)
    else:
        detail = f"speedup interval low {interval.low:.4g} >= {threshold:.4g} ({interval.level:.1%})"
    return DecisionResult(
        decision=Decision.ACCEPT,
        reason="meets_thresholds",
        policy=thresholds,
        checks=checks,
        evidence_status=evidence.evidence_status,
        detail=detail,
    )


def _failing(
    checks: dict[str, bool | None], evidence: PairEvidence, thresholds: Thresholds, interval: SpeedupInterval | None
) -> DecisionResult:
    """Some threshold fails: tune, naming every failed check (a net slowdown when the whole interval is < 1)."""
    failed = tuple(name for name, _ in CHECK_REASONS if checks[name] is False)
    reason = "+".join(code for name, code in CHECK_REASONS if name in failed)
    detail = "; ".join(_failure_detail(name, evidence, thresholds) for name in failed)
    if interval is not None and interval.high < 1.0:
        reason = "net_slowdown"
        detail = f"speedup interval high {interval.high:.4g} < 1; {detail}"
    result = _tune(checks, evidence, thresholds, reason, detail)
    return result.model_copy(update={"failed_checks": failed})


def _confidence(result: DecisionResult, interval: SpeedupInterval | None) -> Confidence:
    if interval is None:
        return Confidence()
    threshold = result.policy.min_throughput_speedup
    clear = interval.low >= threshold or interval.high < threshold
    sure = clear and (interval.launch_variance_included or interval.high < threshold)
    return Confidence(status="confident" if sure else "insufficient", interval=interval)


def _gate_outcomes(
    thresholds: Thresholds, latency: Mapping[str, SpeedupInterval]
) -> tuple[dict[str, bool], tuple[str, ...], tuple[str, ...]]:
    """(gate key -> passed, limits clearly exceeded, limits left unsettled under shown_within)."""
    gates: dict[str, bool] = {}
    worse: list[str] = []
    unsettled: list[str] = []
    for check in LATENCY_CHECKS:
        if check not in latency:
            continue
        limit, iv = getattr(thresholds, check), latency[check]
        key = LATENCY_GATE_REASONS[check][0]
        if iv.low > limit:
            worse.append(check)
        elif iv.high > limit and thresholds.latency_gate == "shown_within":
            unsettled.append(check)
        gates[key] = check not in worse and check not in unsettled
    return gates, tuple(worse), tuple(unsettled)


def _latency_detail(checks: tuple[str, ...], latency: Mapping[str, SpeedupInterval], side: str) -> str:
    parts = []
    for check in checks:
        iv = latency[check]
        bound = iv.low if side == "low" else iv.high
        parts.append(f"{LATENCY_GATE_REASONS[check][0]}: interval {side} {bound:.4g} > {check} (point {iv.point})")
    return "; ".join(parts)


def _with_latency(
    result: DecisionResult, thresholds: Thresholds, latency: Mapping[str, SpeedupInterval]
) -> DecisionResult:
    """Record the latency gates. A clearly worse mean ratio is a reason of its own (added to failed point checks,
    replacing a confidence reason, turning an accept into a tune); under shown_within an interval reaching above
    its limit keeps an accept back."""
    unknown = sorted(set(latency) - set(LATENCY_CHECKS))
    if unknown:
        raise ValueError(f"latency intervals for {unknown}: only {list(LATENCY_CHECKS)} take one")
    gates, worse, unsettled = _gate_outcomes(thresholds, latency)
    confidence = result.confidence.model_copy(
        update={"latency_intervals": dict(latency), "latency_gate": thresholds.latency_gate}
    )
    result = result.model_copy(update={"checks": {**result.checks, **gates}, "confidence": confidence})
    if result.decision is Decision.REJECT:
        return result
    if worse:
        kept = (result.reason, result.detail) if result.failed_checks else ("", "")
        reasons = (kept[0], *(LATENCY_GATE_REASONS[c][1] for c in worse))
        return result.model_copy(
            update={
                "decision": Decision.TUNE,
                "reason": "+".join(r for r in reasons if r),
                "detail": "; ".join(d for d in (kept[1], _latency_detail(worse, latency, "low")) if d),
                "failed_checks": (*result.failed_checks, *(LATENCY_GATE_REASONS[c][0] for c in worse)),
            }
        )
    if unsettled and result.decision is Decision.ACCEPT:
        return result.model_copy(
            update={
                "decision": Decision.TUNE,
                "reason": LATENCY_UNSETTLED,
                "detail": _latency_detail(unsettled, latency, "high"),
                "confidence": confidence.model_copy(update={"status": "insufficient", "unsettled_checks": unsettled}),
            }
        )
    return result


def decide(
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None = None,
    latency: Mapping[str, SpeedupInterval] | None = None,
    *,
    require_interval: bool = False,
) -> DecisionResult:
    """Apply section 5 to one pair's evidence; writes the policy and every check's outcome.

    `interval` (optional): the speedup's; an accept needs its low >= the minimum and launch variation in it.
    `latency` (optional): `LATENCY_CHECKS` name -> interval of the mean ratio held to that limit.
    `require_interval`: no interval -> tune (`no_interval`) instead of an accept on the point.
    """
    if evidence.evidence_status is not EvidenceStatus.COMPARABLE:
        return _unassessed(evidence, thresholds, interval)
    checks = _checks(evidence, thresholds)
    result = _decided(checks, evidence, thresholds, interval, require_interval)
    # A reject is settled by quality alone: its interval is recorded, not assessed.
    confidence = Confidence(interval=interval) if result.decision is Decision.REJECT else _confidence(result, interval)
    result = result.model_copy(update={"confidence": confidence})
    if latency:
        result = _with_latency(result, thresholds, latency)
    if checks["max_peak_memory_mb"] is None:
        return result
    return result.model_copy(update={"memory_figure": evidence.candidate_peak_memory_figure})


def _decided(
    checks: dict[str, bool | None],
    evidence: PairEvidence,
    thresholds: Thresholds,
    interval: SpeedupInterval | None,
    require_interval: bool,
) -> DecisionResult:
    if checks["quality_ok"] is False:
        reason, detail = QUALITY_FAILURES[evidence.quality_check]
        return DecisionResult(
            decision=Decision.REJECT,
            reason=reason,
            policy=thresholds,
            checks=checks,
            evidence_status=evidence.evidence_status,
            failed_checks=("quality_ok",),
            detail=detail,
        )
    if any(checks[name] is False for name, _ in CHECK_REASONS):
        return _failing(checks, evidence, thresholds, interval)
    return _passing(checks, evidence, thresholds, interval, require_interval)


def summarize_verdict(decisions: Mapping[str, DecisionResult]) -> str:
    """One line per-scenario verdict, e.g. ``accept for repetition-c1, tune for general-c1``.

    Ordered by decision (accept, tune, reject, not_evaluated) then scenario name; each scenario is
    named on its own, so a gain on one workload is never stated for another.
    """
    if not decisions:
        return "no scenarios decided"
    ordered = sorted(decisions.items(), key=lambda item: (_DECISION_ORDER.index(item[1].decision), item[0]))
    return ", ".join(f"{result.decision.value} for {scenario}" for scenario, result in ordered)
