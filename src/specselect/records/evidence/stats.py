"""The speedup statistic's records: the bootstrap policy, a ratio estimate with its interval, per-pair ratios and a
pair's statistics (computed by `evidence.stats` and `evidence.bootstrap`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specselect._core.decision import SpeedupInterval

__all__ = [
    "STATS_SCHEMA_VERSION",
    "BootstrapPolicy",
    "IntervalMethod",
    "PairRatio",
    "PairedStats",
    "RatioEstimate",
    "ThroughputBasis",
]


IntervalMethod = Literal["percentile", "bca"]


STATS_SCHEMA_VERSION = 1


ThroughputBasis = Literal["e2e", "decode"]


class BootstrapPolicy(BaseModel):
    """How intervals are made; written into every result that used it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: float = Field(default=0.95, gt=0, lt=1)
    n_resamples: int = Field(default=2000, ge=100, le=100_000)
    seed: int = 0
    method: IntervalMethod = "percentile"
    min_clusters: int = Field(default=3, ge=2)
    """Fewer distinct items than this -> point estimate only (the interval would claim false certainty)."""
    ttft_quantile: float = Field(default=0.95, ge=0, le=1)
    e2e_quantile: float = Field(default=0.95, ge=0, le=1)
    throughput_basis: ThroughputBasis = "e2e"
    """'e2e': completion tokens / end-to-end time (the output throughput); 'decode': tokens after the first /
    time after the first token."""


class RatioEstimate(BaseModel):
    """A candidate/baseline ratio with its interval; `reason` says why fields are null (or the method fell back)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    statistic: str
    point: float | None
    low: float | None
    high: float | None
    level: float
    n_samples: int
    """Pairs used."""
    n_clusters: int
    """Distinct items among them (the bootstrap's resampling unit)."""
    n_dropped: int
    """Pairs left out for missing, zero or non-finite inputs."""
    method: str
    n_resamples: int
    seed: int
    reason: str | None = None

    @property
    def has_interval(self) -> bool:
        """True when low and high are both known."""
        return self.low is not None and self.high is not None

    def speedup_interval(self) -> SpeedupInterval | None:
        """This estimate as the decision's `SpeedupInterval`: an item bootstrap within launches, so without the
        launch-to-launch variation (`launch_variance_included` false)."""
        if self.low is None or self.high is None or self.n_samples < 1:
            return None
        return SpeedupInterval(
            low=float(self.low), high=float(self.high), level=float(self.level), method=self.method, point=self.point
        )


class PairRatio(BaseModel):
    """One pair's ratios: speedups are candidate rate / baseline rate, `e2e_ratio` is candidate / baseline time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    repeat: int
    decode_speedup: float | None
    throughput_speedup: float | None
    e2e_ratio: float | None


class PairedStats(BaseModel):
    """All paired statistics of one candidate vs its baseline in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = STATS_SCHEMA_VERSION
    n_pairs: int
    n_items: int
    throughput_speedup: RatioEstimate
    decode_speedup: RatioEstimate
    ttft_ratio: RatioEstimate
    e2e_p95_ratio: RatioEstimate
    mean_per_sample_speedup: RatioEstimate
    """Spec-Bench style secondary figure: the mean of per-request tokens/s ratios (e2e basis)."""
    speedup_interval: SpeedupInterval | None
    """`throughput_speedup` as the decision's interval; None when it has no interval."""
    per_request: tuple[PairRatio, ...]
    policy: BootstrapPolicy
