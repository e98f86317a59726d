"""Turn group results and raw records into `evidence.json` (pure: documents in, documents out).

Every candidate is paired with the target-only baseline of its own track (`GroupResult.track`); the
optional logprob parity pass classifies output divergences; traffic other than specselect's on an
endpoint makes the pair `incomplete`. Each rule applied is written into the output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specselect.artifacts.layout import scenario_name
from specselect.artifacts.results import (
    EvidenceFile,
    EvidencePolicy,
    GroupResult,
    ParityPassPolicy,
    ScenarioEvidence,
    ScenarioRun,
)
from specselect.core.decision import DecisionResult, Thresholds, decide, summarize_verdict
from specselect.core.evidence import PairEvidence, SideMetrics, build_pair_evidence
from specselect.core.status import EvidenceStatus, RunStatus
from specselect.evidence.categories import category_breakdown
from specselect.evidence.parity import Output, ParityPolicy, ScenarioParity, scenario_parity
from specselect.evidence.prediction import predict_speedup
from specselect.evidence.samples import RequestKey, pair_requests, samples_from_records
from specselect.evidence.stats import BootstrapPolicy, PairedStats, paired_stats
from specselect.measure.types import RequestRecord
from specselect.plan.rules import BASELINE_GROUP

__all__ = [
    "CONTAMINATION_RULE",
    "MISSING_UNCONTAMINATED",
    "PARITY_PASS_RULE",
    "RULE",
    "TRACK_RULE",
    "ParityLoader",
    "ScenarioKey",
    "assemble_evidence",
    "group_track",
    "outputs_for_parity",
    "pass_logprobs",
]

RULE = (
    "contract s5: evidence not comparable/incomplete -> not_evaluated; incomplete -> tune; quality (exact output "
    "parity at temperature 0) failed -> reject; throughput_speedup >= min AND ttft_ratio <= max AND "
    "e2e_p95_ratio <= max AND peak memory <= budget -> accept, else tune; an accept whose speedup interval "
    "reaches below the minimum -> tune (insufficient_confidence)"
)

TRACK_RULE = (
    "contract s6: each candidate is paired with the target-only baseline of its own target (its track); raw "
    "throughput and latency are compared only within a track, across tracks only within-pair ratios"
)
PARITY_PASS_RULE = (
    "untimed pass (one request per item, concurrency 1, top-2 logprobs) by every candidate over the items whose "
    "timed output differs from the baseline's, and with parity_pass = 'full' also by the baseline over every "
    "item; a first divergence where the target's top-2 logprobs differ by less than the threshold is a near_tie "
    "(numerics: parity inconclusive, not failed), else a real_difference; a divergence in the timed records is "
    "judged with the baseline pass's logprobs when it ran, else the candidate pass's (both run the target on the "
    "same prefix up to it), where that pass produced the same tokens up to the divergence"
)
CONTAMINATION_RULE = (
    "endpoints specselect does not own: /metrics is scraped around an idle gap before and after each scenario; "
    "request/token counters moving while specselect sends nothing, or more finished requests than sent, mark "
    "the scenario contaminated; servers specselect starts: other processes taking more than "
    "thresholds.max_host_foreign_cpu_share of all CPU time during a scenario mark it contaminated (see "
    "measure.hostload); a contaminated scenario makes its pair incomplete (missing uncontaminated_measurement; "
    "decision tune, reason incomplete_evidence: measure again while nothing else uses the endpoint or the machine)"
)
MISSING_UNCONTAMINATED = "uncontaminated_measurement"

RecordsLoader = Callable[[str, str], Sequence[RequestRecord]]
"""(group, scenario) -> that scenario's raw records (warm-up included)."""
ParityLoader = Callable[[str, str], Sequence[RequestRecord] | None]
"""(group, workload) -> the records of that group's parity pass over the workload, or None (no pass)."""


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


def _top_values(rec: RequestRecord) -> list[list[float]] | None:
    if not rec.logprobs:
        return None
    return [[v for _, v in lp.top if v is not None] for lp in rec.logprobs]


def pass_logprobs(
    timed: Mapping[RequestKey, Output], parity_pass: Sequence[RequestRecord]
) -> dict[RequestKey, list[list[float]]]:
    """Top logprobs of one group's parity pass, per timed request of that group, up to the first position where
    the pass took another token than the timed output (beyond it the logprobs describe another continuation)."""
    by_item: dict[str, tuple[list[int], list[list[float]]]] = {}
    for rec in parity_pass:
        tops = _top_values(rec)
        if rec.ok and not rec.warmup and rec.output_token_ids is not None and tops is not None:
            by_item.setdefault(rec.item_id, (list(rec.output_token_ids), tops))
    out: dict[RequestKey, list[list[float]]] = {}
    for key, output in timed.items():
        if output is None or isinstance(output, str) or key[0] not in by_item:
            continue
        ids, tops = by_item[key[0]]
        same = next(
            (i for i, (a, b) in enumerate(zip(output, ids, strict=False)) if a != b), min(len(output), len(ids))
        )
        out[key] = tops[: same + 1]
    return out


def _parity_pass(
    base: Sequence[RequestRecord] | None, cand: Sequence[RequestRecord] | None, policy: ParityPolicy
) -> ScenarioParity | None:
    if not base or not cand:
        return None
    tokens = _has_token_ids(base) and _has_token_ids(cand)
    base_out = outputs_for_parity(base, tokens=tokens)
    lp = pass_logprobs(base_out, base) if tokens else None
    return scenario_parity(base_out, outputs_for_parity(cand, tokens=tokens), baseline_top_logprobs=lp, policy=policy)


def _side(group: GroupResult | None, run: ScenarioRun | None, *, role: str, quality_ok: bool | None) -> SideMetrics:
    status = group.run_status if group is not None else RunStatus.SKIPPED
    if group is not None and group.run_status == RunStatus.COMPLETED and run is not None and run.status == "skipped":
        status = RunStatus.SKIPPED  # not measured on purpose (an early stop), which is not a failure
    elif (
        group is not None
        and group.run_status == RunStatus.COMPLETED
        and (run is None or run.status != "completed" or run.summary is None or run.summary.n_error > 0)
    ):
        # A scenario that did not finish cleanly is not a completed measurement of that scenario.
        status = RunStatus.FAILED
    summary = run.summary if run is not None else None
    telemetry = run.telemetry if run is not None else None
    proposals: bool | None = None
    if telemetry is not None and telemetry.source != "not_exported":
        proposals = bool((telemetry.drafts or 0) > 0 or (telemetry.draft_tokens or 0) > 0)
    path = group.execution_path if group else None
    if role == "baseline" and proposals:
        # A "baseline" whose engine reports proposals (an endpoint configured with speculation) is not target-only.
        path = "speculative"
    return SideMetrics.model_validate(
        {
            "role": role,
            "run_status": status,
            "target_snapshot": group.target_snapshot if group else None,
            "workload_key": run.workload_identity.key if run else None,
            "sampling_key": summary.sampling_key if summary else None,
            "execution_path": path,
            "throughput_tokens_per_s": summary.output_throughput_tok_s if summary else None,
            "ttft_p95_ms": summary.ttft_ms.p95 if summary else None,
            "e2e_p95_ms": summary.e2e_ms.p95 if summary else None,
            "peak_memory_mb": run.peak_memory_mb if run else None,
            "quality_ok": quality_ok,
            "mechanism_active": proposals if role == "candidate" else None,
        }
    )


def _contamination(
    base_run: ScenarioRun | None, cand_run: ScenarioRun | None, host_limit: float | None
) -> tuple[str, ...]:
    reasons: list[str] = []
    for role, run in (("baseline", base_run), ("candidate", cand_run)):
        if run is None:
            continue
        if run.traffic is not None and run.traffic.contaminated:
            reasons.append(f"{role}: {run.traffic.reason}")
        load = run.host_load
        if load is not None and host_limit is not None and load.foreign_share > host_limit:
            reasons.append(
                f"{role}: host busy: {load.foreign_share:.0%} of all CPU time went to other processes during "
                f"{run.scenario} (limit {host_limit:.0%})"
            )
    return tuple(reasons)


def _untrusted(evidence: PairEvidence, reasons: Sequence[str]) -> PairEvidence:
    """Comparable/incomplete evidence measured under other traffic becomes incomplete (stronger states stay)."""
    if not reasons or evidence.evidence_status is EvidenceStatus.NOT_EVALUATED:
        return evidence
    sides = [r.split(":", 1)[0] for r in reasons]
    status = evidence.evidence_status
    if status is EvidenceStatus.COMPARABLE:
        status = EvidenceStatus.INCOMPLETE
    return PairEvidence(
        evidence_status=status,
        mismatches=evidence.mismatches,
        missing_evidence=tuple(dict.fromkeys((*evidence.missing_evidence, MISSING_UNCONTAMINATED))),
        missing_detail=tuple(
            dict.fromkeys((*evidence.missing_detail, *(f"{side}.{MISSING_UNCONTAMINATED}" for side in sides)))
        ),
        candidate_run_status=evidence.candidate_run_status,
    )


@dataclass(frozen=True)
class _Inputs:
    load_records: RecordsLoader
    load_parity: ParityLoader | None
    thresholds: Thresholds
    bootstrap: BootstrapPolicy
    parity: ParityPolicy
    host_limit: float | None = None


def _evaluate(
    base_group: GroupResult | None,
    cand_group: GroupResult,
    key: ScenarioKey,
    *,
    track: str,
    categories: Mapping[str, str | None],
    inputs: _Inputs,
) -> tuple[ScenarioEvidence, bool]:
    base_run = _scenario(base_group, key.name)
    cand_run = _scenario(cand_group, key.name)
    parity: ScenarioParity | None = None
    pass_parity: ScenarioParity | None = None
    stats: PairedStats | None = None
    used_tokens = False
    prediction = None
    breakdown = None
    both = (
        base_group is not None
        and base_run is not None
        and cand_run is not None
        and base_run.status == "completed"
        and cand_run.status == "completed"
        and base_group.run_status == RunStatus.COMPLETED
        and cand_group.run_status == RunStatus.COMPLETED
    )
    if both and base_group is not None:
        base_records = inputs.load_records(base_group.group, key.name)
        cand_records = inputs.load_records(cand_group.group, key.name)
        # Token ids when both sides have them (exact), otherwise characters (stated in the policy).
        used_tokens = _has_token_ids(base_records) and _has_token_ids(cand_records)
        base_out = outputs_for_parity(base_records, tokens=used_tokens)
        cand_out = outputs_for_parity(cand_records, tokens=used_tokens)
        base_pass = inputs.load_parity(base_group.group, key.workload) if inputs.load_parity else None
        cand_pass = inputs.load_parity(cand_group.group, key.workload) if inputs.load_parity else None
        parity = scenario_parity(
            base_out,
            cand_out,
            baseline_top_logprobs=pass_logprobs(base_out, base_pass) if base_pass and used_tokens else None,
            candidate_top_logprobs=pass_logprobs(cand_out, cand_pass) if cand_pass and used_tokens else None,
            policy=inputs.parity,
        )
        pass_parity = _parity_pass(base_pass, cand_pass, inputs.parity)
        pairing = pair_requests(
            samples_from_records(base_records, categories), samples_from_records(cand_records, categories)
        )
        stats = paired_stats(pairing.pairs, inputs.bootstrap)
        telemetry = cand_run.telemetry if cand_run else None
        prediction = predict_speedup(
            pairing.pairs,
            telemetry.per_position_rates if telemetry else None,
            num_drafts=telemetry.drafts if telemetry else None,
        )
        if any(categories.values()):
            breakdown = category_breakdown(pairing.pairs, categories=categories, policy=inputs.bootstrap)
    baseline = _side(base_group, base_run, role="baseline", quality_ok=True if both else None)
    candidate = _side(cand_group, cand_run, role="candidate", quality_ok=parity.quality_ok if parity else None)
    contamination = _contamination(base_run, cand_run, inputs.host_limit)
    evidence = _untrusted(build_pair_evidence(baseline, candidate), contamination)
    decision: DecisionResult = decide(evidence, inputs.thresholds, stats.speedup_interval if stats else None)
    return (
        ScenarioEvidence(
            candidate=cand_group.group,
            family=cand_group.family,
            scenario=key.name,
            workload=key.workload,
            concurrency=key.concurrency,
            track=track,
            evidence=evidence,
            decision=decision,
            parity=parity,
            stats=stats,
            telemetry=cand_run.telemetry if cand_run else None,
            prediction=prediction,
            categories=breakdown,
            parity_pass=pass_parity,
            contamination=contamination,
        ),
        used_tokens,
    )


def group_track(group: GroupResult) -> str:
    """The track of a group: its baseline's name (results of older versions: the default track)."""
    return group.track or (group.group if group.role == "baseline" else BASELINE_GROUP)


def assemble_evidence(
    groups: Sequence[GroupResult],
    scenarios: Sequence[ScenarioKey],
    *,
    load_records: RecordsLoader,
    categories: Mapping[str, Mapping[str, str | None]],
    thresholds: Thresholds,
    bootstrap: BootstrapPolicy,
    load_parity_records: ParityLoader | None = None,
    parity_pass: ParityPassPolicy | None = None,
    host_foreign_cpu_share_limit: float | None = None,
) -> EvidenceFile:
    """Paired evidence and a decision for every candidate x scenario, against its own track's baseline.

    `categories[workload][item_id]` gives per-item categories for the per-category breakdown;
    `load_parity_records` reads the parity pass (see `PARITY_PASS_RULE`), whose policy `parity_pass` states;
    scenarios whose host was busier than `host_foreign_cpu_share_limit` are contaminated (`CONTAMINATION_RULE`).
    """
    baselines = {g.group: g for g in groups if g.role == "baseline"}
    threshold = parity_pass.near_tie_threshold_nats if parity_pass else ParityPolicy().near_tie_threshold_nats
    inputs = _Inputs(
        load_records,
        load_parity_records,
        thresholds,
        bootstrap,
        ParityPolicy(near_tie_threshold_nats=threshold),
        host_foreign_cpu_share_limit,
    )
    entries: list[ScenarioEvidence] = []
    all_tokens = True
    for group in groups:
        if group.role != "candidate":
            continue
        track = group_track(group)
        for key in scenarios:
            entry, used_tokens = _evaluate(
                baselines.get(track),
                group,
                key,
                track=track,
                categories=categories.get(key.workload, {}),
                inputs=inputs,
            )
            all_tokens = all_tokens and (used_tokens or entry.parity is None)
            entries.append(entry)
    verdicts = {
        group.group: summarize_verdict({e.scenario: e.decision for e in entries if e.candidate == group.group})
        for group in groups
        if group.role == "candidate"
    }
    checked = any(s.traffic is not None or s.host_load is not None for g in groups for s in g.scenarios)
    return EvidenceFile(
        policy=EvidencePolicy(
            thresholds=thresholds,
            bootstrap=bootstrap,
            parity_unit="tokens" if all_tokens else "characters",
            rule=RULE,
            parity_pass=parity_pass,
            track_rule=TRACK_RULE,
            contamination_rule=CONTAMINATION_RULE if checked else None,
            host_foreign_cpu_share_limit=host_foreign_cpu_share_limit,
        ),
        entries=tuple(entries),
        verdicts=verdicts,
    )
