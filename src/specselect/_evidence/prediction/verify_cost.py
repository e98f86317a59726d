"""Verify-cost models c(k) from measurements other than the candidate's own timing.

Leave one out over a sweep: the OTHER proposal lengths (same family, proposer and scenario) each imply the cost
of their drafting step by inverting the model with their own measured decode speedup S_j,
    x_j = (T_j / S_j - P_j) / D_j   (E_j / S_j when every step drafts),   c_j = x_j - k_j * d,
and c(k) = 1 + b * k is fitted through them (`anchored`: b = sum k_j (c_j - 1) / sum k_j^2, one other length is
enough) or a + b * k (`affine`: least squares, two distinct other lengths). `leave_one_out` predicts every length
from the fit to the others, so no length's prediction ever sees its own timing.

From the baseline alone (`verify_cost_from_prefill`): c(k) = 1 + k * beta / tpot, beta the slope of TTFT on
prompt tokens (the compute of one more token in a forward pass, cold prefill), tpot the baseline's decode
seconds per token: verifying k more tokens costs one decode step plus k tokens' compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from specselect._evidence.prediction.cost_model import predict_decode_speedup
from specselect._evidence.prediction.tokens import AcceptanceTelemetry, step_counts
from specselect._evidence.samples import RequestSample
from specselect._evidence.stats import decode_rate
from specselect.records.evidence.prediction import ProposerCost, SpeedupPrediction, VerifyCostModel

__all__ = [
    "FitForm",
    "SweepObservation",
    "fit_verify_cost",
    "implied_verify_cost",
    "leave_one_out",
    "verify_cost_from_prefill",
]

FitForm = Literal["anchored", "affine"]


class SweepObservation(BaseModel):
    """One proposal length of a sweep: its telemetry and its measured decode speedup (used only for OTHER lengths)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str = Field(min_length=1)
    telemetry: AcceptanceTelemetry
    measured_decode_speedup: Annotated[float, Field(gt=0, allow_inf_nan=False)]


def implied_verify_cost(observation: SweepObservation, proposer: ProposerCost) -> float | None:
    """c_j: the verify cost this length's own measurement implies under the model; None when undefined."""
    try:
        counts = step_counts(observation.telemetry)
    except ValueError:
        return None
    speedup, k = observation.measured_decode_speedup, observation.telemetry.k
    if counts.drafting_steps is None or counts.plain_steps is None:
        step = counts.expected_tokens_per_step / speedup
    else:
        tokens = counts.drafting_steps * counts.expected_tokens_per_step + counts.plain_steps
        step = (tokens / speedup - counts.plain_steps) / counts.drafting_steps
    cost = step - k * proposer.per_token
    return cost if math.isfinite(cost) and k >= 1 else None


def _fit(points: Sequence[tuple[int, float]], form: FitForm) -> tuple[float, float] | None:
    ks = np.asarray([k for k, _ in points], dtype=np.float64)
    cs = np.asarray([c for _, c in points], dtype=np.float64)
    if form == "anchored":
        return (1.0, float(ks @ (cs - 1.0) / (ks @ ks))) if ks.size else None
    if np.unique(ks).size < 2:
        return None
    slope, intercept = np.polyfit(ks, cs, 1)
    return (float(intercept), float(slope)) if intercept > 0 else None


def fit_verify_cost(
    observations: Sequence[SweepObservation],
    proposer: ProposerCost,
    *,
    exclude: str | None = None,
    form: FitForm = "anchored",
) -> VerifyCostModel | None:
    """c(k) fitted to the implied costs of every observation but `exclude`; None when too few remain."""
    used = [
        (o.candidate, o.telemetry.k, implied_verify_cost(o, proposer)) for o in observations if o.candidate != exclude
    ]
    points = [(name, k, c) for name, k, c in used if c is not None]
    fitted = _fit([(k, c) for _, k, c in points], form)
    if fitted is None:
        return None
    return VerifyCostModel(
        intercept=fitted[0],
        slope=fitted[1],
        source="leave_one_out_sweep",
        fitted_from=tuple(sorted(name for name, _, _ in points)),
        n_points=len(points),
        form=form,
    )


def leave_one_out(
    observations: Sequence[SweepObservation],
    proposer: ProposerCost,
    *,
    form: FitForm = "anchored",
    baseline_token_s: float | None = None,
) -> tuple[SpeedupPrediction, ...]:
    """Each length's prediction from the c(k) fitted to the OTHER lengths, scored against its own measurement.

    Raises ValueError when two observations share a candidate name (leaving one out would be ambiguous).
    """
    names = [o.candidate for o in observations]
    if len(set(names)) != len(names):
        raise ValueError(f"leave_one_out got duplicate candidates {sorted(names)}; pass one observation per length")
    return tuple(
        predict_decode_speedup(
            o.telemetry,
            verify_cost=fit_verify_cost(observations, proposer, exclude=o.candidate, form=form),
            proposer=proposer,
            baseline_token_s=baseline_token_s,
            measured=o.measured_decode_speedup,
        )
        for o in observations
    )


def verify_cost_from_prefill(baseline: Sequence[RequestSample], *, min_lengths: int = 3) -> VerifyCostModel | None:
    """c(k) = 1 + k * beta / tpot from the baseline's own requests; None without `min_lengths` prompt lengths."""
    points = [
        (float(s.prompt_tokens), float(s.ttft_s))
        for s in baseline
        if s.prompt_tokens is not None and s.prompt_tokens > 0 and s.ttft_s is not None and math.isfinite(s.ttft_s)
    ]
    rates = [r for r in (decode_rate(s) for s in baseline) if r is not None]
    tokens = math.fsum(r[0] for r in rates)
    if len({p for p, _ in points}) < min_lengths or tokens <= 0:
        return None
    beta = float(np.polyfit([p for p, _ in points], [t for _, t in points], 1)[0])
    tpot = math.fsum(r[1] for r in rates) / tokens
    if not (math.isfinite(beta) and beta > 0 and tpot > 0):
        return None
    return VerifyCostModel(
        slope=beta / tpot,
        source="baseline_prefill",
        fitted_from=("baseline: ttft vs prompt tokens", "baseline: decode seconds per token"),
        n_points=len(points),
    )
