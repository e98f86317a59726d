"""Predicted decode speedup from acceptance (expected tokens per step) and the measured cost of a step.

Per-position acceptance rates are CUMULATIVE by default: rate i = P(the first i draft tokens are all
accepted), which is what vLLM's per-position counters give (accepted at position i / drafts). Then the
expected tokens per verification step is E = 1 + sum_i rate_i (the 1 is the target's own bonus token);
with conditional rates q_i, rate_i = q_1 * ... * q_i. With one i.i.d. rate a over k positions,
E = (1 - a^(k+1)) / (1 - a).

predicted decode speedup = E_all / relative_step_cost, where relative_step_cost = (candidate decode time per
target step) / (baseline decode time per token). Retrieval proposers (n-gram, suffix) draft only when they find a
match, so a run mixes drafting steps (E tokens each) with plain steps (1 token each): with the server's draft count
and the candidate's decode tokens T, plain steps = T - drafts * E, and E_all = T / (drafts + plain steps) is the
tokens per target step actually implied by the telemetry (E_all = E when every step drafts).
Acceptance comes only from engine telemetry; when it is missing the prediction stays null -- it is never
inferred from latency.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from specselect.evidence.samples import RequestPair
from specselect.evidence.stats import decode_rate

__all__ = [
    "PREDICTION_SCHEMA_VERSION",
    "RateKind",
    "SpeedupPrediction",
    "StepCost",
    "expected_tokens_iid",
    "expected_tokens_per_step",
    "measure_step_cost",
    "measured_decode_speedup",
    "per_position_rates_from_counts",
    "predict_speedup",
]

PREDICTION_SCHEMA_VERSION = 1
RateKind = Literal["cumulative", "conditional"]
_TOLERANCE = 1e-9


def expected_tokens_per_step(rates: Sequence[float], kind: RateKind = "cumulative") -> float:
    """E = 1 + sum_i P(first i accepted); ValueError for rates outside [0, 1] or rising cumulative rates."""
    values = [float(r) for r in rates]
    if any(not (-_TOLERANCE <= r <= 1 + _TOLERANCE) for r in values):
        raise ValueError(f"acceptance rates must lie in [0, 1], got {values}")
    values = [min(max(r, 0.0), 1.0) for r in values]
    if kind == "conditional":
        cumulative: list[float] = []
        running = 1.0
        for q in values:
            running *= q
            cumulative.append(running)
        values = cumulative
    elif any(later > earlier + _TOLERANCE for earlier, later in itertools.pairwise(values)):
        raise ValueError(f"cumulative acceptance rates cannot rise with position, got {values}")
    return 1.0 + math.fsum(values)


def expected_tokens_iid(acceptance_rate: float, k: int) -> float:
    """E = (1 - a^(k+1)) / (1 - a) for an i.i.d. per-token acceptance rate a and k draft tokens (k + 1 at a = 1)."""
    a = float(acceptance_rate)
    if not 0.0 <= a <= 1.0 or k < 0:
        raise ValueError(f"need 0 <= acceptance_rate <= 1 and k >= 0, got a={a}, k={k}")
    if a == 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def per_position_rates_from_counts(accepted_per_position: Sequence[int], num_drafts: int) -> tuple[float, ...] | None:
    """Cumulative per-position rates from counters (accepted at position i / drafts); None without drafts."""
    if num_drafts <= 0 or not accepted_per_position or any(c < 0 for c in accepted_per_position):
        return None
    return tuple(min(1.0, c / num_drafts) for c in accepted_per_position)


class StepCost(BaseModel):
    """What one speculative step costs relative to one baseline decode token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate_step_s: float
    baseline_token_s: float
    relative_step_cost: float
    num_spec_steps: int
    plain_steps: int = 0
    """Target steps that carried no draft (retrieval proposers without a match)."""
    step_source: Literal["per_request_num_spec_steps", "num_drafts"]
    n_candidate_requests: int
    n_baseline_requests: int


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def measure_step_cost(
    pairs: Sequence[RequestPair], *, num_drafts: int | None = None, tokens_per_draft_step: float | None = None
) -> StepCost | None:
    """Candidate decode seconds per target step over baseline decode seconds per token; None if unknown.

    Steps come from the per-request `num_spec_steps`, or from `num_drafts` (the server's draft counter delta
    over exactly these requests) when given; with `tokens_per_draft_step` (E) the plain steps that carried no
    draft are added: plain = candidate decode tokens - drafts * E.
    """
    base_time = base_tokens = 0.0
    n_base = 0
    for pair in pairs:
        rate = decode_rate(pair.baseline)
        if rate is not None:
            base_tokens += rate[0]
            base_time += rate[1]
            n_base += 1
    cand_time = cand_tokens = 0.0
    steps = n_cand = 0
    for pair in pairs:
        sample = pair.candidate
        if sample.decode_s is None or not _positive(sample.decode_s):
            continue
        cand_tokens += max(0, (sample.completion_tokens or 0) - 1)
        if num_drafts is None:
            if sample.spec is None or not sample.spec.num_spec_steps or sample.spec.num_spec_steps <= 0:
                continue
            steps += sample.spec.num_spec_steps
        cand_time += sample.decode_s
        n_cand += 1
    plain = 0
    if num_drafts is not None:
        steps = num_drafts
        if tokens_per_draft_step is not None and math.isfinite(tokens_per_draft_step):
            plain = max(0, round(cand_tokens - num_drafts * tokens_per_draft_step))
            steps += plain
    if n_base == 0 or n_cand == 0 or steps <= 0 or base_tokens <= 0:
        return None
    step_s, token_s = cand_time / steps, base_time / base_tokens
    relative = step_s / token_s if _positive(token_s) else None
    if not (_positive(step_s) and _positive(relative)) or relative is None:
        return None
    return StepCost(
        candidate_step_s=step_s,
        baseline_token_s=token_s,
        relative_step_cost=relative,
        num_spec_steps=steps - plain,
        plain_steps=plain,
        step_source="per_request_num_spec_steps" if num_drafts is None else "num_drafts",
        n_candidate_requests=n_cand,
        n_baseline_requests=n_base,
    )


def measured_decode_speedup(pairs: Sequence[RequestPair]) -> float | None:
    """Decode tokens/s of the candidate over the baseline's, ratio of totals over pairs usable on both sides."""
    totals = [0.0, 0.0, 0.0, 0.0]
    for pair in pairs:
        base, cand = decode_rate(pair.baseline), decode_rate(pair.candidate)
        if base is None or cand is None:
            continue
        for i, value in enumerate((*cand, *base)):
            totals[i] += value
    if totals[1] <= 0 or totals[3] <= 0 or totals[2] <= 0:
        return None
    value = (totals[0] / totals[1]) / (totals[2] / totals[3])
    return value if math.isfinite(value) else None


class SpeedupPrediction(BaseModel):
    """Predicted vs measured decode speedup; null fields are listed in `missing`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = PREDICTION_SCHEMA_VERSION
    rate_kind: RateKind
    per_position_rates: tuple[float, ...] | None
    expected_tokens_per_step: float | None
    """E: tokens per drafting step implied by the per-position acceptance rates."""
    tokens_per_target_step: float | None = None
    """E_all: E averaged with the plain (no-draft) steps; the ideal speedup if a step cost one decode step."""
    step_cost: StepCost | None
    predicted_decode_speedup: float | None
    measured_decode_speedup: float | None
    gap: float | None
    """measured - predicted."""
    relative_gap: float | None
    """(measured - predicted) / predicted."""
    missing: tuple[str, ...] = ()
    model: str = (
        "E = 1 + sum_i P(first i accepted); E_all = T / (drafts + plain steps); predicted = E_all / relative_step_cost"
    )


def predict_speedup(
    pairs: Sequence[RequestPair],
    per_position_rates: Sequence[float] | None,
    *,
    rate_kind: RateKind = "cumulative",
    num_drafts: int | None = None,
) -> SpeedupPrediction:
    """Predict the decode speedup from engine-reported acceptance and the measured step cost; never raises."""
    missing: list[str] = []
    rates: tuple[float, ...] | None = None
    expected: float | None = None
    if per_position_rates is None or len(per_position_rates) == 0:
        missing.append("per_position_acceptance_rates")
    else:
        rates = tuple(float(r) for r in per_position_rates)
        try:
            expected = expected_tokens_per_step(rates, rate_kind)
        except ValueError:
            missing.append("valid_per_position_acceptance_rates")
    cost = measure_step_cost(pairs, num_drafts=num_drafts, tokens_per_draft_step=expected)
    if cost is None:
        missing.append("step_cost")
    measured = measured_decode_speedup(pairs)
    if measured is None:
        missing.append("measured_decode_speedup")
    per_target: float | None = None
    if expected is not None and cost is not None:
        drafting = cost.num_spec_steps
        per_target = _finite((drafting * expected + cost.plain_steps) / (drafting + cost.plain_steps))
        if per_target is None:
            missing.append("finite_tokens_per_target_step")
    predicted = _finite(per_target / cost.relative_step_cost) if per_target is not None and cost is not None else None
    gap = _finite(measured - predicted) if measured is not None and predicted is not None else None
    return SpeedupPrediction(
        rate_kind=rate_kind,
        per_position_rates=rates,
        expected_tokens_per_step=expected,
        tokens_per_target_step=per_target,
        step_cost=cost,
        predicted_decode_speedup=predicted,
        measured_decode_speedup=measured,
        gap=gap,
        relative_gap=_finite(gap / predicted) if gap is not None and predicted else None,
        missing=tuple(missing),
    )
