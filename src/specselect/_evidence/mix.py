"""One expected speedup for a deployment's traffic mix, with its interval propagated from the per-scenario evidence.

Each scenario (workload x concurrency level) is a cell with its share of the deployment's requests and the
baseline's mean seconds per request there. THE speedup statistic over the mix is the ratio of totals over a
population in which every cell's requests appear in its share: with equal outputs on both sides (parity at
temperature 0),

    S = sum_i a_i / sum_i (a_i / s_i),     a_i = share_i x baseline seconds per request_i

a harmonic mean of the cells' speedups s_i weighted by the baseline's time in each cell. A cell where
speculation stays off has s_i = 1 exactly.

The interval is propagated, never averaged: each cell's speedup enters as a distribution of log s_i read from
its own interval (`CellSpeedup.from_interval`: normal, or Student t when the interval gives its degrees of
freedom), and seeded Monte Carlo draws of every cell give S's distribution, whose percentiles are the interval.
Cells of one workload share their items (every concurrency level sends the same prompts), so their errors move
together: they are drawn fully correlated (the widest case); different workloads are independent. The time
weights a_i describe the traffic and are taken as known. The per-scenario interval is the paired-round t interval
(one round: the items' alone): only its point, bounds, level and degrees of freedom are read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as scipy_stats

from specselect.records.evidence.mix import MixCellShare, MixEstimate, MixPolicy
from specselect.records.evidence.rounds import RoundEstimate

__all__ = ["CellSpeedup", "MixCell", "mix_speedup"]


class CellSpeedup(BaseModel):
    """One scenario's speedup as a distribution of its logarithm: centre, standard error, degrees of freedom."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: float = Field(gt=0, allow_inf_nan=False)
    log_se: float = Field(ge=0, allow_inf_nan=False)
    """Standard error of log(speedup); 0 when the scenario has no interval (the point is then taken as exact)."""
    df: float | None = Field(default=None, gt=0)
    """Degrees of freedom of a t interval; None: normal."""

    @classmethod
    def from_interval(
        cls, point: float, low: float | None, high: float | None, level: float, df: float | None = None
    ) -> CellSpeedup:
        """The distribution whose `level` interval is [low, high] on the log scale (no interval: se 0)."""
        if low is None or high is None or low <= 0 or high <= 0:
            return cls(point=point, log_se=0.0, df=df)
        q = (1.0 + level) / 2.0
        z = float(scipy_stats.t.ppf(q, df)) if df is not None else NormalDist().inv_cdf(q)
        return cls(point=point, log_se=(math.log(high) - math.log(low)) / (2.0 * z), df=df)

    @classmethod
    def of_estimate(cls, estimate: RoundEstimate) -> CellSpeedup | None:
        """THE speedup of a scenario (`ScenarioEvidence.speedup`): its t interval with its degrees of freedom;
        None without a positive point."""
        if estimate.point is None or estimate.point <= 0:
            return None
        return cls.from_interval(estimate.point, estimate.low, estimate.high, estimate.level, estimate.df)


class MixCell(BaseModel):
    """One scenario of the mix: its share of requests, the baseline's seconds per request, and the speedup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    concurrency: int
    share: float = Field(ge=0, le=1, allow_inf_nan=False)
    baseline_seconds: float = Field(gt=0, allow_inf_nan=False)
    speedup: CellSpeedup | None
    """None: speculation stays off in this cell (speedup exactly 1)."""


def _draws(cells: Sequence[MixCell], policy: MixPolicy) -> np.ndarray:
    """(draws x cells) speedup draws: one standard draw per workload, scaled by each cell's log standard error."""
    rng = np.random.default_rng(policy.seed)
    workloads = sorted({c.workload for c in cells})
    out = np.ones((policy.n_draws, len(cells)), dtype=np.float64)
    shared: dict[tuple[str, float | None], np.ndarray] = {}
    for name in workloads:
        for df in sorted({c.speedup.df for c in cells if c.workload == name and c.speedup is not None}, key=str):
            normal = rng.standard_normal(policy.n_draws)
            shared[(name, df)] = normal if df is None else scipy_stats.t.ppf(scipy_stats.norm.cdf(normal), df)
    for j, cell in enumerate(cells):
        if cell.speedup is not None:
            z = shared[(cell.workload, cell.speedup.df)]
            # A t on one or two degrees of freedom has tails past float range: clipped, such a draw is a huge (or
            # tiny) speedup, which the harmonic mean takes in its stride.
            out[:, j] = np.exp(np.clip(math.log(cell.speedup.point) + cell.speedup.log_se * z, -700.0, 700.0))
    return out


def mix_speedup(cells: Sequence[MixCell], policy: MixPolicy | None = None) -> MixEstimate:
    """THE speedup over the mix of `cells` with its propagated interval (see `MIX_RULE`).

    Raises ValueError without a cell of positive share.
    """
    policy = policy or MixPolicy()
    weighted = [c for c in cells if c.share > 0]
    if not weighted:
        raise ValueError("mix_speedup needs at least one cell with a positive share of requests")
    a = np.asarray([c.share * c.baseline_seconds for c in weighted], dtype=np.float64)
    points = np.asarray([c.speedup.point if c.speedup is not None else 1.0 for c in weighted], dtype=np.float64)
    point = float(a.sum() / (a / points).sum())
    draws = _draws(weighted, policy)
    with np.errstate(over="ignore", divide="ignore"):
        mix = a.sum() / (a / draws).sum(axis=1)
    low, high = (float(v) for v in np.quantile(mix, [(1 - policy.level) / 2, (1 + policy.level) / 2]))
    cand_time = a / points
    shares = tuple(
        MixCellShare(
            workload=c.workload,
            concurrency=c.concurrency,
            share=c.share,
            baseline_time_share=float(a[i] / a.sum()),
            candidate_time_share=float(cand_time[i] / cand_time.sum()),
            speedup=float(points[i]),
            enabled=c.speedup is not None,
        )
        for i, c in enumerate(weighted)
    )
    return MixEstimate(point=point, low=low, high=high, level=policy.level, cells=shares, policy=policy)
