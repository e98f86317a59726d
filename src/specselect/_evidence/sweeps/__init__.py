"""Sweeps over concurrency and proposal length: pure analysis over frozen types.

- `point`: `SweepPoint`, the early-stop rule (`clearly_losing`, `early_stop_reason`)
- `crossover`: the concurrency where speculation stops paying (`find_crossover`)
- `length`: the smallest proposal length as good as the best (`choose_length`)
- `goodput`: requests/s meeting TTFT and TPOT limits (`goodput`)
- `budget`: the expected duration stated before a sweep starts (`estimate_duration`)
- `schedule`: the per-batch-size schedule a sweep derives (`derive_schedule`) and its measured comparison
  (`compare_schedule`)
- `analysis`: `evidence.json`'s `sweeps` section (`SweepAnalysis`), filled by the pipeline's sweeps step
"""

from __future__ import annotations

from specselect._evidence.sweeps.batch_schedule import (
    capped_schedule,
    compare_schedule,
    cutoff_schedule,
    derive_schedule,
    schedule_ranges,
)
from specselect._evidence.sweeps.budget import ScenarioLoad, estimate_duration
from specselect._evidence.sweeps.crossover import find_crossover
from specselect._evidence.sweeps.goodput import goodput
from specselect._evidence.sweeps.length import choose_length
from specselect._evidence.sweeps.point import SweepPoint, clearly_losing, early_stop_reason

__all__ = [
    "ScenarioLoad",
    "SweepPoint",
    "capped_schedule",
    "choose_length",
    "clearly_losing",
    "compare_schedule",
    "cutoff_schedule",
    "derive_schedule",
    "early_stop_reason",
    "estimate_duration",
    "find_crossover",
    "goodput",
    "schedule_ranges",
]
