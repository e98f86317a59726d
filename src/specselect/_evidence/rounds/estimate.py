"""Paired-round estimates: a pair's per-round log ratios, their variance (its own, or pooled over the run's pairs)
and a t interval with its degrees of freedom.

Per round r the pair gives y_r = log(candidate / baseline) of a metric over the frozen items (`table`). The
estimate is the mean over rounds, exp(mean y_r) (the ratio of each side's geometric-mean value), and its
variance depends on what the claim is about (the estimand, chosen by the plan):

- `frozen_prompts`: what a rerun of the same design on the same items reproduces. Everything that moves a
  round's ratio -- the launches' own state, the noise the two adjacent launches do not share, request noise --
  moves y_r, so var = s^2 / R with s^2 the rounds' sample variance (R - 1 degrees of freedom), or the pooled one.
- `traffic`: the speedup on the population of prompts the items were drawn from. The item component is added
  in closed form from the (round x item) table: with z_ri each item's linearised share of round r's log ratio,
  the items' mean square MS_I = R sum_i mean_r(z_ri)^2 / (I - 1) and the residual MS_E give
  sigma^2_item = max(0, (MS_I - MS_E) / R) and var += sigma^2_item / I (Satterthwaite degrees of freedom).

One round has no round-to-round variance: its interval is the items' alone (var_i(z) / I, I - 1 degrees of
freedom), says `launch_variance_included = false`, and an accept cannot rest on it (`core.decision`).

Under `traffic` the estimate also says how many prompts the decision needs (`with_prompts_needed`): the I at
which t sqrt(launch part + sigma^2_item / I) no longer reaches from the point to the minimum speedup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats as scipy_stats

from specselect._evidence.rounds.table import RoundTable, round_table
from specselect._evidence.samples import RequestSample
from specselect.records.evidence.rounds import (
    HOMOGENEITY_ALPHA,
    Estimand,
    Metric,
    RoundEstimate,
    VariancePool,
    VarianceSource,
)
from specselect.records.evidence.stats import ThroughputBasis

__all__ = [
    "Block",
    "MetricRounds",
    "estimate_metric",
    "metric_rounds",
    "pair_estimate",
    "pool_variances",
    "t_quantile",
    "with_prompts_needed",
]


_STATISTIC: dict[Metric, str] = {
    "throughput": "exp(mean over rounds of log ratio_of_totals(tokens/{basis}_s))",
    "ttft_mean": "exp(mean over rounds of log(mean TTFT ratio))",
    "e2e_mean": "exp(mean over rounds of log(mean E2E ratio))",
}
_UNIT: dict[Metric, str] = {"throughput": "tokens/s", "ttft_mean": "s", "e2e_mean": "s"}


class MetricRounds(BaseModel):
    """One pair's rounds of one metric, before any pooling."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: Metric
    rounds: tuple[int, ...]
    log_ratios: tuple[float, ...]
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]
    n_items: int
    round_variance: float | None
    """Sample variance of the per-round log ratios (None below two rounds or when not finite)."""
    item_variance: float | None
    """sigma^2 of one item's effect (the traffic component); with one round var_i(z), request noise included."""
    item_variance_df: float | None

    @property
    def round_df(self) -> int:
        return max(0, len(self.rounds) - 1)

    @property
    def mean_log(self) -> float | None:
        return float(np.mean(self.log_ratios)) if self.log_ratios else None


def _item_component(z: np.ndarray) -> tuple[float | None, float | None]:
    """(sigma^2_item, its df) from the (rounds x items) influence table; one round: var_i(z) with I - 1 df."""
    n_rounds, n_items = z.shape
    if n_items < 2 or not np.all(np.isfinite(z)):
        return None, None
    item_means = z.mean(axis=0)
    ms_items = n_rounds * float(np.sum(item_means**2)) / (n_items - 1)
    if n_rounds < 2:
        return ms_items, float(n_items - 1)
    df_res = (n_rounds - 1) * (n_items - 1)
    ms_res = float(np.sum((z - item_means) ** 2)) / df_res
    value = (ms_items - ms_res) / n_rounds
    if value <= 0:
        return 0.0, None
    df = (ms_items - ms_res) ** 2 / (ms_items**2 / (n_items - 1) + ms_res**2 / df_res)
    return value, df


def metric_rounds(table: RoundTable, metric: Metric) -> MetricRounds:
    """The pair's per-round log ratios of `metric` and its variance components."""
    y = table.log_ratios(metric)
    finite = bool(np.all(np.isfinite(y))) and y.size > 0
    variance = float(np.var(y, ddof=1)) if finite and y.size >= 2 else None
    item, item_df = _item_component(table.item_influence(metric)) if finite else (None, None)
    return MetricRounds(
        metric=metric,
        rounds=table.rounds if finite else (),
        log_ratios=tuple(float(v) for v in y) if finite else (),
        baseline_values=tuple(float(v) for v in table.baseline.values(metric)) if finite else (),
        candidate_values=tuple(float(v) for v in table.candidate.values(metric)) if finite else (),
        n_items=len(table.items),
        round_variance=variance if variance is not None and math.isfinite(variance) else None,
        item_variance=item,
        item_variance_df=item_df,
    )


def _bartlett(variances: Sequence[float], dfs: Sequence[int]) -> tuple[float, float]:
    n = float(sum(dfs))
    pooled = sum(v * d for v, d in zip(variances, dfs, strict=True)) / n
    k = len(variances)
    stat = n * math.log(pooled) - sum(d * math.log(v) for v, d in zip(variances, dfs, strict=True))
    correction = 1.0 + (sum(1.0 / d for d in dfs) - 1.0 / n) / (3.0 * (k - 1))
    statistic = stat / correction
    return statistic, float(scipy_stats.chi2.sf(statistic, k - 1))


Block = tuple[str, str, str]
"""What a pair's rounds are measured in: (track: its baseline group, candidate, scenario)."""

_SHARED: dict[tuple[bool, bool], str] = {
    (True, False): "candidate_launch",
    (False, True): "baseline_measurement",
    (False, False): "baseline_launch",
}
"""(same candidate, same scenario) of two pairs of one track -> what their rounds share: both launches (the
candidate's measures both scenarios), the baseline's very requests (two candidates on one scenario), or the
baseline's launch (two candidates, two scenarios)."""


def _sharing(a: str, b: str, blocks: Mapping[str, Block] | None) -> str | None:
    """What pairs `a` and `b` share in a round (None: nothing, another track's launches)."""
    if blocks is None or a not in blocks or b not in blocks:
        return "round"
    (track_a, cand_a, scen_a), (track_b, cand_b, scen_b) = blocks[a], blocks[b]
    if track_a != track_b:
        return None
    return _SHARED[(cand_a == cand_b, scen_a == scen_b)]


def _residuals(m: MetricRounds) -> dict[int, float]:
    mean = float(np.mean(m.log_ratios))
    return {r: y - mean for r, y in zip(m.rounds, m.log_ratios, strict=True)}


def _shared_covariances(
    pairs: Mapping[str, MetricRounds], members: Sequence[str], blocks: Mapping[str, Block] | None
) -> dict[str, float]:
    """Per kind of sharing, the covariance of two pairs' per-round log ratios in one round (method of moments
    from the cross-products of their residuals in the rounds both measured, each pair centred on its own mean)."""
    sums: dict[str, list[float]] = {}
    res = {k: _residuals(pairs[k]) for k in members}
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            kind = _sharing(a, b, blocks)
            shared = sorted(set(res[a]) & set(res[b]))
            if kind is None or not shared:
                continue
            n_a, n_b, m = len(res[a]), len(res[b]), len(shared)
            acc = sums.setdefault(kind, [0.0, 0.0])
            acc[0] += sum(res[a][r] * res[b][r] for r in shared)
            acc[1] += m * (1.0 - 1.0 / n_a - 1.0 / n_b + m / (n_a * n_b))
    return {kind: num / den for kind, (num, den) in sums.items() if den > 0}


def _effective_df(
    pairs: Mapping[str, MetricRounds],
    members: Sequence[str],
    blocks: Mapping[str, Block] | None,
    covariances: Mapping[str, float],
    pooled: float,
) -> float:
    """The pooled variance's degrees of freedom when pairs measured in the same launches are correlated:
    2 E[V]^2 / Var[V] of V = sum of squared residuals / sum (R_p - 1) under the block model (the matching scaled
    chi-square), the covariances clipped to [0, pooled]. Equals sum (R_p - 1) when nothing is shared."""
    between = np.zeros((len(members), len(members)))
    for i, a in enumerate(members):
        for j, b in enumerate(members):
            kind = _sharing(a, b, blocks) if i != j else None
            between[i, j] = pooled if i == j else min(pooled, max(0.0, covariances.get(kind, 0.0))) if kind else 0.0
    pair = np.array([i for i, k in enumerate(members) for _ in pairs[k].rounds])
    rounds = np.array([r for k in members for r in pairs[k].rounds])
    sizes = np.array([len(pairs[k].rounds) for k in members], dtype=np.float64)[pair]
    same_pair = pair[:, None] == pair[None, :]
    centre = same_pair * (np.eye(len(pair)) - 1.0 / sizes[:, None])
    sigma = (rounds[:, None] == rounds[None, :]) * between[pair][:, pair]
    product = centre @ sigma
    return float(np.trace(product) ** 2 / np.trace(product @ product))


def pool_variances(
    metric: Metric,
    pairs: Mapping[str, MetricRounds],
    homogeneity_alpha: float = HOMOGENEITY_ALPHA,
    blocks: Mapping[str, Block] | None = None,
) -> VariancePool:
    """Pool the round variances of every pair with two or more rounds and a positive variance; its degrees of
    freedom count what the pairs share (`blocks`: each pair's track, candidate and scenario; None: every pair
    shares every round's launches)."""
    members = sorted(k for k, m in pairs.items() if m.round_variance is not None and m.round_variance > 0)
    variances = tuple(float(pairs[k].round_variance or 0.0) for k in members)
    dfs = tuple(pairs[k].round_df for k in members)
    total_df = sum(dfs)
    pooled = sum(v * d for v, d in zip(variances, dfs, strict=True)) / total_df if total_df else None
    statistic = p_value = None
    homogeneous = len(members) >= 2
    covariances: dict[str, float] = {}
    effective = None
    if len(members) >= 2 and pooled:
        statistic, p_value = _bartlett(variances, dfs)
        homogeneous = p_value >= homogeneity_alpha
        covariances = _shared_covariances(pairs, members, blocks)
        effective = min(float(total_df), _effective_df(pairs, members, blocks, covariances, pooled))
    return VariancePool(
        metric=metric,
        members=tuple(members),
        variances=variances,
        dfs=dfs,
        pooled_variance=pooled,
        pooled_df=total_df,
        bartlett_statistic=statistic,
        bartlett_p=p_value,
        homogeneous=homogeneous,
        homogeneity_alpha=homogeneity_alpha,
        effective_df=effective,
        shared_correlation={k: round(v / pooled, 6) for k, v in covariances.items()} if pooled else {},
    )


def t_quantile(level: float, df: float | None) -> float:
    """The two-sided `level` quantile of Student's t (the normal's for df None or huge)."""
    upper = (1.0 + level) / 2.0
    if df is None or df > 1e6:
        return float(scipy_stats.norm.ppf(upper))
    return float(scipy_stats.t.ppf(upper, df))


def _satterthwaite(parts: Sequence[tuple[float, float | None]]) -> float | None:
    total = sum(v for v, _ in parts)
    denom = 0.0
    for value, df in parts:
        if value <= 0:
            continue
        if df is None or df <= 0:
            return None
        denom += value * value / df
    return total * total / denom if denom > 0 else None


_MAX_LOG = 700.0


def _geomean(values: Sequence[float]) -> float | None:
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class _Variance:
    total: float
    """Variance of the mean log ratio."""
    df: float | None
    source: VarianceSource
    per_round: float | None = None
    per_round_df: float | None = None


def _variance(m: MetricRounds, key: str, pool: VariancePool | None, estimand: Estimand) -> _Variance | str:
    """The variance of the pair's mean log ratio, or why there is none."""
    if len(m.rounds) < 2:
        if m.item_variance is None or m.n_items < 2:
            return "too_few_items"
        return _Variance(m.item_variance / m.n_items, m.item_variance_df, "items_only")
    chosen = pool.variance_for(key) if pool is not None else None
    if chosen is not None:
        variance, df, source = chosen
    elif m.round_variance is None or m.round_variance <= 0:
        return "no_round_variance"
    else:
        variance, df, source = m.round_variance, float(m.round_df), "pair"
    parts: list[tuple[float, float | None]] = [(variance / len(m.rounds), df)]
    if estimand == "traffic" and m.item_variance:
        parts.append((m.item_variance / m.n_items, m.item_variance_df))
    total = sum(v for v, _ in parts)
    return _Variance(total, _satterthwaite(parts) if len(parts) > 1 else df, source, variance, df)


def _unbounded(m: MetricRounds, table: RoundTable, *, level: float, estimand: Estimand, basis: str) -> RoundEstimate:
    """The estimate's point and rounds, before any interval."""
    mean = m.mean_log
    base = RoundEstimate(
        metric=m.metric,
        statistic=_STATISTIC[m.metric].format(basis=basis),
        unit=_UNIT[m.metric],
        estimand=estimand,
        point=None if mean is None else math.exp(mean),
        level=level,
        excluded_rounds=dict(table.excluded_rounds),
        unpaired_rounds=table.unpaired_rounds,
        n_items=m.n_items,
        dropped_items=table.dropped_items,
    )
    if mean is None:
        return base.model_copy(update={"reason": "no_usable_rounds" if not table.rounds else "undefined_ratio"})
    return base.model_copy(
        update={
            "rounds": m.rounds,
            "round_log_ratios": m.log_ratios,
            "baseline_values": m.baseline_values,
            "candidate_values": m.candidate_values,
            "baseline_value": _geomean(m.baseline_values),
            "candidate_value": _geomean(m.candidate_values),
            "round_variance": m.round_variance,
            "item_variance": m.item_variance,
        }
    )


def estimate_metric(
    m: MetricRounds,
    table: RoundTable,
    *,
    key: str,
    level: float,
    estimand: Estimand,
    pool: VariancePool | None = None,
    basis: str = "e2e",
) -> RoundEstimate:
    """The estimate of `m` (pair `key` of `pool`) at `level` for `estimand`; never raises on data."""
    filled = _unbounded(m, table, level=level, estimand=estimand, basis=basis)
    mean = m.mean_log
    if mean is None:
        return filled
    variance = _variance(m, key, pool, estimand)
    if isinstance(variance, str):
        return filled.model_copy(update={"reason": variance})
    se = math.sqrt(variance.total)
    reach = t_quantile(level, variance.df) * se
    if not math.isfinite(reach) or abs(mean) + reach * math.sqrt(2.0) > _MAX_LOG:
        return filled.model_copy(update={"reason": "degenerate_interval"})
    return filled.model_copy(
        update={
            "low": math.exp(mean - reach),
            "high": math.exp(mean + reach),
            "df": variance.df,
            "se_log": se,
            "variance_source": variance.source,
            "variance_used": variance.per_round,
            "variance_df": variance.per_round_df,
            "launch_variance_included": variance.source != "items_only",
            "rerun_low": math.exp(mean - math.sqrt(2.0) * reach),
            "rerun_high": math.exp(mean + math.sqrt(2.0) * reach),
            "reason": "one_round_items_only" if variance.source == "items_only" else None,
        }
    )


def pair_estimate(
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    *,
    level: float,
    estimand: Estimand = "frozen_prompts",
    basis: ThroughputBasis = "e2e",
    metric: Metric = "throughput",
    exclude: Mapping[int, str] | None = None,
) -> RoundEstimate:
    """One pair's estimate of `metric` with its own round variance (no pool): the estimator of a scenario's part
    (a prompt-length bucket) and of the early stop, the same one every decision uses."""
    table = round_table(baseline, candidate, basis=basis, exclude=exclude)
    return estimate_metric(metric_rounds(table, metric), table, key="", level=level, estimand=estimand, basis=basis)


def with_prompts_needed(estimate: RoundEstimate, minimum: float) -> RoundEstimate:
    """`estimate` with the prompts per workload its decision against `minimum` needs (traffic estimand only).

    With the launch part L = (per-round variance) / R as measured, the item part sigma^2_item / I and the look's
    t quantile, the interval stops reaching `minimum` from the point (distance d on the log scale) once
    t^2 (L + sigma^2_item / I) < d^2, so I > sigma^2_item / ((d / t)^2 - L). The estimate's own df is kept (more
    prompts would add item df: the number errs high). When (d / t)^2 <= L no number of prompts resolves the
    pair at these rounds (`more_rounds`)."""
    point, items, per_round = estimate.point, estimate.item_variance, estimate.variance_used
    if point is None or items is None or per_round is None or estimate.estimand != "traffic":
        return estimate
    if not estimate.launch_variance_included or not estimate.rounds:
        return estimate
    reach = t_quantile(estimate.level, estimate.df)
    room = (math.log(point / minimum) / reach) ** 2 - per_round / len(estimate.rounds)
    if room <= 0:
        return estimate.model_copy(update={"prompts_needed": None, "prompts_verdict": "more_rounds"})
    needed = max(2, math.ceil(items / room))
    verdict = "enough" if needed <= estimate.n_items else "more_prompts"
    return estimate.model_copy(update={"prompts_needed": needed, "prompts_verdict": verdict})
