"""The latency ratios (TTFT and end-to-end quantiles, candidate over baseline) over several launches per side.

The same two-stage design as THE speedup (`twostage`): each side's launches redrawn on their own (Rao-Wu), the
items redrawn once and shared by every launch of both sides. A replicate weighs each request by its launch's
weight times its item's weight and takes each side's weighted quantile (`bootstrap.weighted_quantile`, which
with unit weights is numpy's quantile of the pooled requests: the point the decision compares). The interval
is t on the summed variance components, as for the speedup, so a latency check judged against it carries the
launch-to-launch variation a rerun would show. One launch per side keeps the item-cluster bootstrap of
`evidence.stats` (`ttft_quantile_ratio`, `e2e_quantile_ratio`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specselect.core.decision import LATENCY_RATIO_OF
from specselect.evidence.bootstrap import FloatArray, IntArray, weighted_quantile
from specselect.evidence.replication.twostage import (
    Design,
    ReplicationPolicy,
    two_stage_bounds,
    two_stage_components,
)
from specselect.evidence.samples import RequestSample
from specselect.evidence.stats import BootstrapPolicy, RatioEstimate

__all__ = ["LATENCY_RATIOS", "LatencyField", "replicated_latency_ratios", "replicated_quantile_ratio"]

LatencyField = Literal["ttft_s", "e2e_s"]

_FIELD_OF: dict[str, LatencyField] = {"ttft_ratio": "ttft_s", "e2e_p95_ratio": "e2e_s"}
LATENCY_RATIOS: tuple[tuple[str, str, LatencyField], ...] = tuple(
    (check, ratio, _FIELD_OF[ratio]) for check, ratio in LATENCY_RATIO_OF.items()
)
"""(the decision's latency check, the ratio it compares, the request field), from `core.decision.LATENCY_RATIO_OF`."""


@dataclass(frozen=True)
class _Side:
    values: FloatArray
    launch: IntArray
    """Row of each request's launch in the side's launch weights."""
    item: IntArray
    """Column of each request's item in the shared item weights."""
    n_launches: int


def _usable(samples: Sequence[RequestSample], field: LatencyField) -> list[tuple[int, str, float]]:
    out = []
    for s in samples:
        value = getattr(s, field)
        if value is not None and math.isfinite(value) and value > 0:
            out.append((s.launch, s.item_id, float(value)))
    return out


def _side(rows: list[tuple[int, str, float]], items: dict[str, int]) -> _Side:
    kept = [r for r in rows if r[1] in items]
    launches = {launch: row for row, launch in enumerate(sorted({r[0] for r in kept}))}
    return _Side(
        values=np.asarray([r[2] for r in kept], dtype=np.float64),
        launch=np.asarray([launches[r[0]] for r in kept], dtype=np.int64),
        item=np.asarray([items[r[1]] for r in kept], dtype=np.int64),
        n_launches=len(launches),
    )


def _complete_items(base: list[tuple[int, str, float]], cand: list[tuple[int, str, float]]) -> tuple[str, ...]:
    """Items with a usable request in every launch of both sides (the rule of `cells.build_cells`)."""
    seen = [{(launch, item) for launch, item, _ in rows} for rows in (base, cand)]
    launches = [{launch for launch, _ in cells} for cells in seen]
    items = sorted({item for _, item, _ in (*base, *cand)})
    return tuple(i for i in items if all((j, i) in cells for cells, ls in zip(seen, launches, strict=True) for j in ls))


def _side_quantile(side: _Side, launch_w: FloatArray, item_w: FloatArray, q: float) -> FloatArray:
    weights = launch_w[:, side.launch] * item_w[:, side.item]  # replicates x requests
    return weighted_quantile(side.values, np.arange(side.values.size), weights, q)


def _log_ratio(
    base: _Side, cand: _Side, q: float, base_w: FloatArray, cand_w: FloatArray, item_w: FloatArray
) -> FloatArray:
    with np.errstate(all="ignore"):
        ratio = _side_quantile(cand, cand_w, item_w, q) / _side_quantile(base, base_w, item_w, q)
        return np.asarray(np.log(ratio), dtype=np.float64)


def replicated_quantile_ratio(
    metric: str,
    field: LatencyField,
    q: float,
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    *,
    policy: BootstrapPolicy,
    replication: ReplicationPolicy,
) -> RatioEstimate:
    """quantile_q(candidate `field`) / quantile_q(baseline `field`) over every launch, two-stage interval."""
    base_rows, cand_rows = _usable(baseline, field), _usable(candidate, field)
    items = _complete_items(base_rows, cand_rows)
    index = {item: col for col, item in enumerate(items)}
    base, cand = _side(base_rows, index), _side(cand_rows, index)
    n_used = int(cand.values.size)
    out = RatioEstimate(
        metric=metric,
        statistic=f"ratio_of_p{round(q * 100, 2):g}({field})",
        point=None,
        low=None,
        high=None,
        level=policy.level,
        n_samples=n_used,
        n_clusters=len(items),
        n_dropped=len(baseline) + len(candidate) - n_used - int(base.values.size),
        method="none",
        n_resamples=policy.n_resamples,
        seed=policy.seed,
        reason="no_usable_pairs" if not items else None,
    )
    if not items:
        return out
    point = float(np.quantile(cand.values, q) / np.quantile(base.values, q))
    if not math.isfinite(point) or point <= 0:
        return out.model_copy(update={"reason": "undefined_point_estimate"})
    out = out.model_copy(update={"point": point})
    if len(items) < max(2, policy.min_clusters):
        return out.model_copy(update={"reason": "too_few_clusters"})
    stat = _Stat(base, cand, q)
    design = Design(base.n_launches, cand.n_launches, len(items))
    rng = np.random.default_rng(policy.seed)
    drawn = two_stage_components(stat, design, rng, policy.n_resamples, replication)
    bounds = None if drawn is None else two_stage_bounds(point, drawn[0], drawn[1], policy, replication.interval)
    if drawn is None or bounds is None:
        return out.model_copy(update={"reason": "degenerate_bootstrap"})
    return out.model_copy(
        update={"low": bounds[0], "high": bounds[1], "method": f"two_stage_bootstrap_{replication.interval}"}
    )


@dataclass(frozen=True)
class _Stat:
    base: _Side
    cand: _Side
    q: float

    def __call__(self, base_w: FloatArray, cand_w: FloatArray, item_w: FloatArray) -> FloatArray:
        return _log_ratio(self.base, self.cand, self.q, base_w, cand_w, item_w)


def replicated_latency_ratios(
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    *,
    policy: BootstrapPolicy,
    replication: ReplicationPolicy,
) -> dict[str, RatioEstimate]:
    """Latency check -> its ratio over every launch (quantiles from `policy`: TTFT and E2E p95 by default)."""
    quantile = {"ttft_s": policy.ttft_quantile, "e2e_s": policy.e2e_quantile}
    return {
        check: replicated_quantile_ratio(
            metric, field, quantile[field], baseline, candidate, policy=policy, replication=replication
        )
        for check, metric, field in LATENCY_RATIOS
    }
