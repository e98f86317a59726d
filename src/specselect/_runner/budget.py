"""Time budgets: a sweep's, stated before its candidates run (from the baseline's measured start-up and decode rate),
and whether the rounds after a look fit the plan's `sequential_budget_s` (from the launches that ran)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from specselect._admission import Admissions
from specselect._core.status import RunStatus
from specselect._evidence.pipeline import scenario_name
from specselect._evidence.sweeps import ScenarioLoad, estimate_duration
from specselect._plan import LoadedPlan
from specselect.records.evidence.sweeps import DurationEstimate
from specselect.records.group import GroupResult
from specselect.records.workloads import Workload

__all__ = ["is_sweep", "remaining_budget", "round_seconds", "round_that_does_not_fit"]


def is_sweep(loaded: LoadedPlan) -> bool:
    """Several concurrency levels, or a candidate expanded into sub-candidates."""
    plan = loaded.plan
    return len(plan.run.concurrency) > 1 or bool(plan.sweeps)


def _per_stream_rate(baseline: GroupResult) -> float | None:
    measured = [
        run
        for run in baseline.scenarios
        if run.status == "completed" and run.summary is not None and run.summary.output_throughput_tok_s
    ]
    if not measured:
        return None
    lowest = min(measured, key=lambda run: run.concurrency)
    assert lowest.summary is not None and lowest.summary.output_throughput_tok_s is not None  # filtered above
    return lowest.summary.output_throughput_tok_s / lowest.concurrency


def remaining_budget(
    loaded: LoadedPlan,
    adm: Admissions,
    workloads: Mapping[str, Workload],
    *,
    baseline: GroupResult,
    done: Mapping[str, GroupResult],
    launches_servers: bool = True,
) -> DurationEstimate | None:
    """The expected duration of the groups still to run, or None when the baseline gave nothing to go by.

    Every group still to run starts a server in each of the first look's `rounds`; the baseline, whose first
    launch just ran, the rest of its own (rounds after the first look run only for open pairs: not counted).
    """
    plan = loaded.plan
    rate = _per_stream_rate(baseline) if baseline.run_status == RunStatus.COMPLETED else None
    if rate is None or rate <= 0:
        return None
    todo = [
        cand
        for cand in plan.groups
        if cand.name not in done
        and (cand.runs_target_only or ((result := adm.result(cand.name)) is not None and result.admitted))
    ]
    rounds = plan.run.rounds
    lives = [(cand.name, j) for cand in todo for j in range(rounds)]
    lives += [(baseline.group, j) for j in range(1 + len(baseline.relaunches), rounds)]
    scenarios = [
        ScenarioLoad(
            name=f"{group}/{scenario_name(name, level, temperature)}" + (f"/round{j + 1}" if rounds > 1 else ""),
            concurrency=level,
            n_requests=plan.run.warmup_at(level) + plan.run.repeats * len(workload.items),
            max_tokens=plan.sampling.max_tokens,
        )
        for group, j in lives
        for name, workload in workloads.items()
        for temperature in plan.sampling.temperatures
        for level in plan.run.concurrency
    ]
    if not scenarios:
        return None
    startup = baseline.launch.startup_s if baseline.launch is not None and baseline.launch.startup_s else 0.0
    return estimate_duration(
        servers_to_start=len(lives) if launches_servers else 0,
        startup_s=startup if launches_servers else 0.0,
        scenarios=scenarios,
        tokens_per_s=rate,
    )


def _seconds(started_at: str | None, finished_at: str | None) -> float | None:
    if started_at is None or finished_at is None:
        return None
    return (dt.datetime.fromisoformat(finished_at) - dt.datetime.fromisoformat(started_at)).total_seconds()


def round_seconds(groups: Sequence[GroupResult]) -> float | None:
    """The expected duration of one more launch of each group: the sum of each one's longest launch so far (server
    start-up, measurement and stop); None when a group has no timed launch to go by."""
    total = 0.0
    for group in groups:
        lives = [(life.started_at, life.finished_at) for life in (group, *group.relaunches)]
        longest = max((s for s in (_seconds(*life) for life in lives) if s is not None), default=None)
        if longest is None:
            return None
        total += longest
    return total


def round_that_does_not_fit(
    budget_s: float | None, elapsed_s: float, groups: Sequence[GroupResult], *, start: int, end: int
) -> str | None:
    """Why rounds `start` .. `end` - 1 (0-based) are left out under the plan's `sequential_budget_s`, or None when
    they fit (or no budget is set). Rounds with nothing to go by are left out: their cost is unknown."""
    if budget_s is None:
        return None
    which = f"round {start + 1}" if end == start + 1 else f"rounds {start + 1}-{end}"
    one = round_seconds(groups)
    if one is None:
        return f"{which} left out: no timed launch of {', '.join(g.group for g in groups)} to go by"
    projected = one * (end - start)
    if elapsed_s + projected <= budget_s:
        return None
    return (
        f"{which} left out: {elapsed_s:.0f} s spent and ~{projected:.0f} s expected for "
        f"{', '.join(g.group for g in groups)} exceed sequential_budget_s = {budget_s:.0f}"
    )
