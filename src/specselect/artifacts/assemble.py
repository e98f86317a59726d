"""Turn group results and raw records into `evidence.json` and `handoff.json` (pure: documents in, documents out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specselect.artifacts.layout import scenario_name
from specselect.artifacts.results import (
    EvidenceFile,
    EvidencePolicy,
    GroupResult,
    Handoff,
    HandoffCandidate,
    HandoffScenario,
    ScenarioEvidence,
    ScenarioRun,
)
from specselect.core.decision import DecisionResult, Thresholds, decide, summarize_verdict
from specselect.core.evidence import SideMetrics, build_pair_evidence
from specselect.core.status import Decision, EvidenceStatus, RunStatus
from specselect.evidence.categories import category_breakdown
from specselect.evidence.parity import Output, ScenarioParity, scenario_parity
from specselect.evidence.prediction import predict_speedup
from specselect.evidence.samples import RequestKey, pair_requests, samples_from_records
from specselect.evidence.stats import BootstrapPolicy, PairedStats, paired_stats
from specselect.measure.types import RequestRecord

__all__ = ["RULE", "ScenarioKey", "assemble_evidence", "build_handoff", "outputs_for_parity"]

RULE = (
    "contract s5: evidence not comparable/incomplete -> not_evaluated; incomplete -> tune; quality (exact output "
    "parity at temperature 0) failed -> reject; throughput_speedup >= min AND ttft_ratio <= max AND "
    "e2e_p95_ratio <= max AND peak memory <= budget -> accept, else tune; an accept whose speedup interval "
    "reaches below the minimum -> tune (insufficient_confidence)"
)

RecordsLoader = Callable[[str, str], Sequence[RequestRecord]]
"""(group, scenario) -> that scenario's raw records (warm-up included)."""


@dataclass(frozen=True)
class ScenarioKey:
    """A scenario of the plan: workload name x concurrency."""

    workload: str
    concurrency: int

    @property
    def name(self) -> str:
        return scenario_name(self.workload, self.concurrency)


def _has_token_ids(records: Sequence[RequestRecord]) -> bool:
    measured = [r for r in records if not r.warmup and r.ok]
    return bool(measured) and all(r.output_token_ids is not None for r in measured)


def outputs_for_parity(records: Sequence[RequestRecord], *, tokens: bool) -> dict[RequestKey, Output]:
    """Outputs keyed by (item_id, repeat) -- token ids or texts; a failed request maps to None."""
    out: dict[RequestKey, Output] = {}
    for rec in records:
        key = (rec.item_id, rec.repeat)
        if rec.warmup or key in out:
            continue
        if not rec.ok:
            out[key] = None
        else:
            out[key] = list(rec.output_token_ids or []) if tokens else rec.output_text
    return out


def _scenario(group: GroupResult | None, scenario: str) -> ScenarioRun | None:
    if group is None:
        return None
    return next((s for s in group.scenarios if s.scenario == scenario), None)


def _side(group: GroupResult | None, run: ScenarioRun | None, *, role: str, quality_ok: bool | None) -> SideMetrics:
    status = group.run_status if group is not None else RunStatus.SKIPPED
    if (
        group is not None
        and group.run_status == RunStatus.COMPLETED
        and (run is None or run.status != "completed" or run.summary is None or run.summary.n_error > 0)
    ):
        # A scenario that did not finish cleanly is not a completed measurement of that scenario.
        status = RunStatus.FAILED
    summary = run.summary if run is not None else None
    telemetry = run.telemetry if run is not None else None
    active: bool | None = None
    if role == "candidate" and telemetry is not None and telemetry.source != "not_exported":
        active = bool((telemetry.drafts or 0) > 0 or (telemetry.draft_tokens or 0) > 0)
    return SideMetrics.model_validate(
        {
            "role": role,
            "run_status": status,
            "target_snapshot": group.target_snapshot if group else None,
            "workload_key": run.workload_identity.key if run else None,
            "sampling_key": summary.sampling_key if summary else None,
            "execution_path": group.execution_path if group else None,
            "throughput_tokens_per_s": summary.output_throughput_tok_s if summary else None,
            "ttft_p95_ms": summary.ttft_ms.p95 if summary else None,
            "e2e_p95_ms": summary.e2e_ms.p95 if summary else None,
            "peak_memory_mb": run.peak_memory.mb if run and run.peak_memory else None,
            "quality_ok": quality_ok,
            "mechanism_active": active,
        }
    )


def _evaluate(
    base_group: GroupResult,
    cand_group: GroupResult,
    key: ScenarioKey,
    *,
    load_records: RecordsLoader,
    categories: Mapping[str, str | None],
    thresholds: Thresholds,
    bootstrap: BootstrapPolicy,
) -> tuple[ScenarioEvidence, bool]:
    base_run = _scenario(base_group, key.name)
    cand_run = _scenario(cand_group, key.name)
    parity: ScenarioParity | None = None
    stats: PairedStats | None = None
    used_tokens = False
    prediction = None
    breakdown = None
    both = (
        base_run is not None
        and cand_run is not None
        and base_run.status == "completed"
        and cand_run.status == "completed"
        and base_group.run_status == RunStatus.COMPLETED
        and cand_group.run_status == RunStatus.COMPLETED
    )
    if both:
        base_records = load_records(base_group.group, key.name)
        cand_records = load_records(cand_group.group, key.name)
        # Token ids when both sides have them (exact), otherwise characters (stated in the policy).
        used_tokens = _has_token_ids(base_records) and _has_token_ids(cand_records)
        base_out = outputs_for_parity(base_records, tokens=used_tokens)
        cand_out = outputs_for_parity(cand_records, tokens=used_tokens)
        parity = scenario_parity(base_out, cand_out)
        pairing = pair_requests(
            samples_from_records(base_records, categories), samples_from_records(cand_records, categories)
        )
        stats = paired_stats(pairing.pairs, bootstrap)
        telemetry = cand_run.telemetry if cand_run else None
        prediction = predict_speedup(
            pairing.pairs,
            telemetry.per_position_rates if telemetry else None,
            num_drafts=telemetry.drafts if telemetry else None,
        )
        if any(categories.values()):
            breakdown = category_breakdown(pairing.pairs, categories=categories, policy=bootstrap)
    baseline = _side(base_group, base_run, role="baseline", quality_ok=True if both else None)
    candidate = _side(cand_group, cand_run, role="candidate", quality_ok=parity.quality_ok if parity else None)
    evidence = build_pair_evidence(baseline, candidate)
    decision: DecisionResult = decide(evidence, thresholds, stats.speedup_interval if stats else None)
    return (
        ScenarioEvidence(
            candidate=cand_group.group,
            family=cand_group.family,
            scenario=key.name,
            workload=key.workload,
            concurrency=key.concurrency,
            track=base_group.group,
            evidence=evidence,
            decision=decision,
            parity=parity,
            stats=stats,
            telemetry=cand_run.telemetry if cand_run else None,
            prediction=prediction,
            categories=breakdown,
        ),
        used_tokens,
    )


def assemble_evidence(
    groups: Sequence[GroupResult],
    scenarios: Sequence[ScenarioKey],
    *,
    load_records: RecordsLoader,
    categories: Mapping[str, Mapping[str, str | None]],
    thresholds: Thresholds,
    bootstrap: BootstrapPolicy,
) -> EvidenceFile:
    """Paired evidence and a decision for every candidate x scenario, against the target-only baseline.

    `categories[workload][item_id]` gives per-item categories for the per-category breakdown.
    """
    baseline = next(g for g in groups if g.role == "baseline")
    entries: list[ScenarioEvidence] = []
    all_tokens = True
    for group in groups:
        if group.role != "candidate":
            continue
        for key in scenarios:
            entry, used_tokens = _evaluate(
                baseline,
                group,
                key,
                load_records=load_records,
                categories=categories.get(key.workload, {}),
                thresholds=thresholds,
                bootstrap=bootstrap,
            )
            all_tokens = all_tokens and (used_tokens or entry.parity is None)
            entries.append(entry)
    verdicts = {
        group.group: summarize_verdict({e.scenario: e.decision for e in entries if e.candidate == group.group})
        for group in groups
        if group.role == "candidate"
    }
    return EvidenceFile(
        policy=EvidencePolicy(
            thresholds=thresholds,
            bootstrap=bootstrap,
            parity_unit="tokens" if all_tokens else "characters",
            rule=RULE,
        ),
        entries=tuple(entries),
        verdicts=verdicts,
    )


def _handoff_candidate(entry: ScenarioEvidence, group: GroupResult) -> HandoffCandidate:
    interval = entry.decision.confidence.interval
    scenario_run = _scenario(group, entry.scenario)
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
    )


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
    """Only completed + comparable candidates, per scenario, with the rule; recommends the safest accept."""
    by_name = {g.group: g for g in groups}
    baseline = next(g for g in groups if g.role == "baseline")
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
    )
