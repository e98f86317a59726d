"""Drift: do a pair's per-round log ratios move with time?

The ABBA order cancels a drift that is linear in time from the mean of a pair of rounds, but a candidate whose
advantage grows or shrinks over the run (a warming cache, a neighbour that arrived) is not one number. The test
regresses the per-round log ratios on the round index; its slope's standard error uses the same variance the
interval uses (pooled over the run's pairs where Bartlett allows it, so three rounds still get a test), and a
slope whose two-sided p-value is below `DRIFT_ALPHA` is flagged. A diagnostic, never a gate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from scipy import stats as scipy_stats

__all__ = ["DRIFT_ALPHA", "DRIFT_RULE", "DriftCheck", "drift_check"]

DRIFT_ALPHA = 0.01
DRIFT_RULE = (
    "least-squares slope of the per-round log ratios on the round index, its standard error from the interval's "
    f"variance (pooled or the pair's own); flagged when the two-sided t test's p < {DRIFT_ALPHA}; needs 3 rounds"
)


class DriftCheck(BaseModel):
    """The slope of one metric's per-round log ratios over the rounds, and whether it is flagged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    slope_per_round: float
    """Change of the log ratio per round (0.01 ~ 1 % per round)."""
    se: float
    df: float
    p_value: float
    flagged: bool
    rule: str = DRIFT_RULE


def drift_check(
    metric: str, rounds: Sequence[int], log_ratios: Sequence[float], variance: float | None, df: float | None
) -> DriftCheck | None:
    """The slope test of `log_ratios` (one per round in `rounds`) with residual `variance` on `df` degrees of
    freedom; None with fewer than three rounds or no variance."""
    n = len(rounds)
    if n < 3 or variance is None or variance <= 0 or df is None or df <= 0 or len(log_ratios) != n:
        return None
    mean_x = sum(rounds) / n
    mean_y = sum(log_ratios) / n
    sxx = sum((x - mean_x) ** 2 for x in rounds)
    if sxx <= 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(rounds, log_ratios, strict=True)) / sxx
    se = math.sqrt(variance / sxx)
    p_value = float(2.0 * scipy_stats.t.sf(abs(slope) / se, df))
    return DriftCheck(
        metric=metric, slope_per_round=slope, se=se, df=df, p_value=p_value, flagged=p_value < DRIFT_ALPHA
    )
