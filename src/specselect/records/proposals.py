"""The engine-neutral vocabulary of a proposal: the plan's name for its length and a per-batch-size schedule."""

from __future__ import annotations

__all__ = ["LENGTH_AXIS", "ScheduleRange"]

LENGTH_AXIS = "num_speculative_tokens"
"""The axis name of the proposal length (in `SweepOrigin.values` and `.axes`)."""

ScheduleRange = tuple[int, int | None, int]
"""(first batch size, last batch size or None for "and above", proposal length) of a per-batch-size schedule."""
