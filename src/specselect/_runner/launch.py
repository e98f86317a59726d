"""A group's launch in a round, wherever it runs (here, or on a cluster node): its job built from the groups that
ran before it, then served and measured."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from specselect._admission import Admissions
from specselect._core.status import RunStatus
from specselect._plan import Candidate
from specselect._runner.context import RunContext
from specselect._runner.group import relaunch_group, run_group
from specselect._runner.jobs import build_job
from specselect._runner.manifest import ManifestWriter, Status
from specselect._runner.preflight import Preflight
from specselect._runner.schedule_candidate import DerivationInputs, schedule_job, with_schedule
from specselect.records.group import GroupResult

__all__ = ["RunGroups", "launch_group"]


def launch_group(
    run: RunContext,
    adm: Admissions,
    derivation: DerivationInputs,
    groups: Mapping[str, GroupResult],
    cand: Candidate,
    index: int,
) -> GroupResult:
    """Launch `index` of `cand` (its first when 0) and the group with it.

    The first launch reads the groups before it (its track baseline's outputs for the parity pass, a sweep's
    first round for a derived schedule). A later launch runs only for a group whose first launch completed and
    that has no launch `index` yet; otherwise the group comes back unchanged. `GroupInterrupted` passes through.
    """
    if index == 0:
        job = schedule_job(build_job(run.loaded, cand, adm=adm, done=groups), run, groups, derivation)
        return run_group(job, run, run.targets.get(job.track))
    group = groups[cand.name]
    if group.run_status != RunStatus.COMPLETED or len(group.relaunches) >= index:
        return group
    job = build_job(run.loaded, cand, adm=adm, done=groups)
    if group.derived_schedule is not None:
        job = with_schedule(job, run, group.derived_schedule)
    return relaunch_group(job, run, run.targets.get(job.track), group, index)


@dataclass
class RunGroups:
    """A run's groups as they are measured: what their jobs are built from, and each group saved (its summary
    and the manifest) whenever it changes."""

    run: RunContext
    adm: Admissions
    derivation: DerivationInputs
    writer: ManifestWriter
    pre: Preflight
    results: dict[str, GroupResult] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    """Groups taken from an earlier run by --resume."""
    before_look: Callable[[], None] = lambda: None
    """Runs before each look reads the groups (a cluster run reads its records back first)."""

    def launch(self, cand: Candidate, index: int) -> GroupResult:
        """Launch `index` of `cand` here, from the groups so far (`launch_group`)."""
        return launch_group(self.run, self.adm, self.derivation, self.results, cand, index)

    def save(self, name: str, result: GroupResult, status: Status = "running") -> None:
        """Keep `result` as the group's record, on disk too."""
        self.results[name] = result
        self.writer.write(self.run.layout.group_summary(name), result)
        self.writer.update(self.pre, self.results, status)
