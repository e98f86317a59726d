"""Input-length segments: where in the range of prompt lengths a mechanism pays, in the manner of SPEED-Bench.

SPEED-Bench (NVIDIA's speculative-decoding benchmark) measures speedups on fixed input-sequence-length buckets
(its Throughput split: ~1k, 2k, 8k, 16k and 32k tokens), because a proposer that pays on short prompts can lose
on long ones (the verify step and the drafter's own prefill grow with the context) and the reverse. specselect's
prompts are real ones of any length, so each measured item (its requests of every launch and repeat, both sides)
falls into the bucket that holds its prompt's token count; the buckets below 1k, where SPEED-Bench has none but
most chat and code prompts lie, halve down to 64.

Per bucket: THE speedup with the scenario's own estimator on the bucket's samples of both sides
(`evidence.rounds.pair_estimate`: over several rounds its interval counts the launch-to-launch variation of the
bucket's own per-round ratios, in one round the items' alone), the candidate's acceptance
from its per-request counters, and the item counts; a bucket with too few items says so instead of a number.
Each bucket and the pooled scenario get an outcome (pays / faster / unclear / loses) by one rule, and the buckets
that clearly pay or lose where the pooled scenario does not are named: that is where the pooled answer hides
something.
A diagnostic of where the speed comes from, never a decision (the decision stays per scenario, contract s5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specselect._evidence.categories import acceptance_summary
from specselect._evidence.rounds.estimate import pair_estimate
from specselect._evidence.samples import RequestSample, pair_launches
from specselect._evidence.stats import decode_speedup
from specselect.records.evidence.segments import (
    InputLengthSegments,
    Segment,
    SegmentOutcome,
    SegmentPolicy,
)
from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate

__all__ = ["bucket_label", "input_length_segments", "item_lengths", "speedup_outcome"]


_CLEAR: frozenset[str] = frozenset({"pays", "loses"})


def item_lengths(baseline: Sequence[RequestSample], candidate: Sequence[RequestSample]) -> dict[str, int]:
    """Each item's prompt length in tokens: the baseline's count, else the candidate's (the same prompt in every
    launch and repeat; the smallest when its requests disagree); items with neither are absent."""
    lengths: dict[str, int] = {}
    for side in (baseline, candidate):
        side_lengths: dict[str, int] = {}
        for sample in side:
            count = sample.prompt_tokens
            if count is not None and count >= 0 and sample.item_id not in lengths:
                side_lengths[sample.item_id] = min(count, side_lengths.get(sample.item_id, count))
        lengths.update(side_lengths)
    return lengths


def _bounds(tokens: int, edges: Sequence[int]) -> tuple[int, int | None]:
    low = 0
    for edge in edges:
        if tokens < edge:
            return low, edge
        low = edge
    return low, None


def bucket_label(low: int, high: int | None) -> str:
    """`low-(high-1)` in tokens, or `low+` for the open-ended last bucket."""
    return f"{low}+" if high is None else f"{low}-{high - 1}"


def speedup_outcome(estimate: RatioEstimate | None, n_items: int, policy: SegmentPolicy) -> SegmentOutcome:
    """pays / faster / unclear / loses from a speedup interval; too_few_items or no_estimate when it cannot say."""
    if n_items < policy.min_items:
        return "too_few_items"
    if estimate is None or estimate.low is None or estimate.high is None:
        return "no_estimate"
    if estimate.low >= policy.min_speedup:
        return "pays"
    if estimate.low > 1.0:
        return "faster"
    if estimate.high < 1.0:
        return "loses"
    return "unclear"


@dataclass(frozen=True)
class _Judge:
    policy: SegmentPolicy
    bootstrap: BootstrapPolicy
    level: float


def _throughput(baseline: Sequence[RequestSample], candidate: Sequence[RequestSample], judge: _Judge) -> RatioEstimate:
    """THE speedup of these samples by the decision's estimator, with the bucket's own round variance."""
    estimate = pair_estimate(baseline, candidate, level=judge.level, basis=judge.bootstrap.throughput_basis)
    return estimate.as_ratio_estimate(n_samples=len(pair_launches(baseline, candidate).pairs))


def _segment(
    label: str,
    bounds: tuple[int, int | None],
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    judge: _Judge,
) -> Segment:
    policy, boot = judge.policy, judge.bootstrap
    pairs = pair_launches(baseline, candidate).pairs
    n_items = len({p.item_id for p in pairs})
    enough = n_items >= policy.min_items
    speedup = _throughput(baseline, candidate, judge) if enough else None
    too_few = f"too few items: {n_items}, at least {policy.min_items} needed for a speedup with an interval"
    return Segment(
        label=label,
        low_tokens=bounds[0],
        high_tokens=bounds[1],
        n_pairs=len(pairs),
        n_items=n_items,
        throughput_speedup=speedup,
        decode_speedup=decode_speedup(pairs, boot) if enough else None,
        acceptance=acceptance_summary(p.candidate for p in pairs) if enough else None,
        outcome=speedup_outcome(speedup, n_items, policy),
        note=speedup.reason if speedup is not None else too_few,
    )


def input_length_segments(
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    *,
    policy: SegmentPolicy,
    bootstrap: BootstrapPolicy | None = None,
    level: float | None = None,
) -> InputLengthSegments:
    """Split one scenario's samples (every launch of both sides) by their item's prompt length (`policy.edges`)
    and evaluate each non-empty bucket.

    The pooled part uses every sample (with or without a length), so its point is the scenario's THE speedup
    (its interval rests on this pair's own round variance, where the decision may pool the run's). `level`:
    the intervals' level (default the bootstrap policy's).
    """
    boot = bootstrap or BootstrapPolicy()
    judge = _Judge(policy, boot, boot.level if level is None else level)
    lengths = item_lengths(baseline, candidate)
    buckets: dict[tuple[int, int | None], set[str]] = {}
    for item, tokens in lengths.items():
        buckets.setdefault(_bounds(tokens, policy.edges), set()).add(item)
    pooled = _segment("all", (0, None), baseline, candidate, judge)
    segments = tuple(
        _segment(
            bucket_label(*bounds),
            bounds,
            [s for s in baseline if s.item_id in items],
            [s for s in candidate if s.item_id in items],
            judge,
        )
        for bounds, items in sorted(buckets.items(), key=lambda kv: kv[0][0])
    )
    disagreeing = tuple(s.label for s in segments if s.outcome in _CLEAR and s.outcome != pooled.outcome)
    without = sum(1 for p in pair_launches(baseline, candidate).pairs if p.item_id not in lengths)
    return InputLengthSegments(
        pooled=pooled,
        segments=segments,
        disagreeing=disagreeing,
        n_without_length=without,
        policy=policy,
        bootstrap=judge.bootstrap,
        level=judge.level,
    )
