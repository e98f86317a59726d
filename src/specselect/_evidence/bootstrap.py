"""The cluster bootstrap behind every interval: resample items (clusters) with replacement.

A statistic is a function of per-cluster weights: a row of `weights` says how many times each cluster
(item) was drawn, so all repeats of one prompt move together. The point estimate is the statistic at
weight 1 for every cluster, bootstrap replicates are multinomial weights, and BCa's jackknife is
"leave one cluster out" (weight 0 for that cluster).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from specselect.records.evidence.stats import IntervalMethod

__all__ = [
    "ClusterStatistic",
    "FloatArray",
    "IntArray",
    "ReplicateResult",
    "cluster_ids",
    "mean_of_ratios_statistic",
    "quantile_ratio_statistic",
    "ratio_of_sums_statistic",
    "run_bootstrap",
    "weighted_quantile",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ClusterStatistic = Callable[[FloatArray], FloatArray]
"""Maps weights (rows x clusters) to one statistic value per row."""

_CELLS_PER_CHUNK = 2_000_000
"""Bound on rows x observations evaluated at once, so memory stays small for large scenarios."""


def cluster_ids(item_ids: Sequence[str]) -> tuple[IntArray, int]:
    """Cluster index per observation (clusters numbered in sorted item order) and the cluster count."""
    names = sorted(set(item_ids))
    lookup = {name: i for i, name in enumerate(names)}
    return np.asarray([lookup[item] for item in item_ids], dtype=np.int64), len(names)


def _per_cluster_sum(values: FloatArray, clusters: IntArray, n_clusters: int) -> FloatArray:
    return np.bincount(clusters, weights=values, minlength=n_clusters).astype(np.float64)


def _chunked(stat: Callable[[FloatArray], FloatArray], weights: FloatArray, width: int) -> FloatArray:
    rows = max(1, _CELLS_PER_CHUNK // max(1, width))
    parts = [stat(weights[start : start + rows]) for start in range(0, weights.shape[0], rows)]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.float64)


def ratio_of_sums_statistic(
    clusters: IntArray,
    n_clusters: int,
    *,
    cand_num: FloatArray,
    cand_den: FloatArray,
    base_num: FloatArray,
    base_den: FloatArray,
) -> ClusterStatistic:
    """(sum cand_num / sum cand_den) / (sum base_num / sum base_den) over the weighted clusters."""
    sums = [_per_cluster_sum(v, clusters, n_clusters) for v in (cand_num, cand_den, base_num, base_den)]

    def stat(weights: FloatArray) -> FloatArray:
        cn, cd, bn, bd = (weights @ s for s in sums)
        with np.errstate(all="ignore"):
            return np.asarray((cn / cd) / (bn / bd), dtype=np.float64)

    return stat


def mean_of_ratios_statistic(clusters: IntArray, n_clusters: int, ratios: FloatArray) -> ClusterStatistic:
    """The mean of per-observation ratios over the weighted clusters (each observation counted once per draw)."""
    total = _per_cluster_sum(ratios, clusters, n_clusters)
    count = _per_cluster_sum(np.ones_like(ratios), clusters, n_clusters)

    def stat(weights: FloatArray) -> FloatArray:
        with np.errstate(all="ignore"):
            return np.asarray((weights @ total) / (weights @ count), dtype=np.float64)

    return stat


def weighted_quantile(values: FloatArray, clusters: IntArray, weights: FloatArray, q: float) -> FloatArray:
    """numpy's default ('linear') quantile of the sample that repeats each observation by its cluster's weight.

    Integer weights give exactly `np.quantile(np.repeat(values, w), q)`; NaN where a row has no weight.
    """
    order = np.argsort(values, kind="stable")
    xs = values[order]
    cl = clusters[order]

    def stat(w: FloatArray) -> FloatArray:
        cum = np.cumsum(w[:, cl], axis=1)
        total = cum[:, -1]
        h = q * (total - 1.0)
        lo = np.floor(h)
        frac = h - lo
        hi = np.minimum(lo + 1.0, total - 1.0)
        # The expanded sample's position j falls in the first element whose cumulative weight exceeds j.
        idx_lo = np.minimum((cum <= lo[:, None]).sum(axis=1), xs.size - 1)
        idx_hi = np.minimum((cum <= hi[:, None]).sum(axis=1), xs.size - 1)
        # The convex form cannot overflow for finite values, unlike lo + frac * (hi - lo).
        with np.errstate(all="ignore"):
            out = (1.0 - frac) * xs[idx_lo] + frac * xs[idx_hi]
        return np.where(total > 0, out, np.nan)

    if xs.size == 0:
        return np.full(weights.shape[0], np.nan)
    return _chunked(stat, weights, xs.size)


def quantile_ratio_statistic(clusters: IntArray, cand: FloatArray, base: FloatArray, q: float) -> ClusterStatistic:
    """quantile_q(cand) / quantile_q(base) over the weighted clusters."""

    def stat(weights: FloatArray) -> FloatArray:
        c = weighted_quantile(cand, clusters, weights, q)
        b = weighted_quantile(base, clusters, weights, q)
        with np.errstate(all="ignore"):
            return np.asarray(c / b, dtype=np.float64)

    return stat


@dataclass(frozen=True)
class ReplicateResult:
    """Point estimate and interval of one bootstrap; `note` says why the interval is missing or adjusted."""

    point: float | None
    low: float | None
    high: float | None
    method: str
    note: str | None = None


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _bca_levels(
    stat: ClusterStatistic, n_clusters: int, point: float, boot: FloatArray, level: float
) -> tuple[float, float] | None:
    below = float(np.mean(boot < point)) + 0.5 * float(np.mean(boot == point))
    if not 0.0 < below < 1.0:
        return None
    normal = NormalDist()
    z0 = normal.inv_cdf(below)
    jack = _chunked(stat, np.ones((n_clusters, n_clusters)) - np.eye(n_clusters), n_clusters)
    jack = jack[np.isfinite(jack)]
    if jack.size < 2:
        return None
    with np.errstate(all="ignore"):
        dev = jack.mean() - jack
        # numpy power: float ** 1.5 raises OverflowError on huge sums, np.float64 gives inf (handled below).
        denom = float(6.0 * np.power(np.sum(dev**2), 1.5))
        accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
    if not (math.isfinite(accel) and math.isfinite(denom)):
        return None
    levels: list[float] = []
    for alpha in ((1.0 - level) / 2.0, (1.0 + level) / 2.0):
        z = z0 + normal.inv_cdf(alpha)
        shrink = 1.0 - accel * z
        if shrink <= 0:
            return None
        levels.append(normal.cdf(z0 + z / shrink))
    if not all(0.0 <= p <= 1.0 for p in levels):
        return None
    return levels[0], levels[1]


def run_bootstrap(
    stat: ClusterStatistic,
    n_clusters: int,
    *,
    level: float,
    n_resamples: int,
    seed: int,
    method: IntervalMethod,
    min_clusters: int,
) -> ReplicateResult:
    """Point estimate plus a cluster-bootstrap interval; no interval below `min_clusters` clusters."""
    label = f"paired_cluster_bootstrap_{method}"
    if n_clusters == 0:
        return ReplicateResult(None, None, None, "none", "no_pairs")
    point = _finite_or_none(float(stat(np.ones((1, n_clusters)))[0]))
    if point is None:
        return ReplicateResult(None, None, None, "none", "undefined_point_estimate")
    if n_clusters < max(2, min_clusters):
        return ReplicateResult(point, None, None, "none", "too_few_clusters")
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_resamples)
    boot = _chunked(stat, counts.astype(np.float64), n_clusters)
    boot = boot[np.isfinite(boot)]
    if boot.size < max(2, n_resamples // 2):
        return ReplicateResult(point, None, None, "none", "degenerate_bootstrap")
    alphas: tuple[float, float] = ((1.0 - level) / 2.0, (1.0 + level) / 2.0)
    note: str | None = None
    if method == "bca":
        adjusted = _bca_levels(stat, n_clusters, point, boot, level)
        if adjusted is None:
            label, note = "paired_cluster_bootstrap_percentile", "bca_undefined_used_percentile"
        else:
            alphas = adjusted
    low, high = (float(v) for v in np.quantile(boot, alphas))
    return ReplicateResult(point, min(low, high), max(low, high), label, note)
