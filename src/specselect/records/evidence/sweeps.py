"""What the sweeps found: goodput, the duration budget, concurrency crossovers, proposal-length choices, the
per-batch-size schedule and its comparison, and the analysis that holds them (computed by `evidence.sweeps`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate
from specselect.records.proposals import ScheduleRange

__all__ = [
    "BUDGET_SCHEMA_VERSION",
    "COMPARISON_RULE",
    "CROSSOVER_RULE",
    "CROSSOVER_SCHEMA_VERSION",
    "DURATION_RULE",
    "EARLY_STOP_RULE",
    "GOODPUT_RULE",
    "GOODPUT_SCHEMA_VERSION",
    "LENGTH_RULE",
    "LENGTH_SCHEMA_VERSION",
    "SCHEDULE_RULE",
    "SCHEDULE_SCHEMA_VERSION",
    "SWEEP_ANALYSIS_RULE",
    "SWEEP_ANALYSIS_SCHEMA_VERSION",
    "Crossover",
    "CrossoverRule",
    "CrossoverStatus",
    "DerivedSchedule",
    "DurationEstimate",
    "EarlyStop",
    "Goodput",
    "GoodputStatus",
    "LengthChoice",
    "LengthRow",
    "LengthStatus",
    "LengthSweep",
    "LevelVerdict",
    "LevelVerdictKind",
    "ScenarioDuration",
    "ScenarioGoodput",
    "ScheduleCell",
    "ScheduleComparison",
    "ScheduleLevel",
    "ScheduleRow",
    "ScheduleStatus",
    "SweepAnalysis",
]


EARLY_STOP_RULE = (
    "a workload's higher concurrency levels are skipped for a candidate once its throughput speedup interval "
    "lies entirely below 1.0 (interval high < 1.0) at a lower level; a point estimate without an interval "
    "never triggers it"
)


GOODPUT_SCHEMA_VERSION = 1


GoodputStatus = Literal["computed", "not_computed"]


GOODPUT_RULE = (
    "Over the measured (non-warm-up) requests: TTFT = first_token - send; TPOT = (end - first_token) / "
    "(completion_tokens - 1). A request meets the SLO when it succeeded, TTFT <= slo_ttft_ms and TPOT <= "
    "slo_tpot_ms; a limit that is None is not applied. A failed request (error) never meets it. A one-token "
    "request has no inter-token time, so it meets the TPOT limit (its latency is all TTFT). A successful request "
    "missing a time or token count that an applied limit needs is 'unmeasured' and does not meet it. "
    "goodput_rps = requests meeting the SLO / duration_s; throughput_rps = successful requests / duration_s. "
    "Both limits None -> status not_computed (goodput_rps, n_met and share_met None)."
)


class Goodput(BaseModel):
    """Requests/s meeting the TTFT and TPOT limits over the measured phase of one candidate in one scenario."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = GOODPUT_SCHEMA_VERSION
    status: GoodputStatus
    n_requests: int
    """Measured requests, failed ones included (warm-up excluded)."""
    n_met: int | None
    share_met: float | None
    """n_met / n_requests; None with no requests or when not computed."""
    goodput_rps: float | None
    throughput_rps: float
    n_errors: int
    n_single_token: int
    n_unmeasured: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    duration_s: float
    rule: str = GOODPUT_RULE


BUDGET_SCHEMA_VERSION = 1


DURATION_RULE = (
    "seconds = servers_to_start * startup_s + sum over scenario runs of n_requests * max_tokens / "
    "(tokens_per_s * min(concurrency, n_requests)); with requests_per_s, a scenario takes at least "
    "n_requests / requests_per_s. tokens_per_s is one stream's measured decode rate; a closed loop at "
    "concurrency c is assumed to run c streams at that rate. Speculation changes the per-stream rate and "
    "batching makes concurrent streams slower than one alone, and requests may stop before max_tokens: this is "
    "a budget, not a promise."
)


class ScenarioDuration(BaseModel):
    """The expected seconds of one scenario run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    seconds: float


class DurationEstimate(BaseModel):
    """The expected duration of a sweep and how it was computed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = BUDGET_SCHEMA_VERSION
    seconds: float
    servers: int
    startup_s: float
    tokens_per_s: float
    requests_per_s: float | None
    per_scenario: tuple[ScenarioDuration, ...]
    """In input order; a scenario measured on several servers appears once per server."""
    rule: str = DURATION_RULE


CROSSOVER_SCHEMA_VERSION = 1


CrossoverStatus = Literal["pays_at_all_levels", "crossover", "never_pays", "no_clear_difference", "insufficient_data"]


LevelVerdictKind = Literal["pays", "clear_stop", "unclear", "no_data"]


CROSSOVER_RULE = (
    "Per concurrency level, in this order: 'no_data' when the throughput speedup has no point estimate; "
    "'clear_stop' when its interval lies entirely below {break_even:g} (high < {break_even:g}), or when the "
    "scenario decision failed the thresholds{threshold_clause}; 'pays' when the decision accepted "
    "(meets_thresholds true), or, with no decision, when the interval lies entirely above {break_even:g} "
    "(low > {break_even:g}); otherwise 'unclear' (interval crossing {break_even:g}, point estimate only, or an "
    "indefinite threshold failure). A point estimate without an interval is never 'clearly' anything. "
    "pays_up_to = highest level L such that every measured level <= L pays; crossover_at = lowest level that "
    "is a clear stop (on noisy, non-monotone data the first clear stop is the cut-off even if a higher level "
    "pays again). Status: every level pays -> pays_at_all_levels; some pay, some do not -> crossover; none "
    "pays and one clearly stops -> never_pays; none pays and none clearly stops -> no_clear_difference; no "
    "level has an estimate -> insufficient_data. The recommendation enables speculation up to pays_up_to."
)


_DEFINITE_CLAUSE = (
    " definitely (with the decision given: quality rejected, a latency or memory check failed, or the speedup "
    "check failed with a confident interval; without it: any failure whose interval does not cross "
    "{break_even:g})"
)


class CrossoverRule(BaseModel):
    """How a single concurrency level is judged; written into every `Crossover`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    break_even: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """The speedup an interval is compared with to call a level clearly paying or clearly losing."""
    threshold_failure_stops: bool = True
    """A definite threshold failure is a clear stop (not only a speedup interval below break-even)."""

    def text(self) -> str:
        """This rule in words, as stored in `Crossover.rule`."""
        clause = _DEFINITE_CLAUSE.format(break_even=self.break_even) if self.threshold_failure_stops else " (off)"
        return CROSSOVER_RULE.format(break_even=self.break_even, threshold_clause=clause)


class LevelVerdict(BaseModel):
    """One concurrency level as the crossover rule saw it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    verdict: LevelVerdictKind
    why: str
    speedup_point: float | None
    speedup_low: float | None
    speedup_high: float | None
    meets_thresholds: bool | None


class Crossover(BaseModel):
    """Where one candidate stops paying on one workload as concurrency grows, with the evidence on both sides."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = CROSSOVER_SCHEMA_VERSION
    candidate: str
    workload: str
    temperature: float = 0.0
    """The sampling temperature of the levels compared."""
    levels: tuple[int, ...]
    status: CrossoverStatus
    pays_up_to: int | None
    crossover_at: int | None
    interval_at_crossover: RatioEstimate | None
    """The speedup at `crossover_at`."""
    interval_before: RatioEstimate | None
    """The speedup at the measured level just below `crossover_at`, else at `pays_up_to`."""
    recommendation: str
    reason: str
    rule: str
    level_rule: CrossoverRule
    per_level: tuple[LevelVerdict, ...]


LENGTH_SCHEMA_VERSION = 1


LengthStatus = Literal["clear_best", "no_clear_difference", "none_pays", "insufficient_data"]


LENGTH_RULE = (
    "best = the proposal length with the highest point throughput speedup (ties -> the smaller length). Every "
    "other length k is compared with the best by a paired cluster bootstrap (items are the clusters) over the "
    "requests both measured, paired by (item_id, repeat): ratio = mean per-request throughput speedup of k / "
    "that of the best. k is statistically indistinguishable from the best when that ratio's interval contains "
    "1.0; no interval (too few items or pairs) -> not assessed, never recommended. The recommended length is "
    "the SMALLEST length indistinguishable from the best (conservative). Status: best's speedup interval "
    "entirely below 1.0 -> none_pays (nothing recommended); no other length assessed -> insufficient_data; "
    "every assessed length indistinguishable -> no_clear_difference; otherwise clear_best."
)


class LengthRow(BaseModel):
    """One proposal length in the comparison table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    length: int
    candidate: str
    speedup_point: float | None
    speedup_low: float | None
    speedup_high: float | None
    vs_best_point: float | None = None
    """Mean per-request speedup of this length over the best's, on the shared pairs."""
    vs_best_low: float | None = None
    vs_best_high: float | None = None
    indistinguishable: bool
    """The vs-best interval contains 1.0 (always true for the best itself)."""
    is_best: bool = False
    n_pairs: int = 0
    """Shared (item_id, repeat) pairs used for the vs-best ratio."""
    n_clusters: int = 0
    note: str | None = None
    """Why the vs-best figures are missing, when they are."""


class LengthChoice(BaseModel):
    """The recommended proposal length for ONE scenario (workload + concurrency), with its evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = LENGTH_SCHEMA_VERSION
    workload: str
    concurrency: int
    status: LengthStatus
    recommended_length: int | None
    recommended_candidate: str | None
    best_length: int | None
    best_candidate: str | None
    per_length: tuple[LengthRow, ...]
    """Sorted by length."""
    reason: str
    rule: str = LENGTH_RULE
    policy: BootstrapPolicy


SCHEDULE_SCHEMA_VERSION = 1


ScheduleStatus = Literal["derived", "off_everywhere"]


SCHEDULE_RULE = (
    "per concurrency level and workload: the length the proposal-length choice recommends there when its "
    "crossover verdict at that level is 'pays' (the decision accepted), else the paying length with the highest "
    "speedup lower bound, else 0 (off); one server serves every workload, so a level's length is the smallest "
    "over the workloads, and 0 when any workload pays with no length there. Level L_i covers batch sizes from "
    "L_i (1 for the lowest level) up to L_(i+1) - 1; the highest level's length holds above it (unmeasured "
    "there); neighbouring ranges with the same length are merged"
)


COMPARISON_RULE = (
    "per workload and level: speculation off is the baseline (speedup 1.0); the best static setting is the "
    "length the proposal-length choice recommends there (the only length when one was swept); the schedule and "
    "any engine controller are their own measured candidates against the same baseline. Two settings differ "
    "clearly only when their speedup intervals do not overlap; otherwise: no clear difference"
)


class ScheduleLevel(BaseModel):
    """The proposal length the schedule uses at one measured concurrency level, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    proposal_length: int
    """0: speculation off at this level."""
    candidate: str | None
    """The sub-candidate whose measurement chose the length (None when off)."""
    why: str


class DerivedSchedule(BaseModel):
    """One server's per-batch-size proposal schedule, derived from one sweep entry's measurements."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEDULE_SCHEMA_VERSION
    sweep: str
    """The plan entry whose sub-candidates it was derived from."""
    status: ScheduleStatus
    levels: tuple[ScheduleLevel, ...]
    ranges: tuple[ScheduleRange, ...]
    """Batch-size ranges in order: (first, last or None, proposal length)."""
    reason: str
    rule: str = SCHEDULE_RULE


class ScheduleCell(BaseModel):
    """One setting at one workload and level: its candidate, speedup and decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate: str
    proposal_length: int | None
    speedup_point: float | None
    speedup_low: float | None
    speedup_high: float | None
    decision: str | None


class ScheduleRow(BaseModel):
    """Speculation off, the best static setting, the schedule and the engine's controllers at one level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    concurrency: int
    schedule_length: int
    """The proposal length the schedule uses at this level (0: off)."""
    static: ScheduleCell | None
    schedule: ScheduleCell | None
    controllers: tuple[ScheduleCell, ...] = ()
    verdict: str
    """The schedule against the best static setting at this level."""


class ScheduleComparison(BaseModel):
    """`evidence.json`'s comparison of one measured schedule with static settings and speculation off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEDULE_SCHEMA_VERSION
    sweep: str
    candidate: str
    """The schedule's own candidate."""
    schedule: DerivedSchedule
    rows: tuple[ScheduleRow, ...]
    controllers: dict[str, str]
    """Controller candidate -> the engine controller it runs."""
    summary: str
    rule: str = COMPARISON_RULE


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
