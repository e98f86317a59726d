"""The traffic mix's speedup: the policy, each cell's share and the estimate (computed by `evidence.mix`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MIX_RATIO_RULE", "MIX_RULE", "MIX_SCHEMA_VERSION", "MixCellShare", "MixEstimate", "MixPolicy", "MixRatio"]


MIX_SCHEMA_VERSION = 1


MIX_RULE = (
    "S = sum_i a_i / sum_i (a_i / s_i) over the cells (workload x concurrency) with a_i = share of requests x the "
    "baseline's mean seconds per request (THE speedup statistic over the mix, outputs equal on both sides); a cell "
    "where speculation stays off has s_i = 1. Interval: Monte Carlo over each cell's log-speedup distribution "
    "read from its own interval (normal, Student t with its degrees of freedom when given), cells of one workload "
    "fully correlated (they share items), workloads independent, time weights a_i taken as known; percentiles of "
    "the draws at the policy's level"
)

MIX_RATIO_RULE = (
    "S(first) / S(second) over the same traffic: both mixes computed on one set of Monte Carlo draws, a cell's "
    "draw shared wherever both run the same candidate on the same workload (paired: what they share cancels), "
    "different candidates drawn independently (their shared baseline correlates them positively: the interval is, "
    "if anything, wider); distinguishable when the interval at the policy's level excludes 1.0"
)


class MixPolicy(BaseModel):
    """How the mix interval is drawn; written into every estimate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: float = Field(default=0.95, gt=0, lt=1)
    n_draws: int = Field(default=20_000, ge=100, le=1_000_000)
    seed: int = 0


class MixCellShare(BaseModel):
    """A cell's part of the mix: its share of the baseline's time and of the candidate's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    concurrency: int
    share: float
    """Share of requests."""
    baseline_time_share: float
    candidate_time_share: float
    speedup: float
    enabled: bool


class MixEstimate(BaseModel):
    """The mix speedup, its interval and how each cell contributes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MIX_SCHEMA_VERSION
    point: float
    low: float
    high: float
    level: float
    cells: tuple[MixCellShare, ...]
    method: str = "monte_carlo_log_speedup"
    policy: MixPolicy
    rule: str = MIX_RULE


class MixRatio(BaseModel):
    """How much faster one configuration serves the mix than another: S(first) / S(second), paired draws."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = MIX_SCHEMA_VERSION
    first: str
    second: str
    point: float
    low: float
    high: float
    level: float
    distinguishable: bool
    """The interval excludes 1.0: the two configurations are told apart at `level`."""
    method: str = "monte_carlo_log_speedup_paired"
    policy: MixPolicy
    rule: str = MIX_RATIO_RULE
