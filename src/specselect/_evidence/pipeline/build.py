"""The evidence pipeline: for every candidate x scenario, pair -> parity -> rounds -> decide at each look,
against the baseline of the candidate's own track; then a verdict per candidate and what the rule runs next.

Launch j of a candidate and launch j of its baseline form round j (`evidence.rounds.design`). At each look the
pairs' rounds so far are analysed together (`pipeline.rounds`: variances pooled over the run's pairs) and
every pair is decided at that look's level; a pair keeps the decision of the first look that accepted it, else
of its last (`evidence.rounds.looks`). Figures beyond the decision (decode speedup, per-request ratios,
categories, segments, the prediction) come from the same rounds as the decision; parity from every round.

Pure: group results and records in, an `Evidence` out; every rule applied is written into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specselect._core.decision import (
    DecisionResult,
    Thresholds,
    decide,
    summarize_verdict,
)
from specselect._core.families import Dependency, classify_family
from specselect._core.pairing import PairEvidence, build_pair_evidence
from specselect._core.status import RunStatus
from specselect._evidence.categories import category_breakdown
from specselect._evidence.parity import Output, has_token_ids, outputs_for_parity, pass_logprobs, scenario_parity
from specselect._evidence.pipeline.capacity import capacity_costs, costs_by_candidate, gate_decision
from specselect._evidence.pipeline.inputs import MeasuredGroup, RecordSource, ScenarioKey, group_track
from specselect._evidence.pipeline.launches import SideLaunches, side_launches
from specselect._evidence.pipeline.rounds import LookAnalysis, PairEstimates, PairRounds, analyse_look, decide_pair
from specselect._evidence.pipeline.rules import AA_CONTROL_RULE, CONTAMINATION_RULE, RULE, TRACK_RULE
from specselect._evidence.pipeline.sides import SideFigures, excluded_rounds, find_scenario, side_metrics, untrusted
from specselect._evidence.prediction import predict_speedup, verify_cost_from_prefill
from specselect._evidence.rounds.design import DESIGN_RULE
from specselect._evidence.rounds.looks import deciding_look, look_points, pair_state, plan_rounds
from specselect._evidence.sampled_parity import sampled_parity, samples_from_records
from specselect._evidence.samples import Pairing, RequestKey, pair_launches
from specselect._evidence.segments import input_length_segments
from specselect._evidence.stats import paired_stats, rate_for_basis
from specselect.records.evidence.capacity import CapacityPolicy
from specselect.records.evidence.categories import CategoryBreakdown
from specselect.records.evidence.parity import ParityPolicy, ScenarioParity
from specselect.records.evidence.prediction import ProposerCost, SpeedupPrediction
from specselect.records.evidence.result import Evidence, EvidencePolicy, ParityPassPolicy, ScenarioEvidence
from specselect.records.evidence.rounds import Estimand, LookPoint, LookSchedule, PairLook, RoundsPlan
from specselect.records.evidence.sampled_parity import SampledParity, SampledParityPolicy
from specselect.records.evidence.segments import InputLengthSegments, SegmentPolicy
from specselect.records.evidence.stats import BootstrapPolicy, PairedStats, RatioEstimate, ThroughputBasis
from specselect.records.measurement import RequestRecord

__all__ = ["EvidenceSettings", "PairedRecords", "build_evidence", "pair_step", "parity_step"]


@dataclass(frozen=True)
class EvidenceSettings:
    """The plan's policy for turning measurements into decisions."""

    thresholds: Thresholds
    bootstrap: BootstrapPolicy
    schedule: LookSchedule | None = None
    """The looks and their error budget; None: one look at every round measured, at `bootstrap.level`."""
    estimand: Estimand = "frozen_prompts"
    parity_pass: ParityPassPolicy | None = None
    distribution_test: SampledParityPolicy | None = None
    """The distribution test that judges quality at temperature > 0 (from the parity passes' samples); None
    when no scenario samples. At temperature 0 every output must equal the baseline's."""
    host_foreign_cpu_share_limit: float | None = None
    proposer_costs: Mapping[str, ProposerCost] = field(default_factory=dict)
    """Candidate -> what its proposer costs per drafted token (draft models); lookups are assumed free."""
    memory_budgets: Mapping[str, float] = field(default_factory=dict)
    """Candidate -> the memory budget its decision compares with, where the plan sets none: the devices its own
    server uses (a candidate on a MIG instance has the instance's, not the card's)."""
    capacity: CapacityPolicy = field(default_factory=CapacityPolicy)
    """The plan's capacity gate (none by default: the cost is stated, nothing is refused for it)."""

    def thresholds_for(self, candidate: str) -> Thresholds:
        """The thresholds one candidate's decision applies (`thresholds` with its own memory budget, if any)."""
        budget = self.memory_budgets.get(candidate)
        return self.thresholds if budget is None else self.thresholds.model_copy(update={"max_peak_memory_mb": budget})

    @property
    def parity(self) -> ParityPolicy:
        if self.parity_pass is None:
            return ParityPolicy()
        return ParityPolicy(near_tie_threshold_nats=self.parity_pass.near_tie_threshold_nats)

    def points(self, rounds_done: int) -> tuple[LookPoint, ...]:
        """The looks a run of `rounds_done` rounds was looked at."""
        if self.schedule is None:
            return (LookPoint(look=0, rounds=max(1, rounds_done), level=self.bootstrap.level),)
        return look_points(self.schedule, max(1, rounds_done))


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

    Every round's outputs take part: a baseline whose launches disagree with each other shows it as
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
class _Measured:
    """A pair both sides measured: its records paired, its parity, and its rounds."""

    base_group: MeasuredGroup
    cand_group: MeasuredGroup
    key: ScenarioKey
    pair: PairedRecords
    parity: ScenarioParity | None
    parity_pass: ScenarioParity | None
    rounds: PairRounds
    sampled: SampledParity | None = None

    @property
    def quality_ok(self) -> bool | None:
        """Exact parity's verdict at temperature 0, the distribution test's above it; a lossy candidate's only the
        distribution test's (its outputs differ from the target's by design, so exact parity cannot judge it)."""
        if self.sampled is not None:
            return {"pass": True, "fail": False}.get(self.sampled.verdict)
        if self.cand_group.lossy is not None:
            return None
        return self.parity.quality_ok if self.parity is not None else None


def _quality(
    pair: PairedRecords, records: RecordSource, groups: tuple[str, str], key: ScenarioKey, settings: EvidenceSettings
) -> tuple[ScenarioParity | None, ScenarioParity | None, SampledParity | None]:
    """(timed outputs' parity, pass-vs-pass parity, distribution test): exact parity at temperature 0, the
    distribution test of the parity passes' samples at the scenario's temperature above it."""
    base_pass, cand_pass = (
        records.parity(groups[0], key.parity_scenario),
        records.parity(groups[1], key.parity_scenario),
    )
    if key.temperature == 0 or settings.distribution_test is None:
        return (*parity_step(pair, base_pass, cand_pass, settings.parity), None)
    samples = samples_from_records(base_pass or (), cand_pass or ())
    return None, None, sampled_parity(samples, settings.distribution_test)


def _measure(base: MeasuredGroup, cand: MeasuredGroup, key: ScenarioKey, inputs: _Inputs) -> _Measured:
    records, cats = inputs.records, inputs.categories.get(key.workload, {})
    base_side, cand_side = side_launches(base, key.name, records, cats), side_launches(cand, key.name, records, cats)
    pair = pair_step(base_side, cand_side)
    parity, parity_pass, sampled = _quality(pair, records, (base.group, cand.group), key, inputs.settings)
    sides = [*(("baseline", run) for run in base_side.runs), *(("candidate", run) for run in cand_side.runs)]
    excluded = excluded_rounds(sides, inputs.settings.host_foreign_cpu_share_limit)
    rounds = PairRounds(
        f"{cand.group}/{key.name}", cand.group, key.name, base_side, cand_side, excluded, track=base.group
    )
    return _Measured(base, cand, key, pair, parity, parity_pass, rounds, sampled)


@dataclass(frozen=True)
class _Inputs:
    records: RecordSource
    categories: Mapping[str, Mapping[str, str | None]]
    settings: EvidenceSettings


def _figures(side: SideLaunches, rate: float | None) -> SideFigures:
    return SideFigures(
        throughput_tokens_per_s=rate,
        ttft_p95_ms=side.ttft_p95_ms,
        e2e_p95_ms=side.e2e_p95_ms,
        peak_memory_mb=side.peak_memory_mb,
        telemetry=side.telemetry,
        peak_memory_figure=side.peak_memory_figure,
    )


@dataclass(frozen=True)
class _Decided:
    """One pair decided at one look."""

    point: LookPoint
    estimates: PairEstimates
    evidence: PairEvidence
    decision: DecisionResult
    baseline: SideLaunches
    candidate: SideLaunches


def _decide_at(measured: _Measured, analysis: LookAnalysis, settings: EvidenceSettings) -> _Decided:
    """The contract's pair evidence and decision at one look, from the rounds that look used."""
    rounds = analysis.point.rounds
    estimates = analysis.pairs[measured.rounds.key]
    speedup = estimates.speedup
    # With no trusted round the pair is untrusted as a whole: its figures stay those measured, so what it
    # misses is the uncontaminated measurement, not every figure.
    left_out = measured.rounds.excluded if speedup.rounds else {}
    base_side = measured.rounds.baseline.upto(rounds, left_out)
    cand_side = measured.rounds.candidate_side.upto(rounds, left_out)
    base_run, cand_run = (
        find_scenario(measured.base_group, measured.key.name),
        find_scenario(measured.cand_group, measured.key.name),
    )
    basis = settings.bootstrap.throughput_basis
    base_rate = speedup.baseline_value if speedup.rounds else _pooled_rate(base_side, basis)
    cand_rate = speedup.candidate_value if speedup.rounds else _pooled_rate(cand_side, basis)
    baseline = side_metrics(
        measured.base_group, base_run, role="baseline", quality_ok=True, figures=_figures(base_side, base_rate)
    )
    candidate = side_metrics(
        measured.cand_group,
        cand_run,
        role="candidate",
        quality_ok=measured.quality_ok,
        figures=_figures(cand_side, cand_rate),
    )
    if measured.cand_group.role == "control":
        # An A/A control runs the baseline's configuration: taken as a candidate that proposes (AA_CONTROL_RULE).
        candidate = candidate.model_copy(update={"execution_path": "speculative", "mechanism_active": True})
    evidence = build_pair_evidence(baseline, candidate)
    lossy = measured.cand_group.lossy
    if measured.sampled is not None or lossy is not None:
        evidence = evidence.model_copy(update={"quality_check": "output_distribution", "lossy": lossy})
    if not speedup.rounds and speedup.excluded_rounds:
        evidence = untrusted(evidence, tuple(speedup.excluded_rounds.values()))
    decision = decide_pair(evidence, estimates, settings.thresholds_for(measured.cand_group.group))
    return _Decided(analysis.point, estimates, evidence, decision, base_side, cand_side)


def _pooled_rate(side: SideLaunches, basis: ThroughputBasis) -> float | None:
    """Tokens per second over every request of the side (a pair with no trusted round has no per-round rate)."""
    rate = rate_for_basis(basis)
    used = [v for v in map(rate, side.samples) if v is not None]
    seconds = sum(s for _, s in used)
    return sum(t for t, _ in used) / seconds if seconds > 0 else None


def _proposer_cost(family: str) -> ProposerCost | None:
    """A lookup proposer's cost is assumed free (a stated assumption); a model's is not known here."""
    try:
        spec = classify_family(family)
    except ValueError:
        return None
    return ProposerCost.free(spec.family) if spec.dependency is Dependency.RETRIEVAL else None


def _point_only(metric: str, statistic: str, value: float | None, n: int) -> RatioEstimate:
    return RatioEstimate(
        metric=metric,
        statistic=statistic,
        point=value,
        low=None,
        high=None,
        level=0.0,
        n_samples=n,
        n_clusters=0,
        n_dropped=0,
        method="point",
        n_resamples=0,
        seed=0,
        reason="checked as a point (contract s5); the decision's latency intervals are of the mean ratios",
    )


@dataclass(frozen=True)
class _Descriptive:
    stats: PairedStats
    prediction: SpeedupPrediction
    categories: CategoryBreakdown | None
    segments: InputLengthSegments


def _describe(measured: _Measured, chosen: _Decided, inputs: _Inputs) -> _Descriptive:
    """Paired figures, the prediction, categories and segments over the rounds the decision used."""
    policy = inputs.settings.bootstrap
    pairs = pair_launches(chosen.baseline.samples, chosen.candidate.samples).pairs
    ev = chosen.evidence
    speedup = chosen.estimates.speedup
    stats = paired_stats(
        pairs,
        policy,
        speedup=speedup.as_ratio_estimate(),
        interval=speedup.interval(),
        ttft=_point_only("ttft_ratio", "p95 ratio over the rounds' requests", ev.ttft_ratio, len(pairs)),
        e2e=_point_only("e2e_p95_ratio", "p95 ratio over the rounds' requests", ev.e2e_p95_ratio, len(pairs)),
    )
    telemetry = chosen.candidate.telemetry
    cand = measured.cand_group
    prediction = predict_speedup(
        pairs,
        telemetry.per_position_rates if telemetry else None,
        num_drafts=telemetry.drafts if telemetry else None,
        verify_cost=verify_cost_from_prefill(chosen.baseline.samples),
        proposer=inputs.settings.proposer_costs.get(cand.group) or _proposer_cost(cand.family),
    )
    categories = inputs.categories.get(measured.key.workload, {})
    breakdown = category_breakdown(pairs, categories=categories, policy=policy) if any(categories.values()) else None
    seg_policy = SegmentPolicy(
        min_items=policy.min_clusters, min_speedup=inputs.settings.thresholds.min_throughput_speedup
    )
    segments = input_length_segments(
        chosen.baseline.samples,
        chosen.candidate.samples,
        policy=seg_policy,
        bootstrap=policy,
        level=speedup.level,
    )
    return _Descriptive(stats, prediction, breakdown, segments)


def _looked(measured: _Measured, history: Sequence[_Decided]) -> tuple[_Decided, tuple[PairLook, ...]]:
    chosen = history[deciding_look({d.point.look: d.decision for d in history})]
    looks = tuple(
        PairLook(
            candidate=measured.cand_group.group,
            scenario=measured.key.name,
            state=pair_state(d.decision)[0],
            why=pair_state(d.decision)[1],
            decision=d.decision.decision.value,
            reason=d.decision.reason,
            look=d.point.look,
            rounds=len(d.estimates.speedup.rounds),
            level=d.point.level,
            low=d.estimates.speedup.low,
            high=d.estimates.speedup.high,
        )
        for d in history
    )
    return chosen, looks


def _entry(measured: _Measured, history: Sequence[_Decided], inputs: _Inputs) -> ScenarioEvidence:
    chosen, looks = _looked(measured, history)
    described = _describe(measured, chosen, inputs)
    cand, key = measured.cand_group, measured.key
    return ScenarioEvidence(
        candidate=cand.group,
        family=cand.family,
        scenario=key.name,
        workload=key.workload,
        concurrency=key.concurrency,
        temperature=key.temperature,
        track=group_track(cand),
        evidence=chosen.evidence,
        decision=chosen.decision,
        parity=measured.parity,
        stats=described.stats,
        speedup=chosen.estimates.speedup,
        latency={"ttft_mean": chosen.estimates.ttft, "e2e_mean": chosen.estimates.e2e},
        drift=chosen.estimates.drift,
        look=chosen.point,
        looks=looks,
        telemetry=chosen.candidate.telemetry,
        prediction=described.prediction,
        categories=described.categories,
        parity_pass=measured.parity_pass,
        sampled_parity=measured.sampled,
        contamination=tuple(measured.rounds.excluded.values()),
        segments=described.segments,
    )


def _unmeasured(
    base: MeasuredGroup | None, cand: MeasuredGroup, key: ScenarioKey, settings: EvidenceSettings
) -> ScenarioEvidence:
    """A candidate x scenario without a measured pair: the contract's evidence from the first runs, decided."""
    base_run, cand_run = find_scenario(base, key.name), find_scenario(cand, key.name)
    baseline = side_metrics(base, base_run, role="baseline", quality_ok=None)
    candidate = side_metrics(cand, cand_run, role="candidate", quality_ok=None)
    evidence = build_pair_evidence(baseline, candidate)
    return ScenarioEvidence(
        candidate=cand.group,
        family=cand.family,
        scenario=key.name,
        workload=key.workload,
        concurrency=key.concurrency,
        temperature=key.temperature,
        track=group_track(cand),
        evidence=evidence,
        decision=decide(evidence, settings.thresholds_for(cand.group)),
        telemetry=cand_run.telemetry if cand_run else None,
    )


def _rounds_done(measured: Sequence[_Measured]) -> int:
    launches = [
        run.launch for m in measured for side in (m.pair.baseline_side, m.pair.candidate_side) for run in side.runs
    ]
    return max(launches, default=0) + 1


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
    records (see `PARITY_PASS_RULE`) judge divergences; a round whose host was busier than the settings' limit,
    or whose endpoint saw foreign traffic, is left out of its pairs (`CONTAMINATION_RULE`).
    """
    inputs = _Inputs(records, categories, settings)
    baselines = {g.group: g for g in groups if g.role == "baseline"}
    measured: list[_Measured] = []
    slots: list[tuple[MeasuredGroup, ScenarioKey]] = []
    for group in (g for g in groups if g.role in ("candidate", "control")):
        base = baselines.get(group_track(group))
        for key in scenarios:
            slots.append((group, key))
            if base is not None and _measured(base, group, key):
                measured.append(_measure(base, group, key, inputs))
    history: dict[str, list[_Decided]] = {m.rounds.key: [] for m in measured}
    analyses = [
        analyse_look(
            [m.rounds for m in measured],
            point,
            estimand=settings.estimand,
            basis=settings.bootstrap.throughput_basis,
            latency_level=settings.bootstrap.level,
            minimum=settings.thresholds.min_throughput_speedup,
        )
        for point in settings.points(_rounds_done(measured))
    ]
    for analysis in analyses:
        for m in measured:
            history[m.rounds.key].append(_decide_at(m, analysis, settings))
    done = {m.rounds.key: _entry(m, history[m.rounds.key], inputs) for m in measured}
    entries = tuple(
        done.get(f"{group.group}/{key.name}") or _unmeasured(baselines.get(group_track(group)), group, key, settings)
        for group, key in slots
    )
    costs = capacity_costs(groups, settings.capacity)
    by_candidate = costs_by_candidate(costs)
    entries = tuple(
        e.model_copy(update={"decision": gate_decision(e.decision, by_candidate.get(e.candidate))}) for e in entries
    )
    controls = {g.group for g in groups if g.role == "control"}
    evidence = _evidence(groups, entries, analyses, settings, all(m.pair.tokens for m in measured))
    evidence = evidence.model_copy(
        update={
            "entries": tuple(e for e in entries if e.candidate not in controls),
            "controls": tuple(e for e in entries if e.candidate in controls),
            "capacity": costs,
            "capacity_policy": settings.capacity if costs else None,
        }
    )
    return evidence.model_copy(update={"plan": _plan(evidence, measured, settings)})


def _plan(evidence: Evidence, measured: Sequence[_Measured], settings: EvidenceSettings) -> RoundsPlan | None:
    """What the rule runs next: the candidates measured in the latest round whose pairs are open at a look."""
    if settings.schedule is None or not measured:
        return None
    done = _rounds_done(measured)
    active = dict.fromkeys(
        m.cand_group.group for m in measured if any(r.launch == done - 1 for r in m.pair.candidate_side.runs)
    )
    looks = [p for e in evidence.entries if e.look is not None for p in e.looks if p.look == e.look.look]
    return plan_rounds(looks, tuple(active), settings.schedule, done)


def _evidence(
    groups: Sequence[MeasuredGroup],
    entries: tuple[ScenarioEvidence, ...],
    analyses: Sequence[LookAnalysis],
    settings: EvidenceSettings,
    all_tokens: bool,
) -> Evidence:
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
        design_rule=DESIGN_RULE,
        estimand=settings.estimand,
        schedule=settings.schedule,
        parity_pass=settings.parity_pass,
        distribution_test=settings.distribution_test,
        track_rule=TRACK_RULE,
        contamination_rule=CONTAMINATION_RULE if checked else None,
        aa_control_rule=AA_CONTROL_RULE if any(g.role == "control" for g in groups) else None,
        host_foreign_cpu_share_limit=settings.host_foreign_cpu_share_limit,
    )
    last = analyses[-1] if analyses else None
    return Evidence(
        policy=policy,
        entries=entries,
        verdicts=verdicts,
        pools=last.pools if last is not None else (),
        looks=tuple(a.point for a in analyses),
    )
