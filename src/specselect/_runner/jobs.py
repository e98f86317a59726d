"""The job of each group: its track and target, whether it runs at all, and how much parity pass it needs."""

from __future__ import annotations

from collections.abc import Mapping

from specselect._admission import Admissions
from specselect._core.status import RunStatus
from specselect._plan import Candidate, LoadedPlan
from specselect._runner.group import GroupJob, ParityMode
from specselect._runner.paritypass import baseline_parity_pass, parity_pass_enabled
from specselect.records.group import GroupResult

__all__ = ["NO_RUNNABLE_ON_TRACK", "build_job", "completed_scenarios"]

NO_RUNNABLE_ON_TRACK = "no_runnable_candidate_on_track"
"""Reason of a track's baseline that is skipped because none of its candidates was admitted."""


def completed_scenarios(base: GroupResult | None) -> frozenset[str]:
    """The scenarios a completed baseline measured (its timed outputs are the parity pass's reference)."""
    if base is None or base.run_status != RunStatus.COMPLETED:
        return frozenset()
    return frozenset(s.scenario for s in base.scenarios if s.status == "completed")


def build_job(
    loaded: LoadedPlan,
    cand: Candidate,
    *,
    adm: Admissions,
    done: Mapping[str, GroupResult] | None = None,
) -> GroupJob:
    """A group's job on its own track; a track baseline none of whose candidates may run is skipped.

    The parity pass covers, for a candidate, the items whose timed outputs differ from its (already measured)
    baseline's, found in `done`; a baseline with an admitted candidate covers every item with parity_pass = 'full'.
    At every temperature above 0, every group that is compared draws the distribution test's samples.
    """
    track = loaded.plan.track_of(cand.name)
    runnable = [r for r in map(adm.result, track.members) if r is not None and r.admitted]
    skip = NO_RUNNABLE_ON_TRACK if cand.runs_target_only and not track.is_default and not runnable else None
    parity: ParityMode = "off"
    reference: frozenset[str] = frozenset()
    if cand.is_baseline:
        parity = "full" if runnable and baseline_parity_pass(loaded) else "off"
    elif parity_pass_enabled(loaded):
        reference = completed_scenarios((done or {}).get(track.name))
        parity = "divergent" if reference else "off"
    return GroupJob(
        candidate=cand,
        admission=adm.result(cand.name),
        gathered=adm.gathered.get(cand.name),
        track=track.name,
        target_config=track.target,
        skip_reason=skip,
        parity=parity,
        samples=loaded.plan.sampling.sampled and (bool(runnable) or not cand.is_baseline),
        reference_scenarios=reference,
    )
