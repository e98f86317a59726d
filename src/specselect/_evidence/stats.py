"""Paired statistics: candidate vs baseline over requests paired by (item_id, repeat), with bootstrap CIs.

Every interval resamples PAIRS clustered by item, so the repeats of one prompt move together; the
interval method is the percentile bootstrap by default (BCa on request), seeded and reproducible.
Pairs with a missing, zero, negative or non-finite input are left out of that metric only and counted.

THE speedup statistic (`speedup_statistic`) is the ratio of totals: (sum of candidate output tokens / sum of
candidate request seconds) / (the same for the baseline). Its point, the decision's point and its interval all
come from it (`RatioEstimate.speedup_interval` carries the point); see docs/statistics.md for why it, not the
wall-clock aggregate throughput, is the claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from specselect._core.decision import SpeedupInterval
from specselect._evidence.bootstrap import (
    ClusterStatistic,
    FloatArray,
    IntArray,
    ReplicateResult,
    cluster_ids,
    mean_of_ratios_statistic,
    quantile_ratio_statistic,
    ratio_of_sums_statistic,
    run_bootstrap,
)
from specselect._evidence.samples import RequestPair, RequestSample
from specselect.records.evidence.stats import (
    BootstrapPolicy,
    PairedStats,
    PairRatio,
    RatioEstimate,
    ThroughputBasis,
)

__all__ = [
    "decode_rate",
    "decode_speedup",
    "e2e_quantile_ratio",
    "e2e_rate",
    "mean_per_sample_speedup",
    "pair_ratios",
    "paired_stats",
    "rate_for_basis",
    "speedup_statistic",
    "throughput_speedup",
    "ttft_quantile_ratio",
]


def _positive(value: float | int | None) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    out = float(value)
    return out if math.isfinite(out) and out > 0 else None


def e2e_rate(sample: RequestSample) -> tuple[float, float] | None:
    """(completion tokens, end-to-end seconds) when both are positive and finite."""
    tokens, seconds = _positive(sample.completion_tokens), _positive(sample.e2e_s)
    return None if tokens is None or seconds is None else (tokens, seconds)


def decode_rate(sample: RequestSample) -> tuple[float, float] | None:
    """(tokens after the first, decode seconds) when both are positive and finite."""
    tokens = _positive(sample.completion_tokens)
    seconds = _positive(sample.decode_s)
    if tokens is None or seconds is None or tokens < 2:
        return None
    return tokens - 1.0, seconds


_RATE: dict[ThroughputBasis, Callable[[RequestSample], tuple[float, float] | None]] = {
    "e2e": e2e_rate,
    "decode": decode_rate,
}


def rate_for_basis(basis: ThroughputBasis) -> Callable[[RequestSample], tuple[float, float] | None]:
    """(tokens, seconds) of one sample as THE speedup statistic counts them for `basis`."""
    return _RATE[basis]


def speedup_statistic(basis: ThroughputBasis) -> str:
    """The name of THE speedup statistic for `basis`, as every estimate of it records it."""
    return f"ratio_of_totals(tokens/{basis}_s)"


def _rate_ratio(pair: RequestPair, rate: Callable[[RequestSample], tuple[float, float] | None]) -> float | None:
    base, cand = rate(pair.baseline), rate(pair.candidate)
    if base is None or cand is None:
        return None
    value = (cand[0] / cand[1]) / (base[0] / base[1])
    return value if math.isfinite(value) else None


def pair_ratios(pairs: Sequence[RequestPair]) -> tuple[PairRatio, ...]:
    """Per-request ratios in key order; a ratio whose inputs are unusable is None."""
    out: list[PairRatio] = []
    for pair in sorted(pairs, key=lambda p: (p.item_id, p.repeat)):
        base_e2e, cand_e2e = _positive(pair.baseline.e2e_s), _positive(pair.candidate.e2e_s)
        e2e_ratio = cand_e2e / base_e2e if base_e2e is not None and cand_e2e is not None else None
        out.append(
            PairRatio(
                item_id=pair.item_id,
                repeat=pair.repeat,
                decode_speedup=_rate_ratio(pair, decode_rate),
                throughput_speedup=_rate_ratio(pair, e2e_rate),
                e2e_ratio=e2e_ratio if e2e_ratio is not None and math.isfinite(e2e_ratio) else None,
            )
        )
    return tuple(out)


def _estimate(
    metric: str,
    statistic: str,
    pairs: Sequence[RequestPair],
    *,
    columns: Callable[[RequestPair], tuple[float, ...] | None],
    build: Callable[[IntArray, int, FloatArray], ClusterStatistic],
    policy: BootstrapPolicy,
) -> RatioEstimate:
    """Filter usable pairs, cluster them by item and bootstrap `build(clusters, n_clusters, columns)`."""
    rows: list[tuple[float, ...]] = []
    items: list[str] = []
    for pair in sorted(pairs, key=lambda p: (p.item_id, p.repeat)):
        row = columns(pair)
        if row is not None and all(math.isfinite(v) for v in row):
            rows.append(row)
            items.append(pair.item_id)
    if not rows:
        result = ReplicateResult(None, None, None, "none", "no_usable_pairs" if pairs else "no_pairs")
        return _as_estimate(metric, statistic, result, n_used=0, n_clusters=0, n_pairs=len(pairs), policy=policy)
    clusters, n_clusters = cluster_ids(items)
    data = np.asarray(rows, dtype=np.float64)
    result = run_bootstrap(
        build(clusters, n_clusters, data),
        n_clusters,
        level=policy.level,
        n_resamples=policy.n_resamples,
        seed=policy.seed,
        method=policy.method,
        min_clusters=policy.min_clusters,
    )
    return _as_estimate(
        metric, statistic, result, n_used=len(rows), n_clusters=n_clusters, n_pairs=len(pairs), policy=policy
    )


def _as_estimate(
    metric: str,
    statistic: str,
    result: ReplicateResult,
    *,
    n_used: int,
    n_clusters: int,
    n_pairs: int,
    policy: BootstrapPolicy,
) -> RatioEstimate:
    return RatioEstimate(
        metric=metric,
        statistic=statistic,
        point=result.point,
        low=result.low,
        high=result.high,
        level=policy.level,
        n_samples=n_used,
        n_clusters=n_clusters,
        n_dropped=n_pairs - n_used,
        method=result.method,
        n_resamples=policy.n_resamples,
        seed=policy.seed,
        reason=result.note,
    )


def _ratio_of_sums(clusters: IntArray, n_clusters: int, data: FloatArray) -> ClusterStatistic:
    return ratio_of_sums_statistic(
        clusters, n_clusters, cand_num=data[:, 0], cand_den=data[:, 1], base_num=data[:, 2], base_den=data[:, 3]
    )


def _rate_columns(
    rate: Callable[[RequestSample], tuple[float, float] | None],
) -> Callable[[RequestPair], tuple[float, ...] | None]:
    def columns(pair: RequestPair) -> tuple[float, ...] | None:
        base, cand = rate(pair.baseline), rate(pair.candidate)
        return None if base is None or cand is None else (*cand, *base)

    return columns


def throughput_speedup(pairs: Sequence[RequestPair], policy: BootstrapPolicy | None = None) -> RatioEstimate:
    """(sum cand tokens / sum cand time) / (sum base tokens / sum base time); time per `policy.throughput_basis`."""
    policy = policy or BootstrapPolicy()
    basis = policy.throughput_basis
    return _estimate(
        "throughput_speedup",
        speedup_statistic(basis),
        pairs,
        columns=_rate_columns(_RATE[basis]),
        build=_ratio_of_sums,
        policy=policy,
    )


def decode_speedup(pairs: Sequence[RequestPair], policy: BootstrapPolicy | None = None) -> RatioEstimate:
    """Decode-phase speedup: ratio of (tokens after the first) / (time after the first token), totals."""
    policy = policy or BootstrapPolicy()
    return _estimate(
        "decode_speedup",
        "ratio_of_totals(tokens/decode_s)",
        pairs,
        columns=_rate_columns(decode_rate),
        build=_ratio_of_sums,
        policy=policy,
    )


def _quantile_ratio(
    metric: str, field: Literal["ttft_s", "e2e_s"], pairs: Sequence[RequestPair], *, q: float, policy: BootstrapPolicy
) -> RatioEstimate:
    def columns(pair: RequestPair) -> tuple[float, ...] | None:
        cand, base = _positive(getattr(pair.candidate, field)), _positive(getattr(pair.baseline, field))
        return None if cand is None or base is None else (cand, base)

    def build(clusters: IntArray, n_clusters: int, data: FloatArray) -> ClusterStatistic:
        return quantile_ratio_statistic(clusters, data[:, 0], data[:, 1], q)

    return _estimate(
        metric, f"ratio_of_p{round(q * 100, 2):g}({field})", pairs, columns=columns, build=build, policy=policy
    )


def ttft_quantile_ratio(pairs: Sequence[RequestPair], policy: BootstrapPolicy | None = None) -> RatioEstimate:
    """TTFT quantile (p95 by default) of the candidate over the baseline's, on the same pairs (< 1 is better)."""
    policy = policy or BootstrapPolicy()
    return _quantile_ratio("ttft_ratio", "ttft_s", pairs, q=policy.ttft_quantile, policy=policy)


def e2e_quantile_ratio(pairs: Sequence[RequestPair], policy: BootstrapPolicy | None = None) -> RatioEstimate:
    """End-to-end latency quantile (p95 by default) ratio, candidate over baseline (< 1 is better)."""
    policy = policy or BootstrapPolicy()
    return _quantile_ratio("e2e_p95_ratio", "e2e_s", pairs, q=policy.e2e_quantile, policy=policy)


def mean_per_sample_speedup(pairs: Sequence[RequestPair], policy: BootstrapPolicy | None = None) -> RatioEstimate:
    """Spec-Bench's figure: the mean over pairs of (cand tokens/s) / (base tokens/s), e2e basis."""
    policy = policy or BootstrapPolicy()

    def columns(pair: RequestPair) -> tuple[float, ...] | None:
        ratio = _rate_ratio(pair, e2e_rate)
        return None if ratio is None else (ratio,)

    def build(clusters: IntArray, n_clusters: int, data: FloatArray) -> ClusterStatistic:
        return mean_of_ratios_statistic(clusters, n_clusters, data[:, 0])

    return _estimate(
        "mean_per_sample_speedup",
        "mean_of_pair_ratios(tokens/e2e_s)",
        pairs,
        columns=columns,
        build=build,
        policy=policy,
    )


def paired_stats(
    pairs: Sequence[RequestPair],
    policy: BootstrapPolicy | None = None,
    *,
    speedup: RatioEstimate | None = None,
    interval: SpeedupInterval | None = None,
    ttft: RatioEstimate | None = None,
    e2e: RatioEstimate | None = None,
) -> PairedStats:
    """Every paired figure of one scenario; never raises on empty or degenerate inputs.

    `speedup` and `interval`, when given, are THE speedup computed elsewhere (over several launches:
    `evidence.replication`); otherwise the pairs' item-cluster bootstrap gives both. So are `ttft` and `e2e`,
    the latency ratios the decision's latency checks are judged on.
    """
    policy = policy or BootstrapPolicy()
    if speedup is None:
        speedup = throughput_speedup(pairs, policy)
        interval = speedup.speedup_interval()
    return PairedStats(
        n_pairs=len(pairs),
        n_items=len({p.item_id for p in pairs}),
        throughput_speedup=speedup,
        decode_speedup=decode_speedup(pairs, policy),
        ttft_ratio=ttft if ttft is not None else ttft_quantile_ratio(pairs, policy),
        e2e_p95_ratio=e2e if e2e is not None else e2e_quantile_ratio(pairs, policy),
        mean_per_sample_speedup=mean_per_sample_speedup(pairs, policy),
        speedup_interval=interval,
        per_request=pair_ratios(pairs),
        policy=policy,
    )
