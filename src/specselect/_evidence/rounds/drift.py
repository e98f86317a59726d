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

from scipy import stats as scipy_stats

from specselect.records.evidence.rounds import DRIFT_ALPHA, DriftCheck

__all__ = ["drift_check"]


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
