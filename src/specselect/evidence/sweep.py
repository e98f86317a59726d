"""Sweeps over concurrency and proposal length: pure analysis over frozen types (the facade).

- `sweep_point`: `SweepPoint`, the early-stop rule (`clearly_losing`, `early_stop_reason`)
- `sweep_crossover`: the concurrency where speculation stops paying (`find_crossover`)
- `sweep_length`: the smallest proposal length as good as the best (`choose_length`)
- `sweep_goodput`: requests/s meeting TTFT and TPOT limits (`goodput`)
- `sweep_budget`: the expected duration stated before a sweep starts (`estimate_duration`)
"""

from __future__ import annotations

from specselect.evidence.sweep_budget import (
    DURATION_RULE,
    DurationEstimate,
    ScenarioDuration,
    ScenarioLoad,
    estimate_duration,
)
from specselect.evidence.sweep_crossover import (
    CROSSOVER_RULE,
    Crossover,
    CrossoverRule,
    CrossoverStatus,
    LevelVerdict,
    find_crossover,
)
from specselect.evidence.sweep_goodput import GOODPUT_RULE, Goodput, GoodputStatus, goodput
from specselect.evidence.sweep_length import LENGTH_RULE, LengthChoice, LengthRow, LengthStatus, choose_length
from specselect.evidence.sweep_point import EARLY_STOP_RULE, SweepPoint, clearly_losing, early_stop_reason

__all__ = [
    "CROSSOVER_RULE",
    "DURATION_RULE",
    "EARLY_STOP_RULE",
    "GOODPUT_RULE",
    "LENGTH_RULE",
    "Crossover",
    "CrossoverRule",
    "CrossoverStatus",
    "DurationEstimate",
    "Goodput",
    "GoodputStatus",
    "LengthChoice",
    "LengthRow",
    "LengthStatus",
    "LevelVerdict",
    "ScenarioDuration",
    "ScenarioLoad",
    "SweepPoint",
    "choose_length",
    "clearly_losing",
    "early_stop_reason",
    "estimate_duration",
    "find_crossover",
    "goodput",
]
