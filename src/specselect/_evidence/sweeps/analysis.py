"""The `sweeps` section of `evidence.json`: crossovers, proposal-length choices, goodput and early stops."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from specselect._evidence.sweeps.batch_schedule import ScheduleComparison
from specselect._evidence.sweeps.crossover import Crossover
from specselect._evidence.sweeps.goodput import Goodput
from specselect._evidence.sweeps.length import LengthChoice
from specselect._evidence.sweeps.point import EARLY_STOP_RULE

__all__ = [
    "SWEEP_ANALYSIS_RULE",
    "SWEEP_ANALYSIS_SCHEMA_VERSION",
    "EarlyStop",
    "LengthSweep",
    "ScenarioGoodput",
    "SweepAnalysis",
]

SWEEP_ANALYSIS_SCHEMA_VERSION = 1
SWEEP_ANALYSIS_RULE = (
    "crossover: per candidate and workload measured at two or more concurrency levels (see each crossover's "
    "rule); proposal length: per scenario, over the sub-candidates of one plan entry that differ only in "
    "num_speculative_tokens (see each choice's rule); goodput: per group and scenario when the plan sets "
    "slo_ttft_ms or slo_tpot_ms, over the measured phase; schedules: see each comparison's rule; early stops: "
    + EARLY_STOP_RULE
)


class EarlyStop(BaseModel):
    """A scenario the runner did not measure because the candidate was clearly losing at a lower level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    scenario: str
    reason: str


class LengthSweep(BaseModel):
    """The proposal-length choice for one scenario among one plan entry's sub-candidates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sweep: str
    """The plan entry (the declared candidate name) the sub-candidates came from."""
    fixed: dict[str, Any]
    """The other swept options, equal for every length compared here."""
    choice: LengthChoice
    temperature: float = 0.0
    """The sampling temperature of the scenario compared (acceptance, so the best length, changes with it)."""


class ScenarioGoodput(BaseModel):
    """Requests/s meeting the plan's SLOs for one group in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    scenario: str
    workload: str
    concurrency: int
    goodput: Goodput


class SweepAnalysis(BaseModel):
    """`evidence.json`'s `sweeps` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SWEEP_ANALYSIS_SCHEMA_VERSION
    crossovers: tuple[Crossover, ...] = ()
    lengths: tuple[LengthSweep, ...] = ()
    goodput: tuple[ScenarioGoodput, ...] = ()
    early_stops: tuple[EarlyStop, ...] = ()
    rule: str = SWEEP_ANALYSIS_RULE
    schedules: tuple[ScheduleComparison, ...] = ()
    """Measured per-batch-size schedules next to the static settings and speculation off (`measure_schedule`)."""

    @property
    def empty(self) -> bool:
        """True when the run had nothing to sweep."""
        return not (self.crossovers or self.lengths or self.goodput or self.early_stops or self.schedules)
