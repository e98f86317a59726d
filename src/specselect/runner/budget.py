"""A sweep's time budget, stated before its candidates run: from the baseline's measured start-up and decode rate."""

from __future__ import annotations

from collections.abc import Mapping

from specselect.artifacts.results import GroupResult
from specselect.core.status import RunStatus
from specselect.evidence.sweep import DurationEstimate, ScenarioLoad, estimate_duration
from specselect.plan import LoadedPlan
from specselect.runner.admit import Admissions
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
) -> DurationEstimate | None:
    """The expected duration of the groups still to run, or None when the baseline gave nothing to go by."""
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
    scenarios = [
        ScenarioLoad(
            name=f"{cand.name}/{name}-c{level}",
            concurrency=level,
            n_requests=plan.run.warmup_requests + plan.run.repeats * len(workload.items),
            max_tokens=plan.sampling.max_tokens,
        )
        for cand in todo
        for name, workload in workloads.items()
        for level in plan.run.concurrency
    ]
    if not scenarios:
        return None
    launched = plan.engine.kind != "openai"
    startup = baseline.launch.startup_s if baseline.launch is not None and baseline.launch.startup_s else 0.0
    return estimate_duration(
        servers_to_start=len(todo) if launched else 0,
        startup_s=startup if launched else 0.0,
        scenarios=scenarios,
        tokens_per_s=rate,
    )
