"""Output parity at temperature 0: per request, per scenario, against the baseline's own noise floor.

The contract's quality rule is exact equality with the baseline's output for the same prompt. A mismatch
is only a quality failure when the baseline is self-consistent on that item; when the baseline's own
repeats disagree (batched-kernel numerics) or the divergence is a near tie of the target's top-2
logprobs there, it is `inconclusive` instead. The policy applied is written into the result.

Both sides run the target's weights on the same prefix up to the first divergence, so the top-2 gap at that
position can come from the baseline's logprob pass or, when only the candidate ran one, from the candidate's
(its verifier is the target); each divergence says which side's logprobs judged it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

from specselect._evidence.samples import RequestKey
from specselect.records.evidence.parity import (
    Attribution,
    BaselineConsistency,
    DivergenceClass,
    ParityPolicy,
    ParityVerdict,
    RequestDivergence,
    RequestParity,
    ScenarioParity,
)
from specselect.records.measurement import RequestRecord

__all__ = [
    "CHARACTER_LEVEL_NOTE",
    "Output",
    "baseline_consistency",
    "classify_divergence",
    "compare_outputs",
    "compare_text",
    "compare_tokens",
    "has_token_ids",
    "outputs_for_parity",
    "pass_logprobs",
    "quality_ok_from_verdict",
    "scenario_parity",
]

CHARACTER_LEVEL_NOTE = "character-level comparison (token ids unavailable): indices count characters, not tokens"

Output = Sequence[int] | str | None
"""A request's output: token ids (preferred), the text, or None when the request produced none."""


def quality_ok_from_verdict(verdict: ParityVerdict) -> bool | None:
    """pass -> True, fail -> False, inconclusive / not_assessed -> None (unknown, not a failure)."""
    return {ParityVerdict.PASS: True, ParityVerdict.FAIL: False}.get(verdict)


def _first_difference(base: Sequence[object], cand: Sequence[object]) -> int | None:
    for i, (a, b) in enumerate(zip(base, cand, strict=False)):
        if a != b:
            return i
    return None if len(base) == len(cand) else min(len(base), len(cand))


def compare_tokens(base: Sequence[int], cand: Sequence[int]) -> RequestParity:
    """Compare token ids: equal, first divergence, common-prefix length and both lengths."""
    diverge = _first_difference(base, cand)
    return RequestParity(
        equal=diverge is None,
        first_divergence=diverge,
        unit="token",
        lcp_tokens=len(base) if diverge is None else diverge,
        base_len=len(base),
        cand_len=len(cand),
    )


def compare_text(base: str, cand: str) -> RequestParity:
    """Fallback when token ids are unavailable: the first diverging character (noted as character-level)."""
    diverge = _first_difference(base, cand)
    return RequestParity(
        equal=diverge is None,
        first_divergence=diverge,
        unit="character",
        lcp_tokens=None,
        lcp_chars=len(base) if diverge is None else diverge,
        base_len=len(base),
        cand_len=len(cand),
        note=CHARACTER_LEVEL_NOTE,
    )


def compare_outputs(base: Output, cand: Output) -> RequestParity | None:
    """Tokens when both sides have token ids, text when both have text; None when they cannot be compared."""
    if base is None or cand is None:
        return None
    if isinstance(base, str) and isinstance(cand, str):
        return compare_text(base, cand)
    if not isinstance(base, str) and not isinstance(cand, str):
        return compare_tokens(base, cand)
    return None


def _top2_gap(top_logprobs: Sequence[float]) -> float | None:
    values = sorted((float(v) for v in top_logprobs if not math.isnan(float(v))), reverse=True)
    if len(values) < 2:
        return None
    gap = values[0] - values[1]
    return None if math.isnan(gap) else gap


def classify_divergence(top2_logprobs: Sequence[float], threshold_nats: float = 0.1) -> DivergenceClass | None:
    """`near_tie` when the target's best two logprobs at the divergence differ by < threshold; None if unusable."""
    gap = _top2_gap(top2_logprobs)
    if gap is None:
        return None
    return "near_tie" if gap < threshold_nats else "real_difference"


def _consistency_by_item(baseline: Mapping[RequestKey, Output]) -> dict[str, bool]:
    by_item: dict[str, list[tuple[int, Output]]] = {}
    for (item, repeat), output in baseline.items():
        if output is not None:
            by_item.setdefault(item, []).append((repeat, output))
    verdicts: dict[str, bool] = {}
    for item, outputs in by_item.items():
        outputs.sort(key=lambda x: x[0])
        reference = outputs[0][1]
        checks = [compare_outputs(reference, other) for _, other in outputs[1:]]
        known = [c for c in checks if c is not None]
        if known:
            verdicts[item] = all(c.equal for c in known)
    return verdicts


def baseline_consistency(baseline: Mapping[RequestKey, Output]) -> BaselineConsistency:
    """Compare each item's baseline repeats with its first repeat; items with one repeat are not checked."""
    return _summarize_consistency(_consistency_by_item(baseline))


def _summarize_consistency(verdicts: Mapping[str, bool]) -> BaselineConsistency:
    bad = tuple(sorted(item for item, ok in verdicts.items() if not ok))
    return BaselineConsistency(
        n_items_checked=len(verdicts),
        n_items_inconsistent=len(bad),
        noise_floor=len(bad) / len(verdicts) if verdicts else None,
        inconsistent_items=bad,
    )


TopLogprobs = Mapping[RequestKey, Sequence[Sequence[float]]]
"""Per request, the top logprobs at each generated position."""


def _gap_at_divergence(key: RequestKey, parity: RequestParity, logprobs: TopLogprobs | None) -> float | None:
    if logprobs is None or parity.unit != "token" or parity.first_divergence is None:
        return None
    positions = logprobs.get(key)
    if positions is None or parity.first_divergence >= len(positions):
        return None
    return _top2_gap(positions[parity.first_divergence])


def _logprob_class(
    key: RequestKey,
    parity: RequestParity,
    sources: Sequence[tuple[Literal["baseline", "candidate"], TopLogprobs | None]],
    threshold: float,
) -> tuple[DivergenceClass | None, float | None, Literal["baseline", "candidate"] | None]:
    for side, logprobs in sources:
        gap = _gap_at_divergence(key, parity, logprobs)
        if gap is not None:
            return ("near_tie" if gap < threshold else "real_difference"), gap, side
    return None, None, None


def _attribute(consistent: bool | None, label: DivergenceClass | None, policy: ParityPolicy) -> Attribution:
    if consistent is False:
        return "baseline_noise"
    if label == "near_tie" and policy.near_tie_is_numerics:
        return "near_tie"
    # No second baseline repeat means no control: the contract's exact-equality rule applies.
    return "unexplained"


_Sources = tuple[tuple[Literal["baseline", "candidate"], TopLogprobs | None], ...]
"""Whose top logprobs may judge a divergence, in the order they are asked."""


def _divergence(
    key: RequestKey, parity: RequestParity, consistent: bool | None, sources: _Sources, policy: ParityPolicy
) -> RequestDivergence:
    """One mismatching request judged by the baseline's consistency on its item and the top-2 logprob gap."""
    label, gap, source = _logprob_class(key, parity, sources, policy.near_tie_threshold_nats)
    return RequestDivergence(
        item_id=key[0],
        repeat=key[1],
        parity=parity,
        baseline_consistent=consistent,
        classification=label,
        logprob_gap_nats=gap,
        logprob_source=source,
        attribution=_attribute(consistent, label, policy),
    )


def scenario_parity(
    baseline: Mapping[RequestKey, Output],
    candidate: Mapping[RequestKey, Output],
    *,
    baseline_top_logprobs: TopLogprobs | None = None,
    candidate_top_logprobs: TopLogprobs | None = None,
    policy: ParityPolicy | None = None,
) -> ScenarioParity:
    """Compare outputs keyed by (item_id, repeat) and give the verdict (see the module docstring).

    `baseline_top_logprobs[key][position]` holds the baseline's top logprobs at each generated position (the
    candidate's likewise); only the entry at the first divergence is read, the baseline's first.
    """
    sources: _Sources = (("baseline", baseline_top_logprobs), ("candidate", candidate_top_logprobs))
    policy = policy or ParityPolicy()
    per_item = _consistency_by_item(baseline)
    shared = sorted(baseline.keys() & candidate.keys())
    compared = ((key, compare_outputs(baseline[key], candidate[key])) for key in shared)
    results = [(key, parity) for key, parity in compared if parity is not None]
    divergences = [
        _divergence(key, parity, per_item.get(key[0]), sources, policy) for key, parity in results if not parity.equal
    ]
    units = {p.unit for _, p in results}
    indices = [d.parity.first_divergence for d in divergences if d.parity.first_divergence is not None]
    n_equal = len(results) - len(divergences)
    verdict, reason = _verdict(len(results), divergences)
    return ScenarioParity(
        verdict=verdict,
        quality_ok=quality_ok_from_verdict(verdict),
        reason=reason,
        n_compared=len(results),
        n_equal=n_equal,
        match_share=n_equal / len(results) if results else None,
        n_baseline_only=len(baseline.keys() - candidate.keys()),
        n_candidate_only=len(candidate.keys() - baseline.keys()),
        n_not_comparable=len(shared) - len(results),
        unit=(units.pop() if len(units) == 1 else "mixed") if units else None,
        min_first_divergence=min(indices) if indices else None,
        median_first_divergence=float(statistics.median(indices)) if indices else None,
        divergences=tuple(divergences),
        baseline_consistency=_summarize_consistency(per_item),
        policy=policy,
    )


def _verdict(n_compared: int, divergences: Sequence[RequestDivergence]) -> tuple[ParityVerdict, str]:
    if n_compared == 0:
        return ParityVerdict.NOT_ASSESSED, "no_comparable_requests"
    if not divergences:
        return ParityVerdict.PASS, "all_outputs_equal"
    unexplained = [d for d in divergences if d.attribution == "unexplained"]
    if unexplained:
        if all(d.baseline_consistent is None for d in unexplained):
            return ParityVerdict.FAIL, "mismatch_without_baseline_repeats"
        return ParityVerdict.FAIL, "mismatch_with_self_consistent_baseline"
    if all(d.attribution == "near_tie" for d in divergences):
        return ParityVerdict.INCONCLUSIVE, "mismatches_are_near_ties"
    if all(d.attribution == "baseline_noise" for d in divergences):
        return ParityVerdict.INCONCLUSIVE, "mismatches_within_baseline_noise"
    return ParityVerdict.INCONCLUSIVE, "mismatches_within_baseline_noise_or_near_ties"


def has_token_ids(records: Sequence[RequestRecord]) -> bool:
    """True when every measured, successful record carries its output token ids (then parity is exact)."""
    measured = [r for r in records if not r.warmup and r.ok]
    return bool(measured) and all(r.output_token_ids is not None for r in measured)


def outputs_for_parity(records: Sequence[RequestRecord], *, tokens: bool) -> dict[RequestKey, Output]:
    """Outputs keyed by (item_id, repeat) -- token ids or texts; a failed request maps to None."""
    out: dict[RequestKey, Output] = {}
    for rec in records:
        key = (rec.item_id, rec.repeat)
        if rec.warmup or key in out:
            continue
        if not rec.ok:
            out[key] = None
        else:
            out[key] = list(rec.output_token_ids or []) if tokens else rec.output_text
    return out


def _top_values(rec: RequestRecord) -> list[list[float]] | None:
    if not rec.logprobs:
        return None
    return [[v for _, v in lp.top if v is not None] for lp in rec.logprobs]


def pass_logprobs(
    timed: Mapping[RequestKey, Output], parity_pass: Sequence[RequestRecord]
) -> dict[RequestKey, list[list[float]]]:
    """Top logprobs of one group's parity pass, per timed request of that group, up to the first position where
    the pass took another token than the timed output (beyond it the logprobs describe another continuation)."""
    by_item: dict[str, tuple[list[int], list[list[float]]]] = {}
    for rec in parity_pass:
        tops = _top_values(rec)
        if rec.ok and not rec.warmup and rec.output_token_ids is not None and tops is not None:
            by_item.setdefault(rec.item_id, (list(rec.output_token_ids), tops))
    out: dict[RequestKey, list[list[float]]] = {}
    for key, output in timed.items():
        if output is None or isinstance(output, str) or key[0] not in by_item:
            continue
        ids, tops = by_item[key[0]]
        same = next(
            (i for i, (a, b) in enumerate(zip(output, ids, strict=False)) if a != b), min(len(output), len(ids))
        )
        out[key] = tops[: same + 1]
    return out
