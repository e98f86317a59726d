"""The paired-round analysis of a whole run at one look: every measured pair's estimates, pooled where alike.

At look k the pairs' rounds 0 .. n_k - 1 enter (a round a busy neighbour or foreign traffic touched on either
side stays out, named); each metric's round variances are pooled over every pair of the run that Bartlett's test
finds alike (`evidence.rounds.estimate`), and each pair's intervals are computed at the look's level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from specselect._core.decision import LATENCY_CHECKS, DecisionResult, SpeedupInterval, Thresholds, decide
from specselect._core.pairing import PairEvidence
from specselect._evidence.pipeline.launches import SideLaunches
from specselect._evidence.rounds.drift import drift_check
from specselect._evidence.rounds.estimate import (
    MetricRounds,
    estimate_metric,
    metric_rounds,
    pool_variances,
    with_prompts_needed,
)
from specselect._evidence.rounds.table import METRICS, RoundTable, round_table
from specselect.records.evidence.rounds import DriftCheck, Estimand, LookPoint, Metric, RoundEstimate, VariancePool
from specselect.records.evidence.stats import ThroughputBasis

__all__ = [
    "LookAnalysis",
    "PairEstimates",
    "PairRounds",
    "analyse_look",
    "decide_pair",
    "latency_intervals",
]


@dataclass(frozen=True)
class PairRounds:
    """A pair both sides measured: its launches (launch j = round j) and the rounds left out, with why."""

    key: str
    candidate: str
    scenario: str
    baseline: SideLaunches
    candidate_side: SideLaunches
    excluded: Mapping[int, str]
    track: str = ""
    """The baseline group both sides' rounds are paired with: pairs of one track share its launches."""


class PairEstimates(BaseModel):
    """What one pair's decision rests on at one look."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    speedup: RoundEstimate
    ttft: RoundEstimate
    e2e: RoundEstimate
    drift: DriftCheck | None = None


def latency_intervals(estimates: PairEstimates) -> dict[str, SpeedupInterval]:
    """The mean-latency intervals with launch variation in them, keyed by the limit each is held to."""
    ttft_limit, e2e_limit = LATENCY_CHECKS
    out: dict[str, SpeedupInterval] = {}
    for check, estimate in ((ttft_limit, estimates.ttft), (e2e_limit, estimates.e2e)):
        interval = estimate.interval()
        if interval is not None and estimate.launch_variance_included:
            out[check] = interval
    return out


def decide_pair(evidence: PairEvidence, estimates: PairEstimates, thresholds: Thresholds) -> DecisionResult:
    """The decision of one pair at one look: the contract's checks on `evidence` (whose throughputs are the
    estimate's side values), the speedup interval and the mean-latency gates; an interval is required."""
    return decide(
        evidence, thresholds, estimates.speedup.interval(), latency_intervals(estimates), require_interval=True
    )


@dataclass(frozen=True)
class LookAnalysis:
    """Every pair's estimates at one look, and the pools they drew on."""

    point: LookPoint
    pairs: Mapping[str, PairEstimates]
    pools: tuple[VariancePool, ...]


def _table(pair: PairRounds, rounds: int, basis: ThroughputBasis) -> RoundTable:
    base = [s for s in pair.baseline.samples if s.launch < rounds]
    cand = [s for s in pair.candidate_side.samples if s.launch < rounds]
    excluded = {r: why for r, why in pair.excluded.items() if r < rounds}
    return round_table(base, cand, basis=basis, exclude=excluded)


def analyse_look(
    pairs: Sequence[PairRounds],
    point: LookPoint,
    *,
    estimand: Estimand,
    basis: ThroughputBasis,
    latency_level: float | None = None,
    minimum: float | None = None,
) -> LookAnalysis:
    """Every pair's speedup and mean-latency estimates at `point`, variances pooled per metric over the run.

    The speedup's interval is at the look's level (the accept's error spent over the looks); the mean-latency
    intervals at `latency_level` (the plan's level: a guard judged at every look, `None`: the look's level).
    With `minimum` (the minimum speedup) the traffic estimand's speedup says the prompts its decision needs."""
    tables = {p.key: _table(p, point.rounds, basis) for p in pairs}
    per_metric: dict[Metric, dict[str, MetricRounds]] = {
        metric: {key: metric_rounds(table, metric) for key, table in tables.items()} for metric in METRICS
    }
    blocks = {p.key: (p.track, p.candidate, p.scenario) for p in pairs}
    pools = {metric: pool_variances(metric, per_metric[metric], blocks=blocks) for metric in METRICS}
    levels = {metric: point.level if metric == "throughput" else latency_level or point.level for metric in METRICS}
    out: dict[str, PairEstimates] = {}
    for key, table in tables.items():
        est = {
            metric: estimate_metric(
                per_metric[metric][key],
                table,
                key=key,
                level=levels[metric],
                estimand=estimand,
                pool=pools[metric],
                basis=basis,
            )
            for metric in METRICS
        }
        speedup = est["throughput"] if minimum is None else with_prompts_needed(est["throughput"], minimum)
        drift = drift_check(
            "throughput", speedup.rounds, speedup.round_log_ratios, speedup.variance_used, speedup.variance_df
        )
        out[key] = PairEstimates(speedup=speedup, ttft=est["ttft_mean"], e2e=est["e2e_mean"], drift=drift)
    return LookAnalysis(point=point, pairs=out, pools=tuple(pools.values()))
