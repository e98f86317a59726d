"""Sequential repeats (`repeats = "auto"`): keep measuring a pair only while its decision can still change.

A pair is settled once its speedup interval lies entirely on one side of every threshold it is judged against
(`decision_thresholds`: the minimum speedup, 1.0 for a net slowdown, the A/A band's edge): low >= t or high < t,
the comparisons `core.decision.decide` makes. More data would narrow the interval but not move it across, so the
pair stops and the passes it did not use are saved -- unless a latency check keeps the pair from an accept
(`PairProgress.unsettled_checks`: its point passes, its interval reaches above the limit), which continues it
like a straddling speedup. While an interval straddles a threshold the rule adds
 - a launch when between-launch variance dominates (launch_share >= `launch_share_for_launch`): more repeats in
   the same launches cannot shrink it; also while fewer than `min_launches` launches were measured;
 - otherwise a repeat in the running launch (the runner keeps that server up between looks);
falling back to the other when one is exhausted, and stopping with `budget_exhausted` when both are.
No interval (too few items) stops with `no_interval`: repeats of the same items add no clusters.

Peeking: every look at a 95% interval is another chance to settle on noise. `look_level` is the level the
runner should compute interim intervals at (Bonferroni over the most looks the budget allows), so the whole
sequence keeps the nominal error rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specselect.core.decision import NoiseFloor, Thresholds
from specselect.evidence.replication import ReplicatedEstimate

__all__ = [
    "SEQUENTIAL_RULE",
    "SEQUENTIAL_SCHEMA_VERSION",
    "PairProgress",
    "SequentialAction",
    "SequentialPlan",
    "SequentialPolicy",
    "SequentialStep",
    "decision_thresholds",
    "launch_look_level",
    "look_level",
    "next_step",
    "plan_next",
    "plan_of",
    "progress_from_estimate",
]

SEQUENTIAL_SCHEMA_VERSION = 1
SequentialAction = Literal["settled", "add_repeats", "add_launch", "stop"]

SEQUENTIAL_RULE = (
    "a pair is settled when for every threshold t it is judged against (min speedup, 1.0, the A/A band edge) its "
    "speedup interval has low >= t or high < t, and no latency check is unsettled (its point passes, its interval "
    "reaches above the limit: continued with reason latency_interval_straddles_limit); otherwise add a launch "
    "while launches < min_launches or when "
    "between-launch variance is at least launch_share_for_launch of the total, else a repeat in the running launch; "
    "an exhausted option falls to the other; both exhausted -> stop (budget_exhausted); no interval -> stop "
    "(no_interval); interim intervals at look_level (Bonferroni over the most looks)"
)


class SequentialPolicy(BaseModel):
    """The budget and the choice between repeats and launches; written into every step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_repeats: int = Field(ge=1)
    """Repeats (workload passes) per launch at the most."""
    max_launches: int = Field(ge=1)
    min_launches: int = Field(default=1, ge=1)
    repeat_step: int = Field(default=1, ge=1)
    launch_share_for_launch: float = Field(default=0.5, ge=0, le=1)

    @model_validator(mode="after")
    def _consistent(self) -> SequentialPolicy:
        if self.min_launches > self.max_launches:
            raise ValueError(f"min_launches {self.min_launches} exceeds max_launches {self.max_launches}")
        return self

    @property
    def max_passes(self) -> int:
        """Workload passes the budget allows: max_repeats x max_launches."""
        return self.max_repeats * self.max_launches


def look_level(level: float, policy: SequentialPolicy) -> float:
    """The interval level for each interim look: 1 - (1 - level) / (most looks), Bonferroni over the sequence."""
    return 1.0 - (1.0 - level) / policy.max_passes


def launch_look_level(level: float, policy: SequentialPolicy) -> float:
    """`look_level` when the rule looks once per launch (after min_launches, then after each added launch):
    1 - (1 - level) / (max_launches - min_launches + 1)."""
    return 1.0 - (1.0 - level) / (policy.max_launches - policy.min_launches + 1)


class PairProgress(BaseModel):
    """Where one pair (candidate x scenario) stands: its current interval and what it has used."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pair: str = Field(min_length=1)
    point: float | None = None
    low: float | None
    high: float | None
    launches: int = Field(ge=1)
    repeats: int = Field(ge=1)
    """Repeats measured in the running (last) launch."""
    passes: int = Field(ge=1)
    """Workload passes over all launches so far."""
    launch_share: float | None = Field(default=None, ge=0, le=1)
    """Between-launch share of the variance (`VarianceComponents.launch_share`)."""
    n_items: int | None = Field(default=None, ge=0)
    """Workload items, to count the budget in requests."""
    unsettled_checks: tuple[str, ...] = ()
    """Latency checks whose interval straddles their limit (`core.decision` keeps such a pair from accept)."""


def progress_from_estimate(
    pair: str, estimate: ReplicatedEstimate, *, repeats: int, passes: int | None = None
) -> PairProgress:
    """A pair's progress from its replicated estimate; `passes` defaults to repeats x candidate launches."""
    launches = max(1, len(estimate.launches_candidate))
    return PairProgress(
        pair=pair,
        point=estimate.point,
        low=estimate.low,
        high=estimate.high,
        launches=launches,
        repeats=repeats,
        passes=passes if passes is not None else repeats * launches,
        launch_share=estimate.components.launch_share if estimate.components else None,
        n_items=estimate.n_items,
    )


class SequentialStep(BaseModel):
    """What to do next with one pair, why, and the budget spent and saved."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SEQUENTIAL_SCHEMA_VERSION
    pair: str
    action: SequentialAction
    reason: str
    add_repeats: int = 0
    add_launches: int = 0
    thresholds: tuple[float, ...]
    straddled: tuple[float, ...] = ()
    sides: tuple[Literal["above", "below"], ...] = ()
    """Settled: for each threshold, whether the interval lies above (low >= t) or below (high < t) it."""
    unsettled_checks: tuple[str, ...] = ()
    """Latency checks that kept a speedup-settled pair going (`PairProgress.unsettled_checks`)."""
    passes_spent: int
    passes_saved: int
    """On a terminal action (settled, stop): passes the budget allowed but this pair did not use."""
    requests_spent: int | None = None
    requests_saved: int | None = None
    policy: SequentialPolicy
    rule: str = SEQUENTIAL_RULE


def decision_thresholds(thresholds: Thresholds, noise_floor: NoiseFloor | None = None) -> tuple[float, ...]:
    """The speedup thresholds `decide` judges an interval against, ascending and once each."""
    values = {thresholds.min_throughput_speedup, 1.0}
    if noise_floor is not None:
        values.add(noise_floor.band_high)
    return tuple(sorted(values))


def _growth(progress: PairProgress, policy: SequentialPolicy) -> tuple[SequentialAction, str, int, int]:
    can_repeat = progress.repeats < policy.max_repeats
    can_launch = progress.launches < policy.max_launches
    if can_launch and progress.launches < policy.min_launches:
        return "add_launch", "below_min_launches", 0, 1
    launch_heavy = progress.launch_share is not None and progress.launch_share >= policy.launch_share_for_launch
    if can_launch and (launch_heavy or not can_repeat):
        return "add_launch", "interval_straddles_threshold", 0, 1
    if can_repeat:
        step = min(policy.repeat_step, policy.max_repeats - progress.repeats)
        return "add_repeats", "interval_straddles_threshold", step, 0
    return "stop", "budget_exhausted", 0, 0


def next_step(progress: PairProgress, thresholds: Sequence[float], policy: SequentialPolicy) -> SequentialStep:
    """Settled, add repeats, add a launch, or stop -- for one pair, from its current interval and budget."""
    limits = tuple(sorted(set(thresholds)))
    low, high = progress.low, progress.high
    straddled: tuple[float, ...] = ()
    sides: tuple[Literal["above", "below"], ...] = ()
    if low is None or high is None:
        action, reason, repeats, launches = "stop", "no_interval", 0, 0
    else:
        straddled = tuple(t for t in limits if low < t <= high)
        if straddled:
            action, reason, repeats, launches = _growth(progress, policy)
        elif progress.unsettled_checks:
            action, reason, repeats, launches = _growth(progress, policy)
            reason = "latency_interval_straddles_limit" if reason == "interval_straddles_threshold" else reason
        else:
            action, reason, repeats, launches = "settled", "decision_settled", 0, 0
            sides = tuple("above" if low >= t else "below" for t in limits)
    terminal = action in ("settled", "stop")
    saved = max(0, policy.max_passes - progress.passes) if terminal else 0
    items = progress.n_items
    return SequentialStep(
        pair=progress.pair,
        action=action,
        reason=reason,
        add_repeats=repeats,
        add_launches=launches,
        thresholds=limits,
        straddled=straddled,
        sides=sides,
        unsettled_checks=progress.unsettled_checks if action != "settled" else (),
        passes_spent=progress.passes,
        passes_saved=saved,
        requests_spent=None if items is None else progress.passes * items,
        requests_saved=None if items is None else saved * items,
        policy=policy,
    )


class SequentialPlan(BaseModel):
    """The next step of every pair and the budget over all of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SEQUENTIAL_SCHEMA_VERSION
    steps: tuple[SequentialStep, ...]
    n_settled: int
    n_continuing: int
    n_stopped: int
    passes_spent: int
    passes_saved: int
    policy: SequentialPolicy


def plan_next(
    progress: Sequence[PairProgress], thresholds: Sequence[float], policy: SequentialPolicy
) -> SequentialPlan:
    """`next_step` for every pair (in pair order) and the totals; done when `n_continuing` is 0."""
    return plan_of(tuple(next_step(p, thresholds, policy) for p in sorted(progress, key=lambda p: p.pair)), policy)


def plan_of(steps: tuple[SequentialStep, ...], policy: SequentialPolicy) -> SequentialPlan:
    """The plan of these steps, with their totals."""
    return SequentialPlan(
        steps=steps,
        n_settled=sum(s.action == "settled" for s in steps),
        n_continuing=sum(s.action in ("add_repeats", "add_launch") for s in steps),
        n_stopped=sum(s.action == "stop" for s in steps),
        passes_spent=sum(s.passes_spent for s in steps),
        passes_saved=sum(s.passes_saved for s in steps),
        policy=policy,
    )
