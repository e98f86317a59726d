"""`handoff.json` from the evidence: only completed + comparable candidates, per scenario, with their track, the
answer for the plan's traffic mix, and the flags that start each measured configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specselect._artifacts.handoff.advice import BatchSchedule, concurrency_advice, length_advice
from specselect._artifacts.handoff.mix import NO_TRAFFIC_NOTE, Cutoff, MixInputs, ServeWith, mix_advice
from specselect._core.status import Decision, EvidenceStatus, RunStatus
from specselect._evidence.acceptance import acceptance_spread
from specselect._evidence.pipeline.inputs import RecordSource, ScenarioKey, group_track
from specselect._evidence.pipeline.rules import RULE, TRACK_RULE
from specselect._plan import Plan, SamplingConfig
from specselect._plan.rules import BASELINE_GROUP
from specselect.records.evidence.mix import MixPolicy
from specselect.records.evidence.result import ScenarioEvidence
from specselect.records.evidence.rounds import estimand_statement
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.group import GroupResult
from specselect.records.handoff import (
    Handoff,
    HandoffCandidate,
    HandoffControl,
    HandoffGroup,
    HandoffMix,
    HandoffScenario,
    HandoffTrack,
)
from specselect.records.results import EvidenceFile

__all__ = ["HandoffInputs", "build_handoff", "sampling_note"]


@dataclass(frozen=True)
class HandoffInputs:
    """What the hand-off is built from besides the evidence and the groups."""

    label: str
    plan: Plan
    plan_hash: str
    plan_source: str
    records: RecordSource
    """The run's records: the acceptance spread per candidate and scenario is read from them."""
    schedule: BatchSchedule
    """The measured engine's per-batch-size setting for a schedule (`Engine.batch_schedule`)."""
    serve: ServeWith
    """A group's serve flags, a schedule written in (`Engine.serve_flags`)."""
    cutoff: Cutoff
    """A group's schedule that stops speculating above a concurrency level."""


def _handoff_candidate(
    entry: ScenarioEvidence, group: GroupResult, inputs: HandoffInputs, policy: BootstrapPolicy
) -> HandoffCandidate:
    interval = entry.decision.confidence.interval
    scenario_run = next((s for s in group.scenarios if s.scenario == entry.scenario), None)
    return HandoffCandidate(
        candidate=entry.candidate,
        family=entry.family,
        method=group.method,
        decision=entry.decision.decision.value,
        reason=entry.decision.reason,
        confidence=entry.decision.confidence.status,
        throughput_speedup=entry.evidence.throughput_speedup,
        speedup_low=interval.low if interval else None,
        speedup_high=interval.high if interval else None,
        ttft_ratio=entry.evidence.ttft_ratio,
        e2e_p95_ratio=entry.evidence.e2e_p95_ratio,
        peak_memory_mb=entry.evidence.candidate_peak_memory_mb,
        parity=entry.parity.verdict.value if entry.parity else None,
        acceptance_rate=entry.telemetry.acceptance_rate if entry.telemetry else None,
        mean_acceptance_length=entry.telemetry.mean_acceptance_length if entry.telemetry else None,
        telemetry_source=entry.telemetry.source if entry.telemetry else None,
        speculative_config=group.launch.speculative_config if group.launch else None,
        proposer_snapshot=group.proposer_snapshot if scenario_run is not None else None,
        track=entry.track,
        acceptance_spread=acceptance_spread(inputs.records.timed(group.group, entry.scenario), policy),
        prompts=entry.speedup.n_items if entry.speedup else None,
        prompts_needed=entry.speedup.prompts_needed if entry.speedup else None,
        prompts_verdict=entry.speedup.prompts_verdict if entry.speedup else None,
        lossy=entry.evidence.lossy,
    )


def _handoff_tracks(groups: Sequence[GroupResult], default_ref: str) -> tuple[HandoffTrack, ...]:
    out: list[HandoffTrack] = []
    for base in (g for g in groups if g.role == "baseline"):
        out.append(
            HandoffTrack(
                name=base.group,
                target_ref=base.target_ref or (default_ref if base.group == BASELINE_GROUP else None),
                target_snapshot=base.target_snapshot,
                engine_version=base.engine_version,
                baseline_status=base.run_status.value,
                candidates=tuple(g.group for g in groups if g.role == "candidate" and group_track(g) == base.group),
            )
        )
    return tuple(out)


def _handoff_groups(groups: Sequence[GroupResult], serve: ServeWith) -> tuple[HandoffGroup, ...]:
    return tuple(
        HandoffGroup(
            group=g.group,
            role=g.role,
            family=g.family,
            run_status=g.run_status.value,
            serve=serve(g.group, None)[0],
            startup_s=g.launch.startup_s if g.launch is not None else None,
            derived_schedule=g.derived_schedule,
        )
        for g in groups
        if g.run_status == RunStatus.COMPLETED
    )


def _baseline_seconds(baseline: GroupResult) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for run in baseline.scenarios:
        mean = run.summary.e2e_ms.mean if run.summary is not None else None
        if run.status == "completed" and mean is not None and mean > 0:
            out[(run.workload, run.concurrency)] = mean / 1000.0
    return out


def _mix(
    evidence: EvidenceFile, groups: Sequence[GroupResult], baseline: GroupResult, inputs: HandoffInputs
) -> HandoffMix | None:
    traffic = inputs.plan.traffic
    if traffic is None:
        return None
    mix_inputs = MixInputs(
        traffic,
        inputs.plan.run.concurrency,
        evidence,
        _baseline_seconds(baseline),
        MixPolicy(level=evidence.policy.bootstrap.level, seed=evidence.policy.bootstrap.seed),
    )
    # Only the default track's candidates: the time weights are its baseline's.
    candidates = {
        g.group: g.family
        for g in groups
        if g.role == "candidate" and g.run_status == RunStatus.COMPLETED and group_track(g) == baseline.group
    }
    return mix_advice(mix_inputs, candidates, serve=inputs.serve, cutoff=inputs.cutoff, baseline=baseline.group)


def _scenario(
    key: ScenarioKey, evidence: EvidenceFile, by_name: Mapping[str, GroupResult], inputs: HandoffInputs
) -> HandoffScenario:
    chosen: list[HandoffCandidate] = []
    for entry in evidence.entries:
        group = by_name[entry.candidate]
        if entry.scenario != key.name or group.run_status != RunStatus.COMPLETED:
            continue
        if entry.evidence.evidence_status != EvidenceStatus.COMPARABLE:
            continue
        chosen.append(_handoff_candidate(entry, group, inputs, evidence.policy.bootstrap))
    accepted = [c for c in chosen if c.decision == Decision.ACCEPT.value]
    best = max(accepted, key=lambda c: (c.speedup_low or 0.0, c.throughput_speedup or 0.0), default=None)
    base = by_name.get(BASELINE_GROUP)
    run = next((s for s in base.scenarios if s.scenario == key.name), None) if base is not None else None
    mean = run.summary.e2e_ms.mean if run is not None and run.summary is not None else None
    return HandoffScenario(
        scenario=key.name,
        workload=key.workload,
        concurrency=key.concurrency,
        temperature=key.temperature,
        candidates=tuple(chosen),
        recommended=best.candidate if best else None,
        workload_key=run.workload_identity.key if run is not None else None,
        baseline_seconds=mean / 1000.0 if mean else None,
    )


def sampling_note(sampling: SamplingConfig) -> str:
    """Which sampling the decisions hold for: acceptance, and so the speedup, changes with the temperature."""
    greedy = "temperature 0 (greedy), where every output must equal the baseline's"
    falls = "acceptance, and so the speedup, falls as the temperature rises"
    if not sampling.sampled:
        return (
            f"Measured at {greedy}: the decisions hold for greedy decoding; at a temperature above 0 acceptance "
            "falls, so measure at the deployment's."
        )
    top_k = f"top-k {sampling.top_k}" if sampling.top_k else "top-k off"
    sent = "sent in every request" if sampling.in_request else "left to each server's generation defaults"
    above = [t for t in sampling.temperatures if t > 0]
    tested = (
        f"temperature {' and '.join(f'{t:g}' for t in above)} (top-p {sampling.top_p:g}, {top_k}; {sent}), where "
        "outputs were tested against the baseline's distribution"
    )
    if len(sampling.temperatures) == 1:
        return f"Measured at {tested}: the decisions hold at that temperature only; {falls}."
    both = f"{greedy}, and at {tested}" if sampling.greedy else tested
    return f"Measured at {both}: each scenario's decision holds at its own temperature only; {falls}."


def build_handoff(
    evidence: EvidenceFile,
    groups: Sequence[GroupResult],
    scenarios: Sequence[ScenarioKey],
    inputs: HandoffInputs,
) -> Handoff:
    """Only completed + comparable candidates, per scenario, with the rule; recommends the safest accept.

    Candidates of every track are listed with their track; the recommendation compares within-pair speedup
    bounds only (never raw latencies), which the track rule allows across tracks. With [traffic], one answer for
    the mix (the default track's candidates); every completed group's serve flags.
    """
    by_name = {g.group: g for g in groups}
    baselines = [g for g in groups if g.role == "baseline"]
    baseline = next((g for g in baselines if g.group == BASELINE_GROUP), baselines[0])
    plan: dict[str, Any] = inputs.plan.model_dump(mode="json")
    mix = _mix(evidence, groups, baseline, inputs)
    return Handoff(
        label=inputs.label,
        plan_hash=inputs.plan_hash,
        engine_kind=inputs.plan.engine.kind,
        engine_version=baseline.engine_version,
        target_ref=inputs.plan.target.model,
        target_snapshot=baseline.target_snapshot,
        rule=RULE,
        scenarios=tuple(_scenario(key, evidence, by_name, inputs) for key in scenarios),
        tracks=_handoff_tracks(groups, inputs.plan.target.model),
        track_rule=TRACK_RULE,
        concurrency_limits=concurrency_advice(evidence.sweeps, groups, schedule=inputs.schedule),
        proposal_lengths=length_advice(evidence.sweeps),
        sampling=sampling_note(inputs.plan.sampling),
        estimand=evidence.policy.estimand,
        estimand_statement=estimand_statement(evidence.policy.estimand),
        rounds=inputs.plan.run.rounds,
        looks=inputs.plan.run.look_rounds,
        controls=tuple(_control(entry) for entry in evidence.controls),
        capacity=evidence.capacity,
        mix=mix,
        mix_note=None if mix is not None else NO_TRAFFIC_NOTE,
        groups=_handoff_groups(groups, inputs.serve),
        plan=plan,
        plan_source=inputs.plan_source,
    )


def _control(entry: ScenarioEvidence) -> HandoffControl:
    est = entry.speedup
    low, high = (est.low, est.high) if est is not None else (None, None)
    parity = entry.parity
    return HandoffControl(
        control=entry.candidate,
        track=entry.track,
        scenario=entry.scenario,
        speedup=est.point if est is not None else None,
        speedup_low=low,
        speedup_high=high,
        level=est.level if est is not None and low is not None else None,
        contains_one=None if low is None or high is None else low <= 1.0 <= high,
        decision=entry.decision.decision.value,
        reason=entry.decision.reason,
        outputs_agree=None if parity is None or parity.n_compared == 0 else parity.n_equal == parity.n_compared,
    )
