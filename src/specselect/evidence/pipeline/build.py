"""The evidence pipeline: for every candidate x scenario, pair -> parity -> stats -> decide, against the baseline
of the candidate's own track; then a verdict per candidate.

Every launch of a group enters (`launches`): THE speedup's interval includes the launch-to-launch variation, and
a baseline measured in two or more launches gives its track's A/A noise floor, which an accept must clear.

Pure: group results and records in, an `Evidence` out; every rule applied is written into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specselect.core.decision import DecisionResult, NoiseFloor, SpeedupInterval, Thresholds, decide, summarize_verdict
from specselect.core.families import Dependency, classify_family
from specselect.core.pairing import PairEvidence, build_pair_evidence
from specselect.core.status import RunStatus
from specselect.engines.acceptance import SpecTelemetry
from specselect.evidence.categories import CategoryBreakdown, category_breakdown
from specselect.evidence.parity import (
    Output,
    ParityPolicy,
    ScenarioParity,
    has_token_ids,
    outputs_for_parity,
    pass_logprobs,
    scenario_parity,
)
from specselect.evidence.pipeline.aa import aa_as_candidate
from specselect.evidence.pipeline.inputs import MeasuredGroup, MeasuredScenario, RecordSource, ScenarioKey, group_track
from specselect.evidence.pipeline.launches import SideLaunches, baseline_noise_floor, side_launches
from specselect.evidence.pipeline.result import (
    AA_AS_CANDIDATE_RULE,
    AA_DECISION_RULE,
    CONTAMINATION_RULE,
    RULE,
    TRACK_RULE,
    Evidence,
    EvidencePolicy,
    ParityPassPolicy,
    ScenarioEvidence,
    ScenarioNoiseFloor,
)
from specselect.evidence.pipeline.sides import SideFigures, contamination, find_scenario, side_metrics, untrusted
from specselect.evidence.prediction import ProposerCost, SpeedupPrediction, predict_speedup, verify_cost_from_prefill
from specselect.evidence.replication import (
    AANoiseFloor,
    ReplicatedEstimate,
    ReplicationPolicy,
    replicated_latency_ratios,
    replicated_speedup,
)
from specselect.evidence.samples import Pairing, RequestKey, pair_launches
from specselect.evidence.segments import InputLengthSegments, SegmentPolicy, input_length_segments
from specselect.evidence.stats import BootstrapPolicy, PairedStats, RatioEstimate, paired_stats
from specselect.measure.types import RequestRecord

__all__ = [
    "EvidenceSettings",
    "PairStats",
    "PairedRecords",
    "build_evidence",
    "decide_step",
    "pair_step",
    "parity_step",
    "segments_step",
    "stats_step",
]


@dataclass(frozen=True)
class EvidenceSettings:
    """The plan's policy for turning measurements into decisions."""

    thresholds: Thresholds
    bootstrap: BootstrapPolicy
    parity_pass: ParityPassPolicy | None = None
    host_foreign_cpu_share_limit: float | None = None
    replication: ReplicationPolicy = field(default_factory=ReplicationPolicy)
    repeats_per_launch: int = 1
    """Measured passes per launch (`[run] repeats`): launch j's passes are numbered from j times this."""
    proposer_costs: Mapping[str, ProposerCost] = field(default_factory=dict)
    """Candidate -> what its proposer costs per drafted token (draft models); lookups are assumed free."""
    memory_budgets: Mapping[str, float] = field(default_factory=dict)
    """Candidate -> the memory budget its decision compares with, where the plan sets none: the devices its own
    server uses (a candidate on a MIG instance has the instance's, not the card's)."""

    def thresholds_for(self, candidate: str) -> Thresholds:
        """The thresholds one candidate's decision applies (`thresholds` with its own memory budget, if any)."""
        budget = self.memory_budgets.get(candidate)
        return self.thresholds if budget is None else self.thresholds.model_copy(update={"max_peak_memory_mb": budget})

    @property
    def parity(self) -> ParityPolicy:
        if self.parity_pass is None:
            return ParityPolicy()
        return ParityPolicy(near_tie_threshold_nats=self.parity_pass.near_tie_threshold_nats)


@dataclass(frozen=True)
class PairedRecords:
    """The pair step's result: both sides over their launches, their outputs and the paired samples."""

    baseline_side: SideLaunches
    candidate_side: SideLaunches
    tokens: bool
    """Token ids on both sides (exact parity), otherwise characters."""
    baseline_outputs: dict[RequestKey, Output]
    candidate_outputs: dict[RequestKey, Output]
    pairing: Pairing

    @property
    def baseline(self) -> Sequence[RequestRecord]:
        return self.baseline_side.records

    @property
    def candidate(self) -> Sequence[RequestRecord]:
        return self.candidate_side.records


def pair_step(baseline: SideLaunches, candidate: SideLaunches) -> PairedRecords:
    """Pair both sides' requests by (item, repeat), launch by launch, and read their outputs in the finest
    common unit."""
    tokens = has_token_ids(baseline.records) and has_token_ids(candidate.records)
    return PairedRecords(
        baseline_side=baseline,
        candidate_side=candidate,
        tokens=tokens,
        baseline_outputs=outputs_for_parity(baseline.records, tokens=tokens),
        candidate_outputs=outputs_for_parity(candidate.records, tokens=tokens),
        pairing=pair_launches(baseline.samples, candidate.samples),
    )


def _pass_vs_pass(
    base: Sequence[RequestRecord] | None, cand: Sequence[RequestRecord] | None, policy: ParityPolicy
) -> ScenarioParity | None:
    if not base or not cand:
        return None
    tokens = has_token_ids(base) and has_token_ids(cand)
    base_out = outputs_for_parity(base, tokens=tokens)
    lp = pass_logprobs(base_out, base) if tokens else None
    return scenario_parity(base_out, outputs_for_parity(cand, tokens=tokens), baseline_top_logprobs=lp, policy=policy)


def parity_step(
    pair: PairedRecords,
    base_pass: Sequence[RequestRecord] | None,
    cand_pass: Sequence[RequestRecord] | None,
    policy: ParityPolicy,
) -> tuple[ScenarioParity, ScenarioParity | None]:
    """The timed outputs' parity (divergences judged with the parity passes' logprobs) and pass-vs-pass parity.

    Every launch's outputs take part: a baseline whose launches disagree with each other shows it as
    inconsistent baseline repeats.
    """
    base_lp = pass_logprobs(pair.baseline_outputs, base_pass) if base_pass and pair.tokens else None
    cand_lp = pass_logprobs(pair.candidate_outputs, cand_pass) if cand_pass and pair.tokens else None
    parity = scenario_parity(
        pair.baseline_outputs,
        pair.candidate_outputs,
        baseline_top_logprobs=base_lp,
        candidate_top_logprobs=cand_lp,
        policy=policy,
    )
    return parity, _pass_vs_pass(base_pass, cand_pass, policy)


@dataclass(frozen=True)
class PairStats:
    """The stats step's result: THE speedup over every launch, the paired figures, the prediction, categories."""

    speedup: ReplicatedEstimate
    stats: PairedStats
    prediction: SpeedupPrediction
    categories: CategoryBreakdown | None


def _proposer_cost(family: str) -> ProposerCost | None:
    """A lookup proposer's cost is assumed free (a stated assumption); a model's is not known here."""
    try:
        spec = classify_family(family)
    except ValueError:
        return None
    return ProposerCost.free(spec.family) if spec.dependency is Dependency.RETRIEVAL else None


def stats_step(
    pair: PairedRecords,
    *,
    candidate: str,
    family: str,
    telemetry: SpecTelemetry | None,
    categories: Mapping[str, str | None],
    settings: EvidenceSettings,
) -> PairStats:
    """THE speedup (launch variation included when a side has several launches), the paired statistics, the
    speedup prediction (telemetry and a cost model from the baseline's own prefill, never the candidate's
    timing) and the per-category breakdown."""
    policy = settings.bootstrap
    pairs = pair.pairing.pairs
    speedup = replicated_speedup(pair.baseline_side.samples, pair.candidate_side.samples, policy, settings.replication)
    several = len(pair.baseline_side.launches) > 1 or len(pair.candidate_side.launches) > 1
    stats = (
        paired_stats(
            pairs,
            policy,
            speedup=speedup.as_ratio_estimate(),
            interval=speedup.speedup_interval(),
            **_replicated_latency(pair, policy, settings.replication),
        )
        if several
        else paired_stats(pairs, policy)
    )
    prediction = predict_speedup(
        pairs,
        telemetry.per_position_rates if telemetry else None,
        num_drafts=telemetry.drafts if telemetry else None,
        verify_cost=verify_cost_from_prefill(pair.baseline_side.samples),
        proposer=settings.proposer_costs.get(candidate) or _proposer_cost(family),
    )
    breakdown = category_breakdown(pairs, categories=categories, policy=policy) if any(categories.values()) else None
    return PairStats(speedup, stats, prediction, breakdown)


def _replicated_latency(
    pair: PairedRecords, policy: BootstrapPolicy, replication: ReplicationPolicy
) -> dict[str, RatioEstimate]:
    """The TTFT and E2E quantile ratios over every launch of both sides (launch variation in their intervals)."""
    base, cand = pair.baseline_side.samples, pair.candidate_side.samples
    ratios = replicated_latency_ratios(base, cand, policy=policy, replication=replication)
    return {"ttft": ratios["max_ttft_regression_ratio"], "e2e": ratios["max_e2e_p95_regression_ratio"]}


def segments_step(pair: PairedRecords, settings: EvidenceSettings) -> InputLengthSegments:
    """Both sides' samples over every launch split by prompt length, each bucket's speedup by THE speedup's
    estimator, judged against the plan's minimum speedup (`evidence.segments`)."""
    policy = SegmentPolicy(
        min_items=settings.bootstrap.min_clusters, min_speedup=settings.thresholds.min_throughput_speedup
    )
    return input_length_segments(
        pair.baseline_side.samples,
        pair.candidate_side.samples,
        policy=policy,
        bootstrap=settings.bootstrap,
        replication=settings.replication,
    )


def _measured(base_group: MeasuredGroup | None, cand_group: MeasuredGroup, key: ScenarioKey) -> bool:
    base_run, cand_run = find_scenario(base_group, key.name), find_scenario(cand_group, key.name)
    return (
        base_group is not None
        and base_run is not None
        and cand_run is not None
        and base_run.status == "completed"
        and cand_run.status == "completed"
        and base_group.run_status == RunStatus.COMPLETED
        and cand_group.run_status == RunStatus.COMPLETED
    )


@dataclass(frozen=True)
class _Inputs:
    records: RecordSource
    categories: Mapping[str, str | None]
    settings: EvidenceSettings


@dataclass(frozen=True)
class _Analysed:
    """Everything computed from the records of a pair that both sides measured."""

    pair: PairedRecords
    parity: ScenarioParity
    parity_pass: ScenarioParity | None
    stats: PairStats
    segments: InputLengthSegments


def _analyse(base: MeasuredGroup, cand: MeasuredGroup, key: ScenarioKey, inputs: _Inputs) -> _Analysed:
    records, cats = inputs.records, inputs.categories
    pair = pair_step(side_launches(base, key.name, records, cats), side_launches(cand, key.name, records, cats))
    parity, parity_pass = parity_step(
        pair, records.parity(base.group, key.workload), records.parity(cand.group, key.workload), inputs.settings.parity
    )
    stats = stats_step(
        pair,
        candidate=cand.group,
        family=cand.family,
        telemetry=pair.candidate_side.telemetry,
        categories=cats,
        settings=inputs.settings,
    )
    return _Analysed(pair, parity, parity_pass, stats, segments_step(pair, inputs.settings))


def _figures(side: SideLaunches, throughput: float | None) -> SideFigures:
    return SideFigures(
        throughput_tokens_per_s=throughput,
        ttft_p95_ms=side.ttft_p95_ms,
        e2e_p95_ms=side.e2e_p95_ms,
        peak_memory_mb=side.peak_memory_mb,
        telemetry=side.telemetry,
        peak_memory_figure=side.peak_memory_figure,
    )


def decide_step(
    base_group: MeasuredGroup | None,
    cand_group: MeasuredGroup,
    key: ScenarioKey,
    *,
    analysed: _Analysed | None,
    noise_floor: NoiseFloor | None,
    settings: EvidenceSettings,
) -> tuple[PairEvidence, DecisionResult, tuple[str, ...]]:
    """The pair evidence of contract section 4 (untrusted when contaminated) and the section 5 decision.

    Each side's throughput is THE speedup statistic's rate for it, so the evidence's `throughput_speedup`, the
    point the decision compares and the interval's point are one estimator.
    """
    base_run, cand_run = find_scenario(base_group, key.name), find_scenario(cand_group, key.name)
    parity = analysed.parity if analysed else None
    base_fig = cand_fig = None
    base_runs: tuple[MeasuredScenario, ...] = (base_run,) if base_run is not None else ()
    cand_runs: tuple[MeasuredScenario, ...] = (cand_run,) if cand_run is not None else ()
    if analysed is not None:
        speedup, pair = analysed.stats.speedup, analysed.pair
        base_fig = _figures(pair.baseline_side, speedup.baseline_tokens_per_s)
        cand_fig = _figures(pair.candidate_side, speedup.candidate_tokens_per_s)
        base_runs, cand_runs = pair.baseline_side.runs, pair.candidate_side.runs
    baseline = side_metrics(
        base_group, base_run, role="baseline", quality_ok=True if parity else None, figures=base_fig
    )
    quality = parity.quality_ok if parity else None
    candidate = side_metrics(cand_group, cand_run, role="candidate", quality_ok=quality, figures=cand_fig)
    sides = [*(("baseline", run) for run in base_runs), *(("candidate", run) for run in cand_runs)]
    reasons = contamination(sides, settings.host_foreign_cpu_share_limit)
    evidence = untrusted(build_pair_evidence(baseline, candidate), reasons)
    interval = analysed.stats.stats.speedup_interval if analysed else None
    thresholds = settings.thresholds_for(cand_group.group)
    latency = latency_intervals(analysed.stats.stats) if analysed else None
    return evidence, decide(evidence, thresholds, interval, noise_floor, latency), reasons


def latency_intervals(stats: PairedStats) -> dict[str, SpeedupInterval]:
    """The latency checks' intervals (`core.decision.LATENCY_CHECKS`) from the paired statistics that have one."""
    figures = {"max_ttft_regression_ratio": stats.ttft_ratio, "max_e2e_p95_regression_ratio": stats.e2e_p95_ratio}
    return {name: iv for name, estimate in figures.items() if (iv := estimate.speedup_interval()) is not None}


def _evaluate(
    base_group: MeasuredGroup | None,
    cand_group: MeasuredGroup,
    key: ScenarioKey,
    inputs: _Inputs,
    noise_floor: AANoiseFloor | None,
) -> tuple[ScenarioEvidence, bool]:
    """One candidate in one scenario; also whether its parity compared token ids."""
    cand_run = find_scenario(cand_group, key.name)
    analysed = None
    if base_group is not None and _measured(base_group, cand_group, key):
        analysed = _analyse(base_group, cand_group, key, inputs)
    floor = noise_floor.noise_floor() if noise_floor is not None else None
    evidence, decision, reasons = decide_step(
        base_group, cand_group, key, analysed=analysed, noise_floor=floor, settings=inputs.settings
    )
    stats = analysed.stats if analysed else None
    telemetry = analysed.pair.candidate_side.telemetry if analysed else (cand_run.telemetry if cand_run else None)
    entry = ScenarioEvidence(
        candidate=cand_group.group,
        family=cand_group.family,
        scenario=key.name,
        workload=key.workload,
        concurrency=key.concurrency,
        track=group_track(cand_group),
        evidence=evidence,
        decision=decision,
        parity=analysed.parity if analysed else None,
        stats=stats.stats if stats else None,
        speedup=stats.speedup if stats else None,
        telemetry=telemetry,
        prediction=stats.prediction if stats else None,
        categories=stats.categories if stats else None,
        parity_pass=analysed.parity_pass if analysed else None,
        contamination=reasons,
        segments=analysed.segments if analysed else None,
    )
    return entry, analysed.pair.tokens if analysed else True


def _noise_floors(
    baselines: Mapping[str, MeasuredGroup],
    scenarios: Sequence[ScenarioKey],
    records: RecordSource,
    settings: EvidenceSettings,
) -> dict[tuple[str, str], ScenarioNoiseFloor]:
    """Each track baseline's A/A noise floor per scenario, where it completed at least two launches of it, with
    the decision its A/A pair gets as a candidate."""
    floors: dict[tuple[str, str], ScenarioNoiseFloor] = {}
    for track, group in baselines.items():
        if group.run_status != RunStatus.COMPLETED:
            continue
        for key in scenarios:
            side = side_launches(group, key.name, records, {})
            floor = baseline_noise_floor(
                side, repeats_per_launch=settings.repeats_per_launch, policy=settings.bootstrap
            )
            if floor is not None:
                decision = aa_as_candidate(group, side, floor, settings.thresholds)
                floors[(track, key.name)] = ScenarioNoiseFloor(
                    track=track, scenario=key.name, floor=floor, as_candidate=decision
                )
    return floors


def build_evidence(
    groups: Sequence[MeasuredGroup],
    scenarios: Sequence[ScenarioKey],
    *,
    records: RecordSource,
    categories: Mapping[str, Mapping[str, str | None]],
    settings: EvidenceSettings,
) -> Evidence:
    """Paired evidence and a decision for every candidate x scenario, against its own track's baseline.

    `categories[workload][item_id]` gives per-item categories for the per-category breakdown; the parity passes'
    records (see `PARITY_PASS_RULE`) judge divergences; scenarios whose host was busier than the settings'
    limit are contaminated (`CONTAMINATION_RULE`); a baseline's own launches give its A/A noise floor.
    """
    baselines = {g.group: g for g in groups if g.role == "baseline"}
    floors = _noise_floors(baselines, scenarios, records, settings)
    entries: list[ScenarioEvidence] = []
    all_tokens = True
    for group in (g for g in groups if g.role == "candidate"):
        track = group_track(group)
        for key in scenarios:
            inputs = _Inputs(records, categories.get(key.workload, {}), settings)
            aa = floors.get((track, key.name))
            entry, tokens = _evaluate(baselines.get(track), group, key, inputs, aa.floor if aa else None)
            all_tokens = all_tokens and tokens
            entries.append(entry)
    verdicts = {
        group.group: summarize_verdict({e.scenario: e.decision for e in entries if e.candidate == group.group})
        for group in groups
        if group.role == "candidate"
    }
    checked = any(s.traffic is not None or s.host_load is not None for g in groups for s in g.all_scenario_runs())
    policy = EvidencePolicy(
        thresholds=settings.thresholds,
        bootstrap=settings.bootstrap,
        parity_unit="tokens" if all_tokens else "characters",
        rule=RULE,
        parity_pass=settings.parity_pass,
        track_rule=TRACK_RULE,
        contamination_rule=CONTAMINATION_RULE if checked else None,
        host_foreign_cpu_share_limit=settings.host_foreign_cpu_share_limit,
        replication=settings.replication,
        noise_floor_rule=AA_DECISION_RULE if floors else None,
        aa_as_candidate_rule=AA_AS_CANDIDATE_RULE if floors else None,
    )
    return Evidence(policy=policy, entries=tuple(entries), verdicts=verdicts, noise_floors=tuple(floors.values()))
