"""What was measured: the decode speedup the prediction is scored against, the baseline's TPOT (the unit of every
relative cost) and the candidate's OBSERVED step cost -- a diagnostic of the prediction's error, never its input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specselect._evidence.samples import RequestPair
from specselect._evidence.stats import decode_rate
from specselect.records.evidence.prediction import StepCost

__all__ = ["baseline_tpot", "measure_step_cost", "measured_decode_speedup"]


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def baseline_tpot(pairs: Sequence[RequestPair]) -> tuple[float | None, int]:
    """Baseline decode seconds per token over the pairs (the TPOT every relative cost is in), and its requests."""
    rates = [r for r in (decode_rate(p.baseline) for p in pairs) if r is not None]
    tokens = math.fsum(r[0] for r in rates)
    token_s = math.fsum(r[1] for r in rates) / tokens if tokens > 0 else None
    # A subnormal decode time over several tokens underflows to 0.0: no rate, not a zero one.
    return (token_s if _positive(token_s) else None), len(rates)


def measure_step_cost(
    pairs: Sequence[RequestPair], *, num_drafts: int | None = None, tokens_per_draft_step: float | None = None
) -> StepCost | None:
    """Candidate decode seconds per target step over baseline decode seconds per token; None if unknown.

    A diagnostic beside the prediction (it reads the candidate's own timing). Steps come from the per-request
    `num_spec_steps`, or from `num_drafts` plus, with `tokens_per_draft_step` (E), the plain steps T - drafts * E.
    """
    token_s, n_base = baseline_tpot(pairs)
    cand_time = cand_tokens = 0.0
    steps = n_cand = 0
    for pair in pairs:
        sample = pair.candidate
        if not _positive(sample.decode_s):
            continue
        cand_tokens += max(0, (sample.completion_tokens or 0) - 1)
        if num_drafts is None:
            if sample.spec is None or not sample.spec.num_spec_steps or sample.spec.num_spec_steps <= 0:
                continue
            steps += sample.spec.num_spec_steps
        cand_time += sample.decode_s or 0.0
        n_cand += 1
    plain = 0
    if num_drafts is not None:
        steps = num_drafts
        if tokens_per_draft_step is not None and math.isfinite(tokens_per_draft_step):
            plain = max(0, round(cand_tokens - num_drafts * tokens_per_draft_step))
            steps += plain
    if token_s is None or n_cand == 0 or steps <= 0 or not _positive(cand_time / steps / token_s):
        return None
    return StepCost(
        candidate_step_s=cand_time / steps,
        baseline_token_s=token_s,
        relative_step_cost=cand_time / steps / token_s,
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
