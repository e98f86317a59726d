"""The spread of a candidate's acceptance per draft position, from the engine's per-request counters.

Per position i the rate is (verify steps that accepted more than i draft tokens) / (verify steps), summed over
the scenario's measured requests: the definition of `SpecTelemetry.per_position_rates`, so a later measurement
read from the server's counters is comparable with it. The spread is a cluster bootstrap interval over items
(every repeat of a prompt moves together): how far the rate could move when the same prompts are served again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from specselect._evidence.bootstrap import FloatArray, cluster_ids, run_bootstrap
from specselect.records.evidence.acceptance import AcceptanceSpread, PositionSpread
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import summarize_per_request

__all__ = ["acceptance_spread"]


def _ratio(num: FloatArray, den: FloatArray) -> Callable[[FloatArray], FloatArray]:
    def stat(weights: FloatArray) -> FloatArray:
        with np.errstate(all="ignore"):
            return np.asarray((weights @ num) / (weights @ den), dtype=np.float64)

    return stat


def _rows(records: Sequence[RequestRecord]) -> tuple[list[str], list[tuple[int, int, int, tuple[int, ...]]]]:
    items: list[str] = []
    rows: list[tuple[int, int, int, tuple[int, ...]]] = []
    for record in records:
        if record.warmup or not record.ok or record.speculative is None:
            continue
        one = summarize_per_request([record.speculative])
        if one.n_with_metrics == 0 or one.spec_steps == 0:
            continue
        items.append(record.item_id)
        rows.append((one.spec_steps, one.draft_tokens, one.accepted_tokens, one.per_position_accepted or ()))
    return items, rows


def acceptance_spread(records: Sequence[RequestRecord], policy: BootstrapPolicy) -> AcceptanceSpread | None:
    """The spread of the measured requests' acceptance per position; None without per-request counters that count
    acceptance per position (vLLM's acceptance histograms)."""
    items, rows = _rows(records)
    width = max((len(r[3]) for r in rows), default=0)
    if width == 0:
        return None
    clusters, n_clusters = cluster_ids(items)

    def per_cluster(values: Sequence[float]) -> FloatArray:
        sums = np.bincount(clusters, weights=np.asarray(values, dtype=np.float64), minlength=n_clusters)
        return np.asarray(sums, dtype=np.float64)

    steps = per_cluster([r[0] for r in rows])
    positions: list[PositionSpread] = []
    method = "none"
    for i in range(width):
        accepted = per_cluster([r[3][i] if i < len(r[3]) else 0 for r in rows])
        result = run_bootstrap(
            _ratio(accepted, steps),
            n_clusters,
            level=policy.level,
            n_resamples=policy.n_resamples,
            seed=policy.seed,
            method="percentile",
            min_clusters=policy.min_clusters,
        )
        method = result.method
        positions.append(
            PositionSpread(position=i, rate=float(accepted.sum() / steps.sum()), low=result.low, high=result.high)
        )
    drafted = sum(r[1] for r in rows)
    return AcceptanceSpread(
        n_requests=len(rows),
        n_items=n_clusters,
        spec_steps=int(steps.sum()),
        acceptance_rate=sum(r[2] for r in rows) / drafted if drafted else None,
        per_position=tuple(positions),
        level=policy.level,
        method=method,
    )
