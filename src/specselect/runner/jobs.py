"""The job of each group: its track and target, whether it runs at all, and how much parity pass it needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from specselect.artifacts.assemble import outputs_for_parity
from specselect.artifacts.layout import RunLayout
from specselect.artifacts.results import GroupResult
from specselect.artifacts.store import load_records
from specselect.core.status import RunStatus
from specselect.evidence.parity import Output
from specselect.evidence.samples import RequestKey
from specselect.plan import Candidate, LoadedPlan
from specselect.runner.admit import Admissions
from specselect.runner.group import GroupJob
from specselect.runner.paritypass import baseline_parity_pass, parity_pass_enabled
from specselect.runner.preflight import Preflight

__all__ = ["NO_RUNNABLE_ON_TRACK", "build_job", "timed_outputs"]

NO_RUNNABLE_ON_TRACK = "no_runnable_candidate_on_track"
"""Reason of a track's baseline that is skipped because none of its candidates was admitted."""


def timed_outputs(layout: RunLayout, base: GroupResult) -> dict[str, dict[RequestKey, Output]]:
    """A completed baseline's timed outputs per scenario (token ids when it has them); empty otherwise."""
    out: dict[str, dict[RequestKey, Output]] = {}
    if base.run_status != RunStatus.COMPLETED:
        return out
    for scen in base.scenarios:
        if scen.status != "completed":
            continue
        recs = load_records(layout, base.group, scen.scenario)
        tokens = all(r.output_token_ids is not None for r in recs if r.ok and not r.warmup)
        out[scen.scenario] = outputs_for_parity(recs, tokens=tokens)
    return out


def build_job(
    loaded: LoadedPlan,
    layout: RunLayout,
    cand: Candidate,
    *,
    pre: Preflight,
    adm: Admissions,
    done: Mapping[str, GroupResult] | None = None,
) -> GroupJob:
    """A group's job on its own track; a track baseline none of whose candidates may run is skipped.

    The parity pass covers, for a candidate, the items whose timed outputs differ from its (already measured)
    baseline's, found in `done`; a baseline with an admitted candidate covers every item with parity_pass = 'full'.
    """
    track = loaded.plan.track_of(cand.name)
    runnable = [r for r in map(adm.result, track.members) if r is not None and r.admitted]
    skip = NO_RUNNABLE_ON_TRACK if cand.is_baseline and not track.is_default and not runnable else None
    parity: Literal["full", "divergent", "off"] = "off"
    reference: dict[str, dict[RequestKey, Output]] = {}
    if cand.is_baseline:
        parity = "full" if runnable and baseline_parity_pass(loaded) else "off"
    elif parity_pass_enabled(loaded):
        base = (done or {}).get(track.name)
        reference = timed_outputs(layout, base) if base is not None else {}
        parity = "divergent" if reference else "off"
    return GroupJob(
        candidate=cand,
        admission=adm.result(cand.name),
        gathered=adm.gathered.get(cand.name),
        track=track.name,
        target_config=track.target,
        endpoint=pre.endpoints.get(cand.name),
        skip_reason=skip,
        parity=parity,
        parity_reference=reference,
    )
