"""`handoff.json` from the evidence: only completed + comparable candidates, per scenario, with their track."""

from __future__ import annotations

from collections.abc import Sequence

from specselect.artifacts.assemble import RULE, TRACK_RULE, ScenarioKey, group_track
from specselect.artifacts.handoff_sweeps import concurrency_advice, length_advice
from specselect.artifacts.results import (
    EvidenceFile,
    GroupResult,
    Handoff,
    HandoffCandidate,
    HandoffScenario,
    HandoffTrack,
    ScenarioEvidence,
)
from specselect.core.status import Decision, EvidenceStatus, RunStatus
from specselect.plan.rules import BASELINE_GROUP

__all__ = ["build_handoff"]


def _handoff_candidate(entry: ScenarioEvidence, group: GroupResult) -> HandoffCandidate:
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


def build_handoff(
    evidence: EvidenceFile,
    groups: Sequence[GroupResult],
    scenarios: Sequence[ScenarioKey],
    *,
    label: str,
    plan_hash: str,
    engine_kind: str,
    target_ref: str,
) -> Handoff:
    """Only completed + comparable candidates, per scenario, with the rule; recommends the safest accept.

    Candidates of every track are listed with their track; the recommendation compares within-pair speedup
    bounds only (never raw latencies), which the track rule allows across tracks.
    """
    by_name = {g.group: g for g in groups}
    baselines = [g for g in groups if g.role == "baseline"]
    baseline = next((g for g in baselines if g.group == BASELINE_GROUP), baselines[0])
    out: list[HandoffScenario] = []
    for key in scenarios:
        chosen: list[HandoffCandidate] = []
        for entry in evidence.entries:
            group = by_name[entry.candidate]
            if entry.scenario != key.name or group.run_status != RunStatus.COMPLETED:
                continue
            if entry.evidence.evidence_status != EvidenceStatus.COMPARABLE:
                continue
            chosen.append(_handoff_candidate(entry, group))
        accepted = [c for c in chosen if c.decision == Decision.ACCEPT.value]
        best = max(accepted, key=lambda c: (c.speedup_low or 0.0, c.throughput_speedup or 0.0), default=None)
        out.append(
            HandoffScenario(
                scenario=key.name,
                workload=key.workload,
                concurrency=key.concurrency,
                candidates=tuple(chosen),
                recommended=best.candidate if best else None,
            )
        )
    return Handoff(
        label=label,
        plan_hash=plan_hash,
        engine_kind=engine_kind,
        engine_version=baseline.engine_version,
        target_ref=target_ref,
        target_snapshot=baseline.target_snapshot,
        rule=RULE,
        scenarios=tuple(out),
        tracks=_handoff_tracks(groups, target_ref),
        track_rule=TRACK_RULE,
        concurrency_limits=concurrency_advice(
            evidence.sweeps, groups, engine_kind=engine_kind, engine_version=baseline.engine_version
        ),
        proposal_lengths=length_advice(evidence.sweeps),
    )
