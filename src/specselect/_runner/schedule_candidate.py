"""The schedule candidate of a sweep (`measure_schedule = true`): its schedule, derived just before it runs.

Its sub-candidates and their baseline have run their first round by then (plan order puts the schedule candidate
after them), so the evidence of those groups alone -- the same pipeline the conclusion runs, a length whose
checks all pass on that one round's items counting as paying (`_first_round`) -- gives each length's crossover
and the length choice per scenario; `evidence.sweeps.derive_schedule` turns them into batch-size ranges and the
engine writes them as its own setting (`Engine.batch_schedule`). A schedule that is off everywhere, or an engine
that cannot express one, leaves the candidate skipped with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from specselect._core.decision import NO_LAUNCH_REPLICATION
from specselect._core.status import Decision, RunStatus
from specselect._evidence.pipeline import EvidenceSettings, ScenarioKey, analyze_sweeps, build_evidence, sweep_point
from specselect._evidence.sweeps import compare_schedule, derive_schedule
from specselect._plan import Plan
from specselect._runner.context import RunContext
from specselect._runner.group import GroupJob
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.sweeps import DerivedSchedule, ScheduleComparison
from specselect.records.group import GroupResult

__all__ = [
    "NO_ENGINE_SCHEDULE",
    "NO_SCHEDULE",
    "DerivationInputs",
    "controller_candidates",
    "schedule_comparisons",
    "schedule_job",
    "schedule_members",
    "with_schedule",
]

NO_SCHEDULE = "no_derived_schedule"
"""Reason of a schedule candidate whose sweep found no level where a proposal length pays."""
NO_ENGINE_SCHEDULE = "engine_has_no_batch_schedule"
"""Reason of a schedule candidate on an engine that cannot express a per-batch-size schedule."""


def schedule_members(plan: Plan, parent: str) -> dict[str, int]:
    """Sub-candidate name -> proposal length, for the proposal-length sweep of entry `parent`."""
    return {
        c.name: c.num_speculative_tokens
        for c in plan.candidates
        if c.sweep is not None and c.sweep.parent == parent and c.num_speculative_tokens is not None
    }


@dataclasses.dataclass(frozen=True)
class DerivationInputs:
    """The conclusion's evidence policy and scenarios, which the derivation applies to the groups so far."""

    settings: EvidenceSettings
    scenarios: Sequence[ScenarioKey]


def _first_round(evidence: Evidence) -> Evidence:
    """The sweep's first round read as the derivation needs it: a length whose every check passed on round 1's
    items counts as paying there, though an accept must wait for more rounds (`no_launch_replication`). The
    schedule is a setting derived from that round; each of its own rounds is then measured like any candidate's."""
    entries = tuple(
        e.model_copy(update={"decision": e.decision.model_copy(update={"decision": Decision.ACCEPT})})
        if e.decision.reason == NO_LAUNCH_REPLICATION
        else e
        for e in evidence.entries
    )
    return evidence.model_copy(update={"entries": entries})


def _derive(
    run: RunContext, job: GroupJob, parent: str, done: Mapping[str, GroupResult], inputs: DerivationInputs
) -> DerivedSchedule:
    plan = run.loaded.plan
    members = schedule_members(plan, parent)
    groups = [done[name] for name in (job.track, *members) if name in done]
    evidence = _first_round(
        build_evidence(
            groups,
            inputs.scenarios,
            records=run.records,
            categories={name: {i.id: i.category for i in w.items} for name, w in run.workloads.items()},
            settings=inputs.settings,
        )
    )
    sweeps = analyze_sweeps(
        evidence,
        groups,
        sweeps={parent: tuple(members)},
        sweep_values={c.name: c.sweep.values for c in plan.candidates if c.sweep is not None and c.name in members},
        slo_ttft_ms=None,
        slo_tpot_ms=None,
        records=run.records,
    )
    return derive_schedule(
        parent,
        members,
        workloads=list(plan.workloads),
        levels=sorted(plan.run.concurrency),
        choices=[s.choice for s in sweeps.lengths if s.sweep == parent],
        crossovers=[c for c in sweeps.crossovers if c.candidate in members],
    )


def schedule_job(job: GroupJob, run: RunContext, done: Mapping[str, GroupResult], inputs: DerivationInputs) -> GroupJob:
    """A schedule candidate's job with its derived schedule in its options (or skipped, with the reason); any
    other job unchanged. `done` holds the groups that ran before it."""
    cand = job.candidate
    admitted = job.admission is not None and job.admission.run_status == RunStatus.RUNNABLE
    if cand.schedule_of is None or job.skip_reason is not None or not admitted:
        return job
    derived = _derive(run, job, cand.schedule_of, done, inputs)
    if derived.status != "derived":
        run.progress.warn(f"{cand.name}: not run: {derived.reason}")
        return dataclasses.replace(job, skip_reason=NO_SCHEDULE, schedule=derived)
    scheduled = with_schedule(job, run, derived)
    if scheduled.skip_reason is None:
        run.progress.info(f"{cand.name}: derived schedule {derived.reason}")
    return scheduled


def with_schedule(job: GroupJob, run: RunContext, derived: DerivedSchedule) -> GroupJob:
    """The job running `derived` through the engine's own per-batch-size setting (skipped when it has none).

    A later launch of a schedule candidate passes its first launch's schedule (`GroupResult.derived_schedule`):
    every launch of a group measures one configuration, derived once from the sweep's first launches.
    """
    setting = run.engine.batch_schedule(derived.ranges, run.group_context(job.candidate))
    if setting is None:
        return dataclasses.replace(job, skip_reason=NO_ENGINE_SCHEDULE, schedule=derived)
    options = {**job.candidate.options, **setting}
    return dataclasses.replace(job, candidate=job.candidate.model_copy(update={"options": options}), schedule=derived)


def controller_candidates(run: RunContext) -> dict[str, str]:
    """Candidates that turn on one of the engine's own runtime controllers (name -> controller), schedule
    candidates aside."""
    caps = run.setup.caps
    if caps is None:
        return {}
    return {
        c.name: ctl.name
        for c in run.loaded.plan.candidates
        if c.schedule_of is None
        for ctl in caps.runtime_controllers
        if ctl.option in c.options
    }


def schedule_comparisons(
    run: RunContext, evidence: Evidence, groups: Sequence[GroupResult]
) -> tuple[ScheduleComparison, ...]:
    """Every measured schedule next to its sweep's static settings, speculation off and the controllers."""
    if evidence.sweeps is None:
        return ()
    lengths = {g.group: g.proposal_length for g in groups}
    points = [p for e in evidence.entries if (p := sweep_point(e, lengths.get(e.candidate))) is not None]
    out: list[ScheduleComparison] = []
    for group in groups:
        schedule = group.derived_schedule
        if schedule is None or group.run_status != RunStatus.COMPLETED:
            continue
        out.append(
            compare_schedule(
                group.group,
                schedule,
                schedule_members(run.loaded.plan, schedule.sweep),
                points=points,
                choices=[s.choice for s in evidence.sweeps.lengths if s.sweep == schedule.sweep],
                controllers=controller_candidates(run),
            )
        )
    return tuple(out)
