"""The run's hand-off: the evidence and the groups, plus what only the run knows -- the records (acceptance
spread), the engine (serve flags, its batch-size schedule) and each group's track and admission."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specselect.artifacts.handoff.build import HandoffInputs, build_handoff
from specselect.artifacts.results import EvidenceFile, GroupResult, Handoff
from specselect.engines.base import ServeFlags
from specselect.evidence.pipeline import ScenarioKey
from specselect.evidence.sweeps import capped_schedule, cutoff_schedule
from specselect.records.proposals import ScheduleRange
from specselect.runner.context import RunContext

__all__ = ["run_handoff"]


class _Groups:
    """Serve flags and schedules of the run's groups, through the engine."""

    def __init__(self, run: RunContext, groups: Sequence[GroupResult]) -> None:
        self.run = run
        self.by_name: Mapping[str, GroupResult] = {g.group: g for g in groups}

    def setting(self, ranges: Sequence[ScheduleRange] | None) -> Mapping[str, Any] | None:
        return self.run.engine.batch_schedule(ranges, self.run.setup) if ranges else None

    def serve(self, name: str, ranges: Sequence[ScheduleRange] | None) -> tuple[ServeFlags | None, bool]:
        """The group's flags with `ranges` (default: the schedule it ran) written in, and whether they were."""
        group = self.by_name[name]
        if ranges is None and group.derived_schedule is not None:
            ranges = group.derived_schedule.ranges
        setting = self.setting(ranges)
        ctx = self.run.group_context(self.run.loaded.plan.group(name))
        flags = self.run.engine.serve_flags(
            ctx,
            self.run.gathered.get(name),
            disable_prefix_caching=self.run.loaded.plan.run.prefix_cache == "disabled",
            extra_speculative=setting,
        )
        return flags, setting is not None

    def cutoff(self, name: str, level: int) -> Sequence[ScheduleRange] | None:
        """The group's schedule with speculation off above `level` (a static length: k up to `level`)."""
        group = self.by_name[name]
        if group.derived_schedule is not None:
            return capped_schedule(group.derived_schedule.ranges, level)
        k = group.proposal_length
        return cutoff_schedule(k, level) if k else None


def run_handoff(
    run: RunContext, evidence: EvidenceFile, groups: Sequence[GroupResult], scenarios: Sequence[ScenarioKey], label: str
) -> Handoff:
    """`handoff.json` of a run whose groups all reached a final state."""
    known = _Groups(run, groups)
    inputs = HandoffInputs(
        label=label,
        plan=run.loaded.plan,
        plan_hash=run.loaded.plan_hash,
        plan_source=run.loaded.source,
        records=run.records,
        schedule=known.setting,
        serve=known.serve,
        cutoff=known.cutoff,
    )
    return build_handoff(evidence, groups, scenarios, inputs)
