"""One measured point of a sweep and the early-stop rule the runner applies to it.

A sweep point is one candidate (or one proposal-length sub-candidate) in one scenario (workload x
concurrency): its throughput speedup against the baseline of that same scenario, as `evidence.stats`
computes it, whether the scenario decision accepted it, and the paired per-request ratios.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect._core.decision import DecisionResult
from specselect._core.status import Decision
from specselect.records.evidence.stats import PairRatio, RatioEstimate

__all__ = ["SweepPoint", "clearly_losing", "early_stop_reason"]


class SweepPoint(BaseModel):
    """One candidate in one scenario of a sweep (the unit crossover and length choice work on)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    concurrency: int = Field(ge=1)
    proposal_length: int | None = Field(default=None, ge=1)
    speedup: RatioEstimate
    """Throughput speedup against the target-only baseline of the same scenario."""
    meets_thresholds: bool | None = None
    """True when the scenario decision was accept; None when no decision was made."""
    per_request: tuple[PairRatio, ...] = ()
    """Paired per-request ratios; length-vs-length comparisons pair these by (item_id, repeat)."""
    decision: DecisionResult | None = None
    """Optional: the scenario decision itself. With it, a failed threshold counts as a clear stop only when
    the failure is definite (see `sweep_crossover.CROSSOVER_RULE`); without it every failure does."""

    @model_validator(mode="after")
    def _consistent(self) -> SweepPoint:
        if self.decision is not None and self.meets_thresholds is not None:
            accepted = self.decision.decision is Decision.ACCEPT
            if accepted != self.meets_thresholds:
                raise ValueError(
                    f"sweep point {self.candidate}/{self.workload}/c{self.concurrency}: meets_thresholds="
                    f"{self.meets_thresholds} contradicts decision {self.decision.decision.value}; "
                    "set meets_thresholds to (decision == accept)"
                )
        return self


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def clearly_losing(speedup: RatioEstimate, *, break_even: float = 1.0) -> bool:
    """True when the speedup interval lies entirely below `break_even` (high < 1.0 by default).

    A point estimate without an interval is never "clearly" anything.
    """
    low, high = _finite(speedup.low), _finite(speedup.high)
    return low is not None and high is not None and high < break_even


def early_stop_reason(point: SweepPoint) -> str | None:
    """Why the runner may skip this workload's higher concurrency levels for this candidate; None to go on."""
    speedup = point.speedup
    if not clearly_losing(speedup):
        return None
    point_text = "n/a" if speedup.point is None else f"{speedup.point:.3g}"
    return (
        f"clearly_losing: {point.candidate} on {point.workload} at concurrency {point.concurrency} has "
        f"throughput speedup {point_text} with {speedup.level:.0%} interval [{speedup.low:.3g}, "
        f"{speedup.high:.3g}] entirely below 1.0; higher concurrency levels of this workload are skipped"
    )
