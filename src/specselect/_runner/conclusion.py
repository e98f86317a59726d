"""The end of a run: the evidence (pair -> parity -> stats -> decide -> sweeps) over the records held in memory,
and the hand-off, from the groups' results plus what only the run knows -- the records (acceptance spread), the
engine (serve flags, its batch-size schedule) and each group's track and admission."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specselect._admission import Admissions
from specselect._artifacts.handoff.build import HandoffInputs, build_handoff
from specselect._core.decision import Thresholds
from specselect._engines.devices import group_budget_mb
from specselect._evidence.pipeline import EvidenceSettings, ScenarioKey, analyze_sweeps, build_evidence
from specselect._evidence.sweeps import capped_schedule, cutoff_schedule
from specselect._plan import LoadedPlan, Plan
from specselect._runner.context import RunContext
from specselect._runner.paritypass import distribution_test, parity_policy
from specselect._runner.schedule_candidate import schedule_comparisons
from specselect.records.assets import ResolvedModel
from specselect.records.evidence.capacity import CapacityPolicy
from specselect.records.evidence.prediction import ProposerCost
from specselect.records.evidence.result import Evidence
from specselect.records.evidence.rounds import LookSchedule
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.group import GroupResult
from specselect.records.handoff import Handoff
from specselect.records.proposals import ScheduleRange
from specselect.records.results import EvidenceFile
from specselect.records.server import ServeFlags

__all__ = [
    "Conclusion",
    "conclude",
    "evidence_settings",
    "look",
    "look_schedule",
    "plan_scenarios",
    "proposer_costs",
    "run_handoff",
]


@dataclass(frozen=True)
class Conclusion:
    """What the run's measurements say: `evidence.json` and `handoff.json`."""

    evidence: EvidenceFile
    handoff: Handoff


def plan_scenarios(loaded: LoadedPlan) -> list[ScenarioKey]:
    """Every scenario of the plan, in a stable order: workloads in plan order x concurrency levels."""
    plan = loaded.plan
    return [
        ScenarioKey(w, c, t) for w in plan.workloads for t in plan.sampling.temperatures for c in plan.run.concurrency
    ]


def look_schedule(plan: Plan) -> LookSchedule:
    """The plan's looks and the one-sided error budget of an accept spent over them."""
    return LookSchedule.of_level(plan.run.look_rounds, plan.thresholds.confidence_level)


def evidence_settings(run: RunContext) -> EvidenceSettings:
    """The plan's thresholds (the memory budget defaults to the probed device budget, per candidate the devices
    its server uses) and policies; every interval is at its look's level (`look_schedule`)."""
    t = run.loaded.plan.thresholds
    budget = t.max_peak_memory_mb
    caps = run.setup.caps
    budgets: dict[str, float] = {}
    if budget is None and caps is not None:
        budget = float(caps.memory_budget_mb)
        budgets = {c.name: float(group_budget_mb(caps, c.env)) for c in run.loaded.plan.groups if not c.is_baseline}
    return EvidenceSettings(
        thresholds=Thresholds(
            min_throughput_speedup=t.min_throughput_speedup,
            max_ttft_regression_ratio=t.max_ttft_regression_ratio,
            max_e2e_p95_regression_ratio=t.max_e2e_p95_regression_ratio,
            max_peak_memory_mb=budget,
            latency_gate=t.latency_gate,
        ),
        bootstrap=BootstrapPolicy(level=t.confidence_level),
        schedule=look_schedule(run.loaded.plan),
        estimand=t.estimand,
        parity_pass=parity_policy(run.loaded),
        distribution_test=distribution_test(run.loaded),
        host_foreign_cpu_share_limit=t.max_host_foreign_cpu_share,
        proposer_costs=run.proposer_costs,
        memory_budgets=budgets,
        capacity=capacity_policy(run.loaded.plan),
    )


def capacity_policy(plan: Plan) -> CapacityPolicy:
    """The plan's `[capacity]` gate; its request length defaults to the target's max_model_len."""
    cap = plan.capacity
    return CapacityPolicy(
        required_concurrency=cap.required_concurrency,
        request_tokens=cap.request_tokens or (plan.target.max_model_len if cap.required_concurrency else None),
        max_kv_loss=cap.max_kv_loss,
    )


def proposer_costs(plan: Plan, adm: Admissions, targets: Mapping[str, ResolvedModel]) -> dict[str, ProposerCost]:
    """Each admitted draft model's cost per drafted token as its share of its track target's weight bytes."""
    out: dict[str, ProposerCost] = {}
    for name, gathered in adm.gathered.items():
        target = targets.get(plan.track_of(name).name)
        proposer = gathered.proposer
        if proposer is None or target is None or not proposer.weights_bytes or not target.weights_bytes:
            continue
        out[name] = ProposerCost.weights_ratio(proposer.weights_bytes, target.weights_bytes)
    return out


def look(run: RunContext, groups: Sequence[GroupResult]) -> Evidence:
    """The evidence of the groups as they stand (no sweeps): what the sequential rule and the conclusion read."""
    return build_evidence(
        groups,
        plan_scenarios(run.loaded),
        records=run.records,
        categories={name: {i.id: i.category for i in w.items} for name, w in run.workloads.items()},
        settings=evidence_settings(run),
    )


def conclude(run: RunContext, groups: Sequence[GroupResult], label: str) -> Conclusion:
    """Evidence, sweeps and hand-off of every group of the plan (in plan order)."""
    loaded, plan = run.loaded, run.loaded.plan
    scenarios = plan_scenarios(loaded)
    evidence = look(run, groups)
    sweeps = analyze_sweeps(
        evidence,
        groups,
        sweeps=plan.sweeps,
        sweep_values={c.name: c.sweep.values for c in plan.candidates if c.sweep is not None},
        slo_ttft_ms=plan.thresholds.slo_ttft_ms,
        slo_tpot_ms=plan.thresholds.slo_tpot_ms,
        records=run.records,
    )
    if not sweeps.empty:
        evidence = evidence.model_copy(update={"sweeps": sweeps})
    schedules = schedule_comparisons(run, evidence, groups)
    if schedules and evidence.sweeps is not None:
        evidence = evidence.model_copy(update={"sweeps": evidence.sweeps.model_copy(update={"schedules": schedules})})
    document = EvidenceFile.of(evidence)
    return Conclusion(evidence=document, handoff=run_handoff(run, document, groups, scenarios, label))


class _Groups:
    """Serve flags and schedules of the run's groups, through the engine."""

    def __init__(self, run: RunContext, groups: Sequence[GroupResult]) -> None:
        self.run = run
        self.by_name: Mapping[str, GroupResult] = {g.group: g for g in groups}

    def setting(self, name: str, ranges: Sequence[ScheduleRange] | None) -> Mapping[str, Any] | None:
        if not ranges:
            return None
        return self.run.engine.batch_schedule(ranges, self.run.group_context(self.run.loaded.plan.group(name)))

    def serve(self, name: str, ranges: Sequence[ScheduleRange] | None) -> tuple[ServeFlags | None, bool]:
        """The group's flags with `ranges` (default: the schedule it ran) written in, and whether they were."""
        group = self.by_name[name]
        if ranges is None and group.derived_schedule is not None:
            ranges = group.derived_schedule.ranges
        setting = self.setting(name, ranges)
        ctx = self.run.group_context(self.run.loaded.plan.group(name))
        flags = self.run.engine.serve_flags(
            ctx,
            self.run.gathered.get(name),
            disable_prefix_caching=self.run.loaded.plan.run.prefix_cache == "disabled",
            extra_speculative=setting,
        )
        return flags, setting is not None

    def cutoff(self, name: str, level: int) -> Sequence[ScheduleRange] | None:
        """The group's schedule with speculation off above `level` (a static length: k up to `level`)."""
        group = self.by_name[name]
        if group.derived_schedule is not None:
            return capped_schedule(group.derived_schedule.ranges, level)
        k = group.proposal_length
        return cutoff_schedule(k, level) if k else None


def run_handoff(
    run: RunContext, evidence: EvidenceFile, groups: Sequence[GroupResult], scenarios: Sequence[ScenarioKey], label: str
) -> Handoff:
    """`handoff.json` of a run whose groups all reached a final state."""
    known = _Groups(run, groups)
    inputs = HandoffInputs(
        label=label,
        plan=run.loaded.plan,
        plan_hash=run.loaded.plan_hash,
        plan_source=run.loaded.source,
        records=run.records,
        schedule=known.setting,
        serve=known.serve,
        cutoff=known.cutoff,
    )
    return build_handoff(evidence, groups, scenarios, inputs)
