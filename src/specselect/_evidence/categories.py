"""Per-category breakdown: speedup (with an interval when there are enough items) and acceptance per category.

Acceptance comes only from the engine's per-request speculative-decoding metrics; without them it is null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from specselect._evidence.samples import RequestPair, RequestSample
from specselect._evidence.stats import decode_speedup, throughput_speedup
from specselect.records.evidence.categories import (
    UNCATEGORIZED,
    AcceptanceSummary,
    CategoryBreakdown,
    CategoryEvidence,
)
from specselect.records.evidence.stats import BootstrapPolicy

__all__ = ["acceptance_summary", "category_breakdown"]


def acceptance_summary(samples: Iterable[RequestSample]) -> AcceptanceSummary | None:
    """Aggregate per-request counters; None when no request carried usable counters."""
    n = steps = drafted = accepted = 0
    per_request: list[float] = []
    for sample in samples:
        spec = sample.spec
        if spec is None or spec.num_draft_tokens is None or spec.num_accepted_draft_tokens is None:
            continue
        if spec.num_draft_tokens < 0 or not 0 <= spec.num_accepted_draft_tokens <= spec.num_draft_tokens:
            continue
        n += 1
        drafted += spec.num_draft_tokens
        accepted += spec.num_accepted_draft_tokens
        if spec.num_spec_steps is not None and spec.num_spec_steps > 0:
            steps += spec.num_spec_steps
        if spec.num_draft_tokens > 0:
            per_request.append(spec.num_accepted_draft_tokens / spec.num_draft_tokens)
    if n == 0:
        return None
    return AcceptanceSummary(
        n_requests=n,
        num_spec_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_draft_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted > 0 else None,
        mean_request_acceptance_rate=sum(per_request) / len(per_request) if per_request else None,
        mean_acceptance_length=1.0 + accepted / steps if steps > 0 else None,
    )


def category_breakdown(
    pairs: Sequence[RequestPair],
    *,
    categories: Mapping[str, str | None] | None = None,
    policy: BootstrapPolicy | None = None,
) -> CategoryBreakdown:
    """Split pairs by category (`categories[item_id]`, else the pair's own) and evaluate each part.

    A category with fewer distinct items than `policy.min_clusters` gets a point estimate without interval.
    """
    policy = policy or BootstrapPolicy()
    groups: dict[str, list[RequestPair]] = {}
    for pair in pairs:
        name = categories.get(pair.item_id) if categories is not None else None
        name = name or pair.category or UNCATEGORIZED
        groups.setdefault(name, []).append(pair)
    return CategoryBreakdown(
        categories=tuple(
            CategoryEvidence(
                category=name,
                n_pairs=len(group),
                n_items=len({p.item_id for p in group}),
                throughput_speedup=throughput_speedup(group, policy),
                decode_speedup=decode_speedup(group, policy),
                acceptance=acceptance_summary(p.candidate for p in group),
            )
            for name, group in sorted(groups.items())
        ),
        policy=policy,
    )
