"""Predicted decode speedup from acceptance telemetry and a cost model made of OTHER measurements.

Tokens. Per-position acceptance rates are CUMULATIVE by default: rate i = P(the first i drafts are accepted) =
accepted at position i / drafts, vLLM's per-position counters (with conditional rates q_i, rate_i = q_1...q_i).
A drafting step yields E = 1 + sum_i rate_i tokens (the 1 is the target's bonus token). Retrieval proposers
draft only on a match: with the server's draft count D and the candidate's decode TOKEN count T (a count, not a
time) there are P = T - D * E plain steps, and E_all = T / (D + P) tokens per target step.

Cost, in baseline decode steps (the baseline's TPOT): a drafting step costs c(k) + k * d, where c(k) is the
verify-cost model (one target step over k + 1 tokens; c(0) = 1 by definition) and d the proposer's cost per
drafted token; a plain step costs 1. Hence

    predicted decode speedup = T / (D * (c(k) + k * d) + P)        (= E / (c(k) + k * d) when every step drafts)

which is Leviathan et al.'s improvement factor (1 - a^(k+1)) / ((1 - a)(k d + 1)) when c(k) = 1 and rates are
i.i.d. No input is the candidate's own timing: c(k) is a calibration or a fit to the OTHER lengths of a sweep
(`verify_cost`), d is the draft model's own measured step or 0 for n-gram / suffix (a stated
assumption), and the candidate's measured speedup only scores the prediction. The candidate's observed step
cost (`StepCost`) is reported as a diagnostic of where the error comes from, never used. Acceptance comes only
from engine telemetry; without it the prediction stays null -- it is never inferred from latency.

- `tokens`: acceptance telemetry -> E and E_all
- `model`: the cost model, `predict_decode_speedup` (no candidate timing in its signature), `predict_speedup`
- `verify_cost`: c(k) from the other lengths of a sweep (leave one out) or from the baseline's prefill
- `observed`: the measured decode speedup, the baseline's TPOT, the candidate's observed step cost (diagnostic)
"""

from __future__ import annotations

from specselect._evidence.prediction.cost_model import predict_decode_speedup, predict_speedup
from specselect._evidence.prediction.observed import baseline_tpot, measure_step_cost, measured_decode_speedup
from specselect._evidence.prediction.tokens import (
    AcceptanceTelemetry,
    StepCounts,
    expected_tokens_iid,
    expected_tokens_per_step,
    per_position_rates_from_counts,
    step_counts,
)
from specselect._evidence.prediction.verify_cost import (
    FitForm,
    SweepObservation,
    fit_verify_cost,
    implied_verify_cost,
    leave_one_out,
    verify_cost_from_prefill,
)

__all__ = [
    "AcceptanceTelemetry",
    "FitForm",
    "StepCounts",
    "SweepObservation",
    "baseline_tpot",
    "expected_tokens_iid",
    "expected_tokens_per_step",
    "fit_verify_cost",
    "implied_verify_cost",
    "leave_one_out",
    "measure_step_cost",
    "measured_decode_speedup",
    "per_position_rates_from_counts",
    "predict_decode_speedup",
    "predict_speedup",
    "step_counts",
    "verify_cost_from_prefill",
]
