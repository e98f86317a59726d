"""What each mechanism costs in KV cache: the table of every candidate against its baseline (the lines naming
preemptions as a cause are closing lines: `trust`). Read from the results only."""

from __future__ import annotations

from specselect._report.tables import TableSpec
from specselect.records.evidence.capacity import CapacityCost
from specselect.records.results import EvidenceFile

__all__ = ["CAPACITY_LEAD", "capacity_spec"]

CAPACITY_LEAD = (
    "The KV cache each server reserved, as its engine reported it: a drafter's layers take their cache from the "
    "same budget as the target's, so the server holds fewer tokens and fewer requests at once. Peak memory does "
    "not show this (the engine reserves its cache up front)."
)


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _share(cost: CapacityCost) -> str:
    if cost.tokens_lost is None or cost.loss_share is None:
        return "-"
    return f"{cost.tokens_lost:,} ({cost.loss_share:.1%})"


def _concurrency(value: float | None) -> str:
    return f"{value:g}" if value is not None else "-"


def _gate(cost: CapacityCost) -> str:
    if cost.passed is None and cost.reason is None:
        return "no gate"
    verdict = "passed" if cost.passed else str(cost.reason)
    return f"{verdict}: {cost.detail}" if cost.detail else verdict


def capacity_spec(evidence: EvidenceFile | None) -> TableSpec | None:
    """One row per candidate: KV tokens (baseline, candidate, lost), concurrency at the request length, gate."""
    if evidence is None or not evidence.capacity:
        return None
    columns = (
        "candidate",
        "baseline",
        "baseline KV tokens",
        "candidate KV tokens",
        "lost",
        "request tokens",
        "concurrency (baseline)",
        "concurrency (candidate)",
        "gate",
    )
    rows = tuple(
        (
            c.candidate,
            c.baseline,
            _tokens(c.baseline_tokens),
            _tokens(c.candidate_tokens),
            _share(c),
            _tokens(c.request_tokens),
            _concurrency(c.baseline_concurrency),
            _concurrency(c.candidate_concurrency),
            _gate(c),
        )
        for c in evidence.capacity
    )
    return TableSpec(columns=columns, rows=rows)
