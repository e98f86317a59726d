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

Two configurations of the same traffic (one candidate on every request; a candidate on some workloads and the
baseline elsewhere) are compared by `mix_ratio`: the ratio of their mix speedups over the SAME draws, each cell's
draw shared wherever both configurations run the same candidate there (paired: a cell they share cancels), and
different candidates drawn independently (their shared baseline rounds correlate them positively, so leaving that
out makes the ratio's interval, if anything, wider).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as scipy_stats

from specselect.records.evidence.mix import MixCellShare, MixEstimate, MixPolicy, MixRatio
from specselect.records.evidence.rounds import RoundEstimate

__all__ = ["CellSpeedup", "MixCell", "mix_ratio", "mix_speedup"]


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
    source: str = ""
    """Whose speedup it is (the candidate): cells of one source and workload share their draw, also across the
    two configurations `mix_ratio` compares."""


def _draws(cells: Sequence[MixCell], policy: MixPolicy) -> np.ndarray:
    """(draws x cells) speedup draws: one standard draw per source and workload (and degrees of freedom), scaled by
    each cell's log standard error."""
    rng = np.random.default_rng(policy.seed)
    keys = sorted({(c.source, c.workload) for c in cells})
    out = np.ones((policy.n_draws, len(cells)), dtype=np.float64)
    shared: dict[tuple[str, str, float | None], np.ndarray] = {}
    for source, name in keys:
        mine = [c for c in cells if (c.source, c.workload) == (source, name) and c.speedup is not None]
        for df in sorted({c.speedup.df for c in mine if c.speedup is not None}, key=str):
            normal = rng.standard_normal(policy.n_draws)
            shared[(source, name, df)] = normal if df is None else scipy_stats.t.ppf(scipy_stats.norm.cdf(normal), df)
    for j, cell in enumerate(cells):
        if cell.speedup is not None:
            z = shared[(cell.source, cell.workload, cell.speedup.df)]
            # A t on one or two degrees of freedom has tails past float range: clipped, such a draw is a huge (or
            # tiny) speedup, which the harmonic mean takes in its stride.
            out[:, j] = np.exp(np.clip(math.log(cell.speedup.point) + cell.speedup.log_se * z, -700.0, 700.0))
    return out


def _weighted(cells: Sequence[MixCell]) -> list[MixCell]:
    weighted = [c for c in cells if c.share > 0]
    if not weighted:
        raise ValueError("a mix needs at least one cell with a positive share of requests")
    return weighted


def _mix_of(weighted: Sequence[MixCell], draws: np.ndarray) -> tuple[float, np.ndarray]:
    """(point, draws) of S over `weighted`, whose speedup draws are the columns of `draws`."""
    a = np.asarray([c.share * c.baseline_seconds for c in weighted], dtype=np.float64)
    points = np.asarray([c.speedup.point if c.speedup is not None else 1.0 for c in weighted], dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return float(a.sum() / (a / points).sum()), a.sum() / (a / draws).sum(axis=1)


def _bounds(values: np.ndarray, level: float) -> tuple[float, float]:
    low, high = (float(v) for v in np.quantile(values, [(1 - level) / 2, (1 + level) / 2]))
    return low, high


def mix_speedup(cells: Sequence[MixCell], policy: MixPolicy | None = None) -> MixEstimate:
    """THE speedup over the mix of `cells` with its propagated interval (see `MIX_RULE`).

    Raises ValueError without a cell of positive share.
    """
    policy = policy or MixPolicy()
    weighted = _weighted(cells)
    point, mix = _mix_of(weighted, _draws(weighted, policy))
    low, high = _bounds(mix, policy.level)
    a = np.asarray([c.share * c.baseline_seconds for c in weighted], dtype=np.float64)
    points = np.asarray([c.speedup.point if c.speedup is not None else 1.0 for c in weighted], dtype=np.float64)
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


def mix_ratio(
    first: Sequence[MixCell], second: Sequence[MixCell], names: tuple[str, str], policy: MixPolicy | None = None
) -> MixRatio:
    """S(first) / S(second) over the same traffic, paired: both mixes read one set of draws (see `MIX_RATIO_RULE`).

    `names` says what each configuration is. Raises ValueError without a cell of positive share on either side.
    """
    policy = policy or MixPolicy()
    one, two = _weighted(first), _weighted(second)
    draws = _draws([*one, *two], policy)
    point_one, mix_one = _mix_of(one, draws[:, : len(one)])
    point_two, mix_two = _mix_of(two, draws[:, len(one) :])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ratio = mix_one / mix_two
    low, high = _bounds(ratio, policy.level)
    return MixRatio(
        first=names[0],
        second=names[1],
        point=point_one / point_two,
        low=low,
        high=high,
        level=policy.level,
        distinguishable=not low <= 1.0 <= high,
        policy=policy,
    )
