"""The A/A pair judged as if it were a candidate: would the plan's decision rule accept identical servers?

The noise floor (`launches.baseline_noise_floor`) says how far a baseline's launches land apart; this asks the
question a false accept answers: the baseline's 2nd, 4th, ... launches, taken as a speculative candidate against
its 1st, 3rd, ..., go through the same `core.decision.decide` with the plan's thresholds and the A/A interval.
Identical servers must never be accepted; an `accept` here means the machine drifted between launches by more
than the thresholds allow for, and every accept of the run in that scenario deserves the same doubt.

The noise floor check itself is left out: the band is computed from this very pair, so it could only agree. The
latency checks get their two-stage intervals, as a candidate's do.
"""

from __future__ import annotations

from specselect.core.decision import DecisionResult, SpeedupInterval, Thresholds, decide
from specselect.core.pairing import SideMetrics, build_pair_evidence
from specselect.evidence.parity import ParityVerdict
from specselect.evidence.pipeline.inputs import MeasuredGroup
from specselect.evidence.pipeline.launches import SideLaunches, aa_halves
from specselect.evidence.pipeline.sides import SideFigures, side_metrics
from specselect.evidence.replication import AANoiseFloor, replicated_latency_ratios

__all__ = ["aa_as_candidate"]


def _half(side: SideLaunches, launches: set[int]) -> SideLaunches:
    runs = tuple(run for run in side.runs if run.launch in launches)
    records = [r for r in side.records if r.launch in launches]
    return SideLaunches(runs=runs, records=records, samples=tuple(s for s in side.samples if s.launch in launches))


def _metrics(group: MeasuredGroup, half: SideLaunches, rate: float | None, role: str, ok: bool | None) -> SideMetrics:
    figures = SideFigures(
        throughput_tokens_per_s=rate,
        ttft_p95_ms=half.ttft_p95_ms,
        e2e_p95_ms=half.e2e_p95_ms,
        peak_memory_mb=half.peak_memory_mb,
        telemetry=None,
        peak_memory_figure=half.peak_memory_figure,
    )
    return side_metrics(group, half.runs[0], role=role, quality_ok=ok, figures=figures)


def aa_as_candidate(
    group: MeasuredGroup, side: SideLaunches, floor: AANoiseFloor, thresholds: Thresholds
) -> DecisionResult | None:
    """The decision the plan's rule gives the A/A pair of `side` (the baseline's runs of one scenario), by
    AA_AS_CANDIDATE_RULE."""
    first_half, second_half = aa_halves(side.launches)
    first, second = _half(side, first_half), _half(side, second_half)
    if not first.runs or not second.runs:
        return None
    agreement = floor.parity.verdict if floor.parity is not None else None
    quality = None if agreement in (None, ParityVerdict.NOT_ASSESSED) else agreement is ParityVerdict.PASS
    base = _metrics(group, first, floor.speedup.baseline_tokens_per_s, "baseline", True)
    cand = _metrics(group, second, floor.speedup.candidate_tokens_per_s, "candidate", quality)
    # The second half runs the baseline's own configuration: it is taken as a candidate that proposes.
    cand = cand.model_copy(update={"execution_path": "speculative", "mechanism_active": True})
    evidence = build_pair_evidence(base, cand)
    return decide(evidence, thresholds, floor.speedup.speedup_interval(), latency=_latency(first, second, floor))


def _latency(first: SideLaunches, second: SideLaunches, floor: AANoiseFloor) -> dict[str, SpeedupInterval]:
    policy, replication = floor.speedup.policy, floor.speedup.replication
    ratios = replicated_latency_ratios(first.samples, second.samples, policy=policy, replication=replication)
    return {check: iv for check, estimate in ratios.items() if (iv := estimate.speedup_interval()) is not None}
