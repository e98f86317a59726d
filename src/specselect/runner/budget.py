"""A sweep's time budget, stated before its candidates run: from the baseline's measured start-up and decode rate."""

from __future__ import annotations

from collections.abc import Mapping

from specselect.admission import Admissions
from specselect.artifacts.results import GroupResult
from specselect.core.status import RunStatus
from specselect.evidence.sweeps import DurationEstimate, ScenarioLoad, estimate_duration
from specselect.plan import LoadedPlan
from specselect.workloads.model import Workload

__all__ = ["is_sweep", "remaining_budget"]


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

    Every group still to run starts `launches` servers; the baseline, whose first launch just ran, the rest of its
    own (launches the sequential rule may add are not counted: they are not planned).
    """
    plan = loaded.plan
    rate = _per_stream_rate(baseline) if baseline.run_status == RunStatus.COMPLETED else None
    if rate is None or rate <= 0:
        return None
    todo = [
        cand
        for cand in plan.groups
        if cand.name not in done
        and (cand.is_baseline or ((result := adm.result(cand.name)) is not None and result.admitted))
    ]
    launches = plan.run.launches
    lives = [(cand.name, j) for cand in todo for j in range(launches)]
    lives += [(baseline.group, j) for j in range(1 + len(baseline.relaunches), launches)]
    scenarios = [
        ScenarioLoad(
            name=f"{group}/{name}-c{level}" + (f"/launch{j + 1}" if launches > 1 else ""),
            concurrency=level,
            n_requests=plan.run.warmup_requests + plan.run.repeats * len(workload.items),
            max_tokens=plan.sampling.max_tokens,
        )
        for group, j in lives
        for name, workload in workloads.items()
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
