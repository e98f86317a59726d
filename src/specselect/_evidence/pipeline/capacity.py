"""A candidate's KV-capacity cost against its baseline, and the plan's capacity gate on its decisions (pure).

A drafter's layers share the KV budget with the target's (vLLM sizes one cache for both), so a draft model
holds fewer tokens than the baseline, admits fewer requests at once and preempts sooner: peak memory, which
the engine reserves up front, does not show it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specselect._core.decision import DecisionResult
from specselect._core.status import Decision
from specselect._evidence.pipeline.inputs import MeasuredGroup, group_track
from specselect.records.capacity import LaunchCapacity, concurrency_for
from specselect.records.evidence.capacity import CapacityCost, CapacityPolicy

__all__ = ["CAPACITY_CHECK", "capacity_costs", "costs_by_candidate", "gate_decision"]

CAPACITY_CHECK = "kv_capacity"
"""The key of the capacity gate in a decision's checks."""


def _concurrency(capacity: LaunchCapacity | None, request_tokens: int | None) -> float | None:
    kv = capacity.kv if capacity is not None else None
    if kv is None or request_tokens is None:
        return None
    return round(concurrency_for(kv.tokens, request_tokens, blocks=kv.blocks, block_size=kv.block_size), 2)


def _request_tokens(policy: CapacityPolicy, *capacities: LaunchCapacity | None) -> int | None:
    if policy.request_tokens is not None:
        return policy.request_tokens
    longest = [c.longest_request_tokens for c in capacities if c is not None and c.longest_request_tokens]
    return max(longest) if longest else None


def _preemptions(group: MeasuredGroup) -> dict[str, int]:
    out: dict[str, int] = {}
    for run in group.all_scenario_runs():
        if run.kv_load is not None and run.kv_load.preemptions:
            out[run.scenario] = out.get(run.scenario, 0) + run.kv_load.preemptions
    return out


def _peaks(group: MeasuredGroup) -> dict[str, float]:
    out: dict[str, float] = {}
    for run in group.all_scenario_runs():
        if run.kv_load is not None and run.kv_load.peak_usage is not None:
            out[run.scenario] = max(out.get(run.scenario, 0.0), run.kv_load.peak_usage)
    return out


def _verdict(cost: CapacityCost, policy: CapacityPolicy) -> CapacityCost:
    if not policy.gates:
        return cost
    need, limit = policy.required_concurrency, policy.max_kv_loss
    if cost.candidate_tokens is None or (need is not None and cost.candidate_concurrency is None):
        what = "no KV-cache size was reported" if cost.candidate_tokens is None else "no request length is known"
        return cost.model_copy(update={"passed": None, "reason": "kv_capacity_unknown", "detail": f"{what}"})
    if need is not None and cost.candidate_concurrency is not None and cost.candidate_concurrency < need:
        detail = (
            f"holds {cost.candidate_concurrency:g} concurrent requests of {cost.request_tokens:,} tokens "
            f"({cost.candidate_tokens:,} KV tokens); the plan requires {need}"
        )
        return cost.model_copy(update={"passed": False, "reason": "kv_capacity_short", "detail": detail})
    if limit is not None and cost.loss_share is not None and cost.loss_share > limit:
        detail = (
            f"gives up {cost.loss_share:.1%} of the baseline's KV cache ({cost.tokens_lost:,} of "
            f"{cost.baseline_tokens:,} tokens); the plan allows {limit:.1%}"
        )
        return cost.model_copy(update={"passed": False, "reason": "kv_capacity_loss", "detail": detail})
    return cost.model_copy(update={"passed": True})


def _cost(base: MeasuredGroup, cand: MeasuredGroup, policy: CapacityPolicy) -> CapacityCost:
    length = _request_tokens(policy, base.capacity, cand.capacity)
    base_kv = base.capacity.kv if base.capacity is not None else None
    cand_kv = cand.capacity.kv if cand.capacity is not None else None
    lost = base_kv.tokens - cand_kv.tokens if base_kv is not None and cand_kv is not None else None
    cost = CapacityCost(
        candidate=cand.group,
        baseline=base.group,
        baseline_tokens=base_kv.tokens if base_kv is not None else None,
        candidate_tokens=cand_kv.tokens if cand_kv is not None else None,
        tokens_lost=lost,
        loss_share=lost / base_kv.tokens if lost is not None and base_kv is not None and base_kv.tokens else None,
        request_tokens=length,
        baseline_concurrency=_concurrency(base.capacity, length),
        candidate_concurrency=_concurrency(cand.capacity, length),
        preemptions=_preemptions(cand),
        baseline_preemptions=_preemptions(base),
        peak_kv_usage=_peaks(cand),
    )
    return _verdict(cost, policy)


def capacity_costs(groups: Sequence[MeasuredGroup], policy: CapacityPolicy) -> tuple[CapacityCost, ...]:
    """Every candidate that ran, against its track's baseline (none when no group reported a KV capacity)."""
    if not any(g.capacity is not None and g.capacity.kv is not None for g in groups):
        return ()
    baselines = {g.group: g for g in groups if g.role == "baseline"}
    out = []
    for group in groups:
        base = baselines.get(group_track(group))
        if group.role == "candidate" and base is not None and group.capacity is not None:
            out.append(_cost(base, group, policy))
    return tuple(out)


def gate_decision(decision: DecisionResult, cost: CapacityCost | None) -> DecisionResult:
    """A decision with the capacity gate applied: a failed gate rejects, an unknown capacity keeps an accept back
    (tune); the check is recorded either way. Decisions the gate does not judge are returned as they were."""
    if cost is None or (cost.passed is None and cost.reason is None):
        return decision
    checks = {**decision.checks, CAPACITY_CHECK: cost.passed}
    if cost.passed:
        return decision.model_copy(update={"checks": checks})
    if cost.passed is False and decision.decision is not Decision.NOT_EVALUATED:
        detail = f"{CAPACITY_CHECK}: {cost.detail}"
        failed = (*decision.failed_checks, CAPACITY_CHECK)
        return decision.model_copy(
            update={
                "decision": Decision.REJECT,
                "reason": str(cost.reason),
                "checks": checks,
                "failed_checks": failed,
                "detail": f"{detail}; {decision.detail}" if decision.detail else detail,
            }
        )
    if decision.decision is Decision.ACCEPT:
        detail = f"{CAPACITY_CHECK}: {cost.detail}: the plan's capacity gate cannot be judged"
        return decision.model_copy(
            update={"decision": Decision.TUNE, "reason": str(cost.reason), "checks": checks, "detail": detail}
        )
    return decision.model_copy(update={"checks": checks})


def costs_by_candidate(costs: Sequence[CapacityCost]) -> Mapping[str, CapacityCost]:
    """Candidate -> its cost."""
    return {c.candidate: c for c in costs}
