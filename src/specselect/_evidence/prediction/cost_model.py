"""The cost model and the prediction: T / (D * (c(k) + k * d) + P), from telemetry and other measurements only."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specselect._evidence.prediction.observed import baseline_tpot, measure_step_cost, measured_decode_speedup
from specselect._evidence.prediction.tokens import AcceptanceTelemetry, StepCounts, step_counts
from specselect._evidence.samples import RequestPair
from specselect.records.evidence.prediction import (
    ProposerCost,
    RateKind,
    SpeedupPrediction,
    VerifyCostModel,
)

__all__ = ["predict_decode_speedup", "predict_speedup"]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _modelled_speedup(counts: StepCounts, drafting_cost: float) -> float:
    if counts.drafting_steps is None or counts.plain_steps is None:
        return counts.expected_tokens_per_step / drafting_cost
    steps_tokens = counts.drafting_steps * counts.expected_tokens_per_step + counts.plain_steps
    return steps_tokens / (counts.drafting_steps * drafting_cost + counts.plain_steps)


def _telemetry_counts(telemetry: AcceptanceTelemetry | None, missing: list[str]) -> StepCounts | None:
    if telemetry is None or telemetry.k == 0:
        missing.append("per_position_acceptance_rates")
        return None
    try:
        return step_counts(telemetry)
    except ValueError:
        missing.append("valid_per_position_acceptance_rates")
        return None


def _inputs(
    counts: StepCounts | None, verify: VerifyCostModel | None, proposer: ProposerCost | None, token_s: float | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    used = [name for name, value in (("acceptance_telemetry", counts), ("baseline_tpot", token_s)) if value is not None]
    assumed: list[str] = []
    if counts is not None and counts.drafting_steps is None:
        assumed.append("every_step_drafts: draft count or decode tokens unknown")
    if verify is not None:
        used.append(f"verify_cost:{verify.source}")
    if proposer is not None:
        used.append(f"proposer_cost:{proposer.source}")
        if proposer.source == "assumed_free":
            assumed.append(f"proposer_cost_free: {proposer.note}")
        elif proposer.source == "weights_ratio":
            assumed.append(f"proposer_cost_weights_ratio: {proposer.note}")
    return tuple(used), tuple(assumed)


def predict_decode_speedup(
    telemetry: AcceptanceTelemetry | None,
    *,
    verify_cost: VerifyCostModel | None,
    proposer: ProposerCost | None,
    baseline_token_s: float | None = None,
    measured: float | None = None,
) -> SpeedupPrediction:
    """Predict the decode speedup from telemetry and the cost model alone; `measured` only scores it. Never raises.

    The signature admits no candidate timing: `baseline_token_s` is the baseline's TPOT (recorded, and the unit of
    every relative cost), `measured` the candidate's measured decode speedup, compared with but never used.
    """
    missing: list[str] = []
    counts = _telemetry_counts(telemetry, missing)
    for name, value in (("verify_cost_model", verify_cost), ("proposer_cost", proposer)):
        if value is None:
            missing.append(name)
    cost: float | None = None
    if telemetry is not None and verify_cost is not None and proposer is not None:
        cost = verify_cost.cost(telemetry.k) + telemetry.k * proposer.per_token
        if not cost > 0:
            missing.append("positive_modelled_step_cost")
            cost = None
    predicted = _finite(_modelled_speedup(counts, cost)) if counts is not None and cost is not None else None
    if measured is None or not (math.isfinite(measured) and measured > 0):
        missing.append("measured_decode_speedup")
        measured = None
    gap = _finite(measured - predicted) if measured is not None and predicted is not None else None
    used, assumed = _inputs(counts, verify_cost, proposer, baseline_token_s)
    return SpeedupPrediction(
        rate_kind=telemetry.rate_kind if telemetry is not None else "cumulative",
        per_position_rates=telemetry.per_position_rates if telemetry is not None and telemetry.k else None,
        expected_tokens_per_step=counts.expected_tokens_per_step if counts else None,
        tokens_per_target_step=counts.tokens_per_target_step if counts else None,
        num_speculative_tokens=telemetry.k if telemetry is not None and telemetry.k else None,
        drafting_steps=counts.drafting_steps if counts else None,
        plain_steps=counts.plain_steps if counts else None,
        verify_cost=verify_cost,
        proposer_cost=proposer,
        modelled_step_cost=cost,
        baseline_token_s=baseline_token_s,
        predicted_candidate_token_s=baseline_token_s / predicted if baseline_token_s and predicted else None,
        step_cost=None,
        predicted_decode_speedup=predicted,
        measured_decode_speedup=measured,
        gap=gap,
        relative_gap=_finite(gap / predicted) if gap is not None and predicted else None,
        relative_error=_finite(-gap / measured) if gap is not None and measured else None,
        inputs_used=used,
        assumptions=assumed,
        missing=tuple(missing),
    )


def predict_speedup(
    pairs: Sequence[RequestPair],
    per_position_rates: Sequence[float] | None,
    *,
    rate_kind: RateKind = "cumulative",
    num_drafts: int | None = None,
    verify_cost: VerifyCostModel | None = None,
    proposer: ProposerCost | None = None,
) -> SpeedupPrediction:
    """`predict_decode_speedup` over one scenario's pairs: telemetry + the candidate's token counts, the baseline's
    TPOT; the candidate's timing gives only the measured speedup and the observed `step_cost` diagnostic.

    Without `verify_cost` (a calibration or `verify_cost.leave_one_out`) the prediction is null, never circular.
    """
    tokens = [max(0, p.candidate.completion_tokens - 1) for p in pairs if p.candidate.completion_tokens is not None]
    telemetry = None
    if per_position_rates is not None and len(per_position_rates) > 0:
        telemetry = AcceptanceTelemetry(
            per_position_rates=tuple(float(r) for r in per_position_rates),
            rate_kind=rate_kind,
            num_drafts=num_drafts if num_drafts is not None and num_drafts >= 0 else None,
            decode_tokens=sum(tokens) if tokens else None,
        )
    token_s, _ = baseline_tpot(pairs)
    prediction = predict_decode_speedup(
        telemetry,
        verify_cost=verify_cost,
        proposer=proposer,
        baseline_token_s=token_s,
        measured=measured_decode_speedup(pairs),
    )
    expected = prediction.expected_tokens_per_step
    observed = measure_step_cost(pairs, num_drafts=num_drafts, tokens_per_draft_step=expected)
    return prediction.model_copy(update={"step_cost": observed})
