"""The sequential rule over a run's evidence: which pairs are settled and which candidates need another launch.

Launch-level only: a launch's server is stopped once it has measured its repeats, so "add repeats" cannot be done
in a running launch and the rule's budget of repeats is the plan's `repeats` (exhausted from the start); an
unsettled pair gets another launch of its candidate (and of its track's baseline) up to `max_launches`.
"""

from __future__ import annotations

from specselect.evidence.pipeline.result import Evidence, ScenarioEvidence
from specselect.evidence.sequential import (
    PairProgress,
    SequentialPlan,
    SequentialPolicy,
    decision_thresholds,
    plan_next,
    plan_of,
    progress_from_estimate,
)

__all__ = ["continuing_candidates", "evidence_plan"]


def _progress(entry: ScenarioEvidence, repeats: int) -> PairProgress | None:
    if entry.speedup is None or entry.decision.reason == "quality_failed":
        return None
    launches = max(1, len(entry.speedup.launches_candidate))
    progress = progress_from_estimate(
        f"{entry.candidate}/{entry.scenario}", entry.speedup, repeats=repeats, passes=repeats * launches
    )
    # An accept held back only by a latency interval is as undecided as a straddling speedup.
    return progress.model_copy(update={"unsettled_checks": entry.decision.confidence.unsettled_checks})


def evidence_plan(evidence: Evidence, policy: SequentialPolicy) -> SequentialPlan:
    """`plan_next` over every measured pair of `evidence`, against the thresholds its decision uses (the A/A
    band's edge included where its track has one). Pairs without a speedup estimate and rejected pairs (a
    quality failure is final) take no part."""
    floors = {(n.track, n.scenario): n.floor.noise_floor() for n in evidence.noise_floors}
    progress: list[PairProgress] = []
    thresholds: dict[str, tuple[float, ...]] = {}
    for entry in evidence.entries:
        one = _progress(entry, policy.max_repeats)
        if one is None:
            continue
        progress.append(one)
        floor = floors.get((entry.track, entry.scenario))
        thresholds[one.pair] = decision_thresholds(evidence.policy.thresholds, floor)
    # Each pair is judged against its own thresholds; plan_next takes one set, so plan pair by pair and join.
    plans = [plan_next([p], thresholds[p.pair], policy) for p in progress]
    return plan_of(tuple(step for plan in plans for step in plan.steps), policy)


def continuing_candidates(plan: SequentialPlan) -> tuple[str, ...]:
    """The candidates with a pair the plan continues (their name is the pair's part before '/'), in plan order."""
    names = [s.pair.split("/", 1)[0] for s in plan.steps if s.action in ("add_repeats", "add_launch")]
    return tuple(dict.fromkeys(names))
