"""The two-stage (launch, then item) bootstrap of THE speedup statistic over several server launches per side.

Estimator: the ratio of totals pooled over every launch, (sum cand tokens / sum cand seconds) / (the same for the
baseline) over the items complete on both sides (`cells`). The point, the interval and the decision use it.

Design (docs/statistics.md, "Launch replication"): launches are independent draws of a server's state, nested in
their side; items are crossed with launches (every launch runs the same frozen items). A replicate therefore
 1. redraws each side's launches on its own (the launch effects of the two sides are independent), with the
    Rao-Wu rescaling: L - 1 draws with replacement, weighted L / (L - 1), so the launch variance is unbiased
    even at L = 2, where the naive bootstrap halves it;
 2. redraws the items once (multinomial over items, an item's repeats together) and applies the same item
    weights to every launch of both sides: the pairing of the paired design (Owen's pigeonhole bootstrap for
    crossed factors). Drawing items per launch would break the pairing and count item variance the design removed.
Launch j of the baseline is NOT paired with launch j of the candidate inside the bootstrap: an ABBA order makes
slow drift cancel in the pooled totals, and any drift left over is counted as launch variance (conservative).

Variance components are the variance of the log statistic under each stage alone. Interval: `t` (default) is
point * exp(+-t_nu * se) with se^2 the sum of the components and nu by Satterthwaite (items I - 1 df, launches
sum(L - 1) df), which holds its level with 2 launches per side where percentiles of so few launches cannot;
`percentile` takes the two-stage replicates' quantiles. One launch per side is today's item-cluster bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats as scipy_stats

from specselect.core.decision import SpeedupInterval
from specselect.evidence.bootstrap import FloatArray
from specselect.evidence.replication.cells import CellTable, SideCells, build_cells
from specselect.evidence.samples import RequestSample, pair_requests
from specselect.evidence.stats import (
    BootstrapPolicy,
    RatioEstimate,
    rate_for_basis,
    speedup_statistic,
    throughput_speedup,
)

__all__ = [
    "REPLICATION_SCHEMA_VERSION",
    "Design",
    "LaunchVarianceSource",
    "LogStatistic",
    "ReplicatedEstimate",
    "ReplicationPolicy",
    "VarianceComponents",
    "one_launch_per_side",
    "replicated_speedup",
    "two_stage_bounds",
    "two_stage_components",
]

REPLICATION_SCHEMA_VERSION = 1
LaunchVarianceSource = Literal["resampled", "imputed", "not_included"]


class ReplicationPolicy(BaseModel):
    """How launches enter the interval; written into every replicated estimate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interval: Literal["t", "percentile"] = "t"
    assume_equal_launch_variance: bool = True
    """A side measured in one launch borrows the other side's per-launch variance (same machine, same noise)."""


class VarianceComponents(BaseModel):
    """Variance of log(speedup) under each bootstrap stage alone, and the degrees of freedom behind them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scale: Literal["log_speedup"] = "log_speedup"
    items: float
    """Within-launch: items redrawn, every launch at weight 1."""
    launch_baseline: float
    launch_candidate: float
    """Between-launch: that side's launches redrawn, items at weight 1 (0 when not included)."""
    launch_baseline_source: LaunchVarianceSource
    launch_candidate_source: LaunchVarianceSource
    total: float
    """Variance of the full two-stage replicates."""
    launch_share: float | None
    """(launch_baseline + launch_candidate) / (items + both launch parts); None when all are 0."""
    df_items: int
    df_launches: int
    df_effective: float | None
    """Satterthwaite degrees of freedom of the summed variance (None: unbounded)."""


class ReplicatedEstimate(BaseModel):
    """THE speedup over all launches of both sides, with an interval that includes launch-to-launch variation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = REPLICATION_SCHEMA_VERSION
    metric: str = "throughput_speedup"
    statistic: str
    point: float | None
    low: float | None
    high: float | None
    level: float
    rerun_low: float | None = None
    rerun_high: float | None = None
    """Where a rerun of the same design is expected to put ITS point (the interval widened by sqrt 2)."""
    method: str
    reason: str | None = None
    """Why the interval is missing or how it was adjusted."""
    launch_variance_included: bool
    launch_note: str | None = None
    n_items: int
    dropped_items: tuple[str, ...] = ()
    n_requests_baseline: int
    n_requests_candidate: int
    n_unusable_requests: int = 0
    launches_baseline: tuple[int, ...]
    launches_candidate: tuple[int, ...]
    baseline_tokens_per_s: float | None
    candidate_tokens_per_s: float | None
    """Each side's rate as the statistic counts it: candidate / baseline is `point`."""
    launch_rates_baseline: tuple[float, ...] = ()
    launch_rates_candidate: tuple[float, ...] = ()
    components: VarianceComponents | None = None
    policy: BootstrapPolicy
    replication: ReplicationPolicy

    def as_ratio_estimate(self) -> RatioEstimate:
        """This estimate in the shape of the one-launch statistics (`PairedStats.throughput_speedup`)."""
        return RatioEstimate(
            metric=self.metric,
            statistic=self.statistic,
            point=self.point,
            low=self.low,
            high=self.high,
            level=self.level,
            n_samples=self.n_requests_candidate,
            n_clusters=self.n_items,
            n_dropped=self.n_unusable_requests,
            method=self.method,
            n_resamples=self.policy.n_resamples,
            seed=self.policy.seed,
            reason=self.reason,
        )

    def speedup_interval(self) -> SpeedupInterval | None:
        """This estimate as the decision's interval (samples_per_repeat = items x candidate launches)."""
        if self.low is None or self.high is None:
            return None
        n = self.n_requests_candidate
        return SpeedupInterval(
            low=self.low,
            high=self.high,
            level=self.level,
            n_samples=max(1, n),
            samples_per_repeat=max(1, self.n_items * max(1, len(self.launches_candidate))),
            method=self.method,
            point=self.point,
        )


def _rao_wu(rng: np.random.Generator, n_launches: int, size: int) -> FloatArray:
    if n_launches < 2:
        return np.ones((size, n_launches))
    counts = rng.multinomial(n_launches - 1, np.full(n_launches, 1.0 / n_launches), size=size)
    return np.asarray(counts * (n_launches / (n_launches - 1.0)), dtype=np.float64)


def _side_rate(side: SideCells, launch_w: FloatArray, item_w: FloatArray) -> FloatArray:
    tokens = np.einsum("bl,li,bi->b", launch_w, side.tokens, item_w)
    seconds = np.einsum("bl,li,bi->b", launch_w, side.seconds, item_w)
    with np.errstate(all="ignore"):
        return np.asarray(tokens / seconds, dtype=np.float64)


def _log_speedup(cells: CellTable, base_w: FloatArray, cand_w: FloatArray, item_w: FloatArray) -> FloatArray:
    with np.errstate(all="ignore"):
        ratio = _side_rate(cells.candidate, cand_w, item_w) / _side_rate(cells.baseline, base_w, item_w)
        return np.asarray(np.log(ratio), dtype=np.float64)


def _var(values: FloatArray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.var(finite, ddof=1)) if finite.size >= max(2, values.size // 2) else None


def _satterthwaite(items: float, df_items: int, launch: float, df_launch: int) -> float | None:
    parts = [(items, df_items), (launch, df_launch)]
    denom = sum(v * v / df for v, df in parts if df > 0 and v > 0)
    total = items + launch
    return None if denom <= 0 else total * total / denom


def _quantile(level: float, df: float | None) -> float:
    upper = (1.0 + level) / 2.0
    if df is None or df > 1e6:
        return NormalDist().inv_cdf(upper)
    return float(scipy_stats.t.ppf(upper, df))


def _base_fields(cells: CellTable, policy: BootstrapPolicy, replication: ReplicationPolicy) -> dict[str, object]:
    base, cand = cells.baseline, cells.candidate
    return {
        "statistic": speedup_statistic(policy.throughput_basis),
        "level": policy.level,
        "n_items": len(cells.items),
        "dropped_items": cells.dropped_items,
        "n_requests_baseline": base.n_requests,
        "n_requests_candidate": cand.n_requests,
        "n_unusable_requests": cells.n_unusable,
        "launches_baseline": base.launches,
        "launches_candidate": cand.launches,
        "baseline_tokens_per_s": base.pooled_rate(),
        "candidate_tokens_per_s": cand.pooled_rate(),
        "launch_rates_baseline": base.launch_rates() if cells.items else (),
        "launch_rates_candidate": cand.launch_rates() if cells.items else (),
        "policy": policy,
        "replication": replication,
    }


_Draws = tuple[FloatArray, FloatArray, FloatArray]
"""Per replicate: baseline launch weights, candidate launch weights, item weights (shared by both sides)."""

LogStatistic = Callable[[FloatArray, FloatArray, FloatArray], FloatArray]
"""log(statistic) per replicate from (baseline launch weights, candidate launch weights, item weights), each
(replicates x launches or items): the speedup of `cells` here, a latency quantile ratio in `latency`."""


@dataclass(frozen=True)
class Design:
    """The crossed design a statistic is bootstrapped over: launches per side and the items they share."""

    launches_baseline: int
    launches_candidate: int
    n_items: int


def _launch_parts(
    stat: LogStatistic, draws: _Draws, replication: ReplicationPolicy
) -> tuple[tuple[float, LaunchVarianceSource], tuple[float, LaunchVarianceSource]] | None:
    """(variance, source) of the baseline's and the candidate's launch stage; None when degenerate."""
    base_w, cand_w, item_w = draws
    ones_b, ones_c, ones_i = np.ones_like(base_w), np.ones_like(cand_w), np.ones_like(item_w)
    lb, lc = base_w.shape[1], cand_w.shape[1]
    v_b = _var(stat(base_w, ones_c, ones_i)) if lb >= 2 else 0.0
    v_c = _var(stat(ones_b, cand_w, ones_i)) if lc >= 2 else 0.0
    if v_b is None or v_c is None:
        return None
    src_b: LaunchVarianceSource = "resampled" if lb >= 2 else "not_included"
    src_c: LaunchVarianceSource = "resampled" if lc >= 2 else "not_included"
    if replication.assume_equal_launch_variance:
        # var(pooled over L launches) = sigma^2 / L; a one-launch side takes sigma^2 from the side that has launches.
        if lc == 1 and lb >= 2:
            v_c, src_c = v_b * lb, "imputed"
        elif lb == 1 and lc >= 2:
            v_b, src_b = v_c * lc, "imputed"
    return (v_b, src_b), (v_c, src_c)


def two_stage_components(
    stat: LogStatistic, design: Design, rng: np.random.Generator, n: int, replication: ReplicationPolicy
) -> tuple[VarianceComponents, FloatArray] | None:
    """Variance components and the two-stage log replicates of `stat`; None when the bootstrap is degenerate."""
    lb, lc, n_items = design.launches_baseline, design.launches_candidate, design.n_items
    item_w = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n).astype(np.float64)
    draws = (_rao_wu(rng, lb, n), _rao_wu(rng, lc, n), item_w)
    replicates = stat(*draws)
    items = _var(stat(np.ones_like(draws[0]), np.ones_like(draws[1]), item_w))
    launch = _launch_parts(stat, draws, replication)
    if items is None or launch is None:
        return None
    (v_b, src_b), (v_c, src_c) = launch
    imputed = v_b if src_b == "imputed" else v_c if src_c == "imputed" else 0.0
    if imputed > 0:
        # The launch stage of a one-launch side cannot be redrawn: it enters as a log-normal launch effect.
        replicates = replicates + rng.normal(0.0, math.sqrt(imputed), size=n)
    df_launch = sum(count - 1 for count in (lb, lc) if count >= 2)
    spread = items + v_b + v_c
    components = VarianceComponents(
        items=items,
        launch_baseline=v_b,
        launch_candidate=v_c,
        launch_baseline_source=src_b,
        launch_candidate_source=src_c,
        total=_var(replicates) or 0.0,
        launch_share=(v_b + v_c) / spread if spread > 0 else None,
        df_items=n_items - 1,
        df_launches=df_launch,
        df_effective=_satterthwaite(items, n_items - 1, v_b + v_c, df_launch),
    )
    return components, replicates


def _components(
    cells: CellTable, rng: np.random.Generator, n: int, replication: ReplicationPolicy
) -> tuple[VarianceComponents, FloatArray] | None:
    design = Design(len(cells.baseline.launches), len(cells.candidate.launches), len(cells.items))
    return two_stage_components(partial(_log_speedup, cells), design, rng, n, replication)


_MAX_LOG = 700.0
"""exp() of more than this overflows a float."""


def two_stage_bounds(
    point: float, components: VarianceComponents, replicates: FloatArray, policy: BootstrapPolicy, how: str
) -> tuple[float, float] | None:
    """The interval around `point`: t on the summed components (`how="t"`) or the replicates' percentiles."""
    if how == "t":
        se = math.sqrt(components.items + components.launch_baseline + components.launch_candidate)
        reach = _quantile(policy.level, components.df_effective) * se
        log_low, log_high = math.log(point) - reach, math.log(point) + reach
    else:
        finite = replicates[np.isfinite(replicates)]
        if finite.size < max(2, replicates.size // 2):
            return None
        log_low, log_high = (float(v) for v in np.quantile(finite, [(1 - policy.level) / 2, (1 + policy.level) / 2]))
    # Bounds must stay finite and positive to be a speedup at all.
    if not all(-_MAX_LOG < v < _MAX_LOG for v in (log_low, log_high)):
        return None
    return math.exp(log_low), math.exp(log_high)


def _rerun(point: float | None, bound: float | None) -> float | None:
    # A rerun's point differs from this one by two independent errors: sqrt(2) times one interval's reach.
    if point is None or bound is None or point <= 0 or bound <= 0:
        return None
    value = math.log(point) + math.sqrt(2.0) * (math.log(bound) - math.log(point))
    return math.exp(value) if abs(value) < _MAX_LOG else None


def _two_stage(cells: CellTable, policy: BootstrapPolicy, replication: ReplicationPolicy) -> ReplicatedEstimate:
    fields = _base_fields(cells, policy, replication)
    base, cand = fields["baseline_tokens_per_s"], fields["candidate_tokens_per_s"]
    point = cand / base if isinstance(base, float) and isinstance(cand, float) and base > 0 else None
    label = f"two_stage_bootstrap_{replication.interval}"
    out = ReplicatedEstimate.model_validate(
        {**fields, "point": point, "low": None, "high": None, "method": "none", "launch_variance_included": True}
    )
    if point is None or not math.isfinite(point) or point <= 0:
        reason = "undefined_point_estimate" if cells.items else "no_usable_pairs"
        return out.model_copy(update={"point": None, "reason": reason, "launch_variance_included": False})
    if len(cells.items) < max(2, policy.min_clusters):
        return out.model_copy(update={"reason": "too_few_clusters"})
    rng = np.random.default_rng(policy.seed)
    drawn = _components(cells, rng, policy.n_resamples, replication)
    bounds = None if drawn is None else two_stage_bounds(point, drawn[0], drawn[1], policy, replication.interval)
    if drawn is None or bounds is None:
        return out.model_copy(update={"reason": "degenerate_bootstrap"})
    components = drawn[0]
    included = "not_included" not in (components.launch_baseline_source, components.launch_candidate_source)
    return out.model_copy(
        update={
            "low": bounds[0],
            "high": bounds[1],
            "rerun_low": _rerun(point, bounds[0]),
            "rerun_high": _rerun(point, bounds[1]),
            "method": label,
            "components": components,
            "launch_variance_included": included,
            "launch_note": None if included else "one side's launch variance is not included",
            "reason": "bca_not_available_across_launches" if policy.method == "bca" else None,
        }
    )


def _single_launch(
    base: Sequence[RequestSample],
    cand: Sequence[RequestSample],
    policy: BootstrapPolicy,
    replication: ReplicationPolicy,
) -> ReplicatedEstimate:
    """Today's item-cluster bootstrap over request pairs, with its item variance component."""
    rate = rate_for_basis(policy.throughput_basis)
    pairs = pair_requests(base, cand).pairs
    estimate = throughput_speedup(pairs, policy)
    used = [p for p in pairs if rate(p.baseline) is not None and rate(p.candidate) is not None]
    cells = build_cells([p.baseline for p in used], [p.candidate for p in used], rate)
    fields = _base_fields(cells, policy, replication)
    seen = {s.item_id for s in (*base, *cand)}
    components = None
    if estimate.has_interval:
        drawn = _components(cells, np.random.default_rng(policy.seed), policy.n_resamples, replication)
        components = None if drawn is None else drawn[0]
    point, low, high = estimate.point, estimate.low, estimate.high
    return ReplicatedEstimate.model_validate(
        {
            **fields,
            "dropped_items": tuple(sorted(seen - set(cells.items))),
            "n_unusable_requests": estimate.n_dropped,
            "point": point,
            "low": low,
            "high": high,
            "rerun_low": _rerun(point, low),
            "rerun_high": _rerun(point, high),
            "method": estimate.method,
            "reason": estimate.reason,
            "launch_variance_included": False,
            "launch_note": "one launch per side: launch-to-launch variation is not in the interval",
            "components": components,
        }
    )


def one_launch_per_side(baseline: Sequence[RequestSample], candidate: Sequence[RequestSample]) -> bool:
    """Each side's samples come from at most one launch: THE speedup is then the paired item bootstrap."""
    return len({s.launch for s in baseline}) <= 1 and len({s.launch for s in candidate}) <= 1


def replicated_speedup(
    baseline: Sequence[RequestSample],
    candidate: Sequence[RequestSample],
    policy: BootstrapPolicy | None = None,
    replication: ReplicationPolicy | None = None,
) -> ReplicatedEstimate:
    """THE speedup of `candidate` over `baseline` (samples of any number of launches each); never raises on data.

    With one launch per side this is exactly `evidence.stats.throughput_speedup` over the request pairs.
    """
    policy = policy or BootstrapPolicy()
    replication = replication or ReplicationPolicy()
    if one_launch_per_side(baseline, candidate):
        return _single_launch(baseline, candidate, policy, replication)
    cells = build_cells(baseline, candidate, rate_for_basis(policy.throughput_basis))
    return _two_stage(cells, policy, replication)
