"""The paired rounds: the look schedule, the drift check, the pooled variance and each pair's estimate, the state
of every pair at a look (computed by `evidence.rounds`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect._core.decision import SpeedupInterval
from specselect.records.evidence.stats import RatioEstimate

__all__ = [
    "DRIFT_ALPHA",
    "DRIFT_RULE",
    "ESTIMAND_STATEMENTS",
    "ESTIMATE_SCHEMA_VERSION",
    "HOMOGENEITY_ALPHA",
    "LOOKS_SCHEMA_VERSION",
    "LOOK_RULE",
    "DriftCheck",
    "Estimand",
    "LookPoint",
    "LookSchedule",
    "Metric",
    "PairLook",
    "PairState",
    "PromptsVerdict",
    "RoundEstimate",
    "RoundsPlan",
    "VariancePool",
    "VarianceSource",
    "estimand_statement",
]


_Rounds = Annotated[int, Field(ge=1, le=50)]


class LookSchedule(BaseModel):
    """When the evidence is looked at (rounds completed) and the one-sided error budget of an accept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    looks: tuple[_Rounds, ...] = Field(min_length=1)
    """Rounds completed at each look, ascending; the last is the most rounds a pair can get."""
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = 0.025
    """The one-sided error budget of an accept over all looks: (1 - confidence_level) / 2."""

    @model_validator(mode="after")
    def _ascending(self) -> LookSchedule:
        if any(b <= a for a, b in zip(self.looks, self.looks[1:], strict=False)):
            raise ValueError(f"looks {list(self.looks)} must be strictly ascending round counts")
        return self

    @classmethod
    def of_level(cls, looks: Sequence[int], confidence_level: float) -> LookSchedule:
        """The schedule whose looks together keep a `confidence_level` two-sided interval's one-sided error."""
        return cls(looks=tuple(looks), alpha=(1.0 - confidence_level) / 2.0)

    @property
    def max_rounds(self) -> int:
        return self.looks[-1]

    def look_of(self, rounds: int) -> int | None:
        """The look (0-based) taken after `rounds` completed rounds; None when no look falls there."""
        return self.looks.index(rounds) if rounds in self.looks else None

    def alpha_at(self, look: int) -> float:
        """The one-sided error spent at look `look`: alpha x (its rounds - the previous look's) / max rounds."""
        previous = self.looks[look - 1] if look > 0 else 0
        return self.alpha * (self.looks[look] - previous) / self.max_rounds

    def level_at(self, look: int) -> float:
        """The two-sided level of look `look`'s intervals: each bound is a one-sided bound at alpha_at(look)."""
        return 1.0 - 2.0 * self.alpha_at(look)

    def level_for(self, rounds: int) -> float:
        """The level of the look that `rounds` completed rounds fall under (the latest look at or before them;
        the first look's below it)."""
        at = [k for k, n in enumerate(self.looks) if n <= rounds]
        return self.level_at(at[-1] if at else 0)


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


Metric = Literal["throughput", "ttft_mean", "e2e_mean"]


ESTIMATE_SCHEMA_VERSION = 3
"""2: a pooled variance's df counts what the pairs share (`VariancePool.effective_df`); a heterogeneous pool
never gives a pair a variance below the pool's. 3: under the traffic estimand, the prompts the decision needs
(`prompts_needed`, `prompts_verdict`); older documents have none and read as before."""


HOMOGENEITY_ALPHA = 0.05
"""Bartlett's test below this p-value: the pairs' round variances differ, each pair keeps its own."""


Estimand = Literal["frozen_prompts", "traffic"]

ESTIMAND_STATEMENTS: dict[str, str] = {
    "traffic": "The speedups and their intervals are about the deployment's traffic: each workload's prompts are "
    "a sample of it, and the intervals include how much the speedup varies from prompt to prompt (estimand "
    "traffic).",
    "frozen_prompts": "The speedups and their intervals are about these frozen prompts only: a rerun on the same "
    "prompts should agree, traffic with other prompts may gain more or less (estimand frozen_prompts, for "
    "regression checks on a fixed set).",
}
"""What a decision is about, in one sentence per estimand: the console, the report and the hand-off say it."""


def estimand_statement(estimand: Estimand) -> str:
    """The one sentence that says what a decision under `estimand` is about."""
    return ESTIMAND_STATEMENTS[estimand]


PromptsVerdict = Literal["enough", "more_prompts", "more_rounds"]


VarianceSource = Literal["pooled", "pair", "items_only"]


class VariancePool(BaseModel):
    """The round variances of a run's pairs of one metric, pooled when Bartlett's test finds them alike."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: Metric
    members: tuple[str, ...]
    variances: tuple[float, ...]
    dfs: tuple[int, ...]
    pooled_variance: float | None
    pooled_df: int
    bartlett_statistic: float | None
    bartlett_p: float | None
    homogeneous: bool
    """Bartlett's p >= `homogeneity_alpha` (pairs then use `pooled_variance`); False: each pair its own."""
    homogeneity_alpha: float = HOMOGENEITY_ALPHA
    effective_df: float | None = None
    """Since estimate schema 2: the pooled variance's degrees of freedom once the correlation of pairs measured
    in the same launches is counted (`pooled_df` when nothing is shared; None in older documents)."""
    shared_correlation: dict[str, float] = {}
    """Since estimate schema 2: per kind of sharing (`candidate_launch`: one candidate's scenarios;
    `baseline_measurement`: two candidates on one scenario; `baseline_launch`: two candidates, two scenarios;
    `round`: pairs whose launches are unknown), the estimated correlation of two pairs' per-round log ratios."""

    @property
    def df(self) -> float:
        """The pooled variance's degrees of freedom the intervals use."""
        return self.effective_df if self.effective_df is not None else float(self.pooled_df)

    def variance_for(self, pair: str) -> tuple[float, float, VarianceSource] | None:
        """(variance, df, source) a member uses; None for a pair outside the pool. Pooled when the pairs'
        variances are alike; otherwise a pair's own when it is the larger, the pool's when its own is smaller:
        choosing the smaller of two chance-different variances after a test would make the interval too narrow
        (under equal variances the pooled one is independent of the test's verdict)."""
        if pair not in self.members:
            return None
        pooled = self.pooled_variance
        if pooled is not None and len(self.members) >= 2:
            index = self.members.index(pair)
            if self.homogeneous or self.variances[index] <= pooled:
                return pooled, self.df, "pooled"
            return self.variances[index], float(self.dfs[index]), "pair"
        index = self.members.index(pair)
        return self.variances[index], float(self.dfs[index]), "pair"


class RoundEstimate(BaseModel):
    """A paired-round estimate of one metric's candidate / baseline ratio with its t interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = ESTIMATE_SCHEMA_VERSION
    metric: Metric
    statistic: str
    unit: str
    estimand: Estimand
    point: float | None
    low: float | None = None
    high: float | None = None
    level: float
    df: float | None = None
    se_log: float | None = None
    variance_source: VarianceSource | None = None
    launch_variance_included: bool = False
    rounds: tuple[int, ...] = ()
    round_log_ratios: tuple[float, ...] = ()
    baseline_values: tuple[float, ...] = ()
    candidate_values: tuple[float, ...] = ()
    """Each round's value per side (tokens/s, or mean seconds)."""
    baseline_value: float | None = None
    candidate_value: float | None = None
    """Geometric means over the rounds: candidate_value / baseline_value is `point`."""
    excluded_rounds: dict[int, str] = {}
    unpaired_rounds: tuple[int, ...] = ()
    n_items: int = 0
    dropped_items: tuple[str, ...] = ()
    round_variance: float | None = None
    """The pair's own sample variance of its per-round log ratios."""
    variance_used: float | None = None
    variance_df: float | None = None
    """The per-round variance the interval used (pooled or the pair's own) and its degrees of freedom."""
    item_variance: float | None = None
    prompts_needed: int | None = None
    """Since estimate schema 3, traffic estimand: the prompts per workload at which this interval, its launch
    part as measured, would exclude the minimum speedup (`evidence.rounds.estimate.with_prompts_needed`)."""
    prompts_verdict: PromptsVerdict | None = None
    """`enough`: the pair's prompts reach `prompts_needed`; `more_prompts`: they do not, so the decision stays
    open for want of prompts; `more_rounds`: the launch part alone is too wide, more prompts cannot resolve it."""
    rerun_low: float | None = None
    rerun_high: float | None = None
    """Where a rerun of the same design should put ITS point: the interval's reach times sqrt 2."""
    method: str = "paired_rounds_t"
    reason: str | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def as_ratio_estimate(self, n_samples: int = 0) -> RatioEstimate:
        """This estimate in the shape of the paired statistics' figures (`PairedStats.throughput_speedup`)."""
        return RatioEstimate(
            metric="throughput_speedup" if self.metric == "throughput" else self.metric,
            statistic=self.statistic,
            point=self.point,
            low=self.low,
            high=self.high,
            level=self.level,
            n_samples=n_samples,
            n_clusters=self.n_items,
            n_dropped=0,
            method=self.method,
            n_resamples=0,
            seed=0,
            reason=self.reason,
        )

    def interval(self) -> SpeedupInterval | None:
        """This estimate as the decision's interval."""
        if self.low is None or self.high is None:
            return None
        return SpeedupInterval(
            low=self.low,
            high=self.high,
            level=self.level,
            method=self.method,
            point=self.point,
            df=self.df,
            launch_variance_included=self.launch_variance_included,
        )


LOOKS_SCHEMA_VERSION = 1


PairState = Literal["accepted", "cannot_accept", "open"]


LOOK_RULE = (
    "looks fixed in advance; at a look a pair is accepted, cannot_accept (reject, not comparable, memory over "
    "budget, speedup interval high below the minimum, a latency mean ratio's interval low above its limit) or "
    "open; a candidate with an open pair runs the rounds to the next look with its baseline; a pair's decision is "
    "its first accepting look's, else its last look's; the one-sided error of an accept is spent over the looks "
    "in proportion to their rounds"
)


class LookPoint(BaseModel):
    """One look as analysed: the rounds it uses (indices below `rounds`) and its intervals' level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    look: int
    rounds: int
    level: float


class PairLook(BaseModel):
    """One pair at one look."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    scenario: str
    state: PairState
    why: str
    decision: str
    reason: str
    look: int
    rounds: int
    """Rounds the pair's estimate rests on."""
    level: float
    low: float | None = None
    high: float | None = None


class RoundsPlan(BaseModel):
    """What the rule says after some rounds: the pairs' states at this look and who runs on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = LOOKS_SCHEMA_VERSION
    rounds_done: int
    look: int | None
    """The look these rounds complete (0-based); None between looks (every active candidate runs on)."""
    level: float
    """The two-sided level of this look's intervals."""
    pairs: tuple[PairLook, ...] = ()
    continuing: tuple[str, ...] = ()
    """Candidates that run the rounds to `next_rounds`."""
    next_rounds: int | None = None
    """The rounds completed at the next look (None: no more rounds)."""
    stop: str | None = None
    """Why no more rounds run: every pair settled, or the last look was taken."""
    schedule: LookSchedule
    rule: str = LOOK_RULE
