"""The sweeps step: where speculation stops paying as concurrency grows, which proposal length to use per
scenario, and goodput under the plan's SLOs.

The statistics are the pure functions of `specselect._evidence.sweeps`; this step only picks their inputs out of
the run's evidence entries, group results and records, and keeps what they return.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from specselect._core.status import Decision, RunStatus
from specselect._evidence.pipeline.inputs import MeasuredGroup, RecordSource
from specselect._evidence.sweeps import SweepPoint, choose_length, find_crossover, goodput
from specselect.records.evidence.result import Evidence, ScenarioEvidence
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.evidence.sweeps import Crossover, EarlyStop, LengthSweep, ScenarioGoodput, SweepAnalysis
from specselect.records.proposals import LENGTH_AXIS

__all__ = ["analyze_sweeps", "sweep_point"]


def sweep_point(entry: ScenarioEvidence, proposal_length: int | None = None) -> SweepPoint | None:
    """The entry as a sweep point; None when it has no paired statistics (nothing was measured on both sides)."""
    if entry.stats is None:
        return None
    return SweepPoint(
        candidate=entry.candidate,
        workload=entry.workload,
        concurrency=entry.concurrency,
        proposal_length=proposal_length,
        speedup=entry.stats.throughput_speedup,
        meets_thresholds=entry.decision.decision is Decision.ACCEPT,
        per_request=entry.stats.per_request,
        decision=entry.decision,
    )


def _crossovers(entries: Sequence[ScenarioEvidence], points: Sequence[SweepPoint]) -> list[Crossover]:
    # A pair planned at several levels gets a crossover even when only its lowest level was measured (an
    # early stop skipped the rest): "does not pay at 1" is the answer for every level above.
    levels: dict[tuple[str, str], set[int]] = defaultdict(set)
    for entry in entries:
        levels[(entry.candidate, entry.workload)].add(entry.concurrency)
    by_pair: dict[tuple[str, str], list[SweepPoint]] = defaultdict(list)
    for point in points:
        by_pair[(point.candidate, point.workload)].append(point)
    return [find_crossover(found) for pair, found in by_pair.items() if len(levels[pair]) >= 2]


def _lengths(
    points: Sequence[SweepPoint],
    sweeps: Mapping[str, Sequence[str]],
    values: Mapping[str, Mapping[str, Any]],
    policy: BootstrapPolicy,
) -> list[LengthSweep]:
    by_name = defaultdict(list)
    for point in points:
        by_name[point.candidate].append(point)
    out: list[LengthSweep] = []
    for parent, members in sweeps.items():
        families: dict[str, tuple[dict[str, Any], list[str]]] = {}
        for name in members:
            fixed = {k: v for k, v in values.get(name, {}).items() if k != LENGTH_AXIS}
            families.setdefault(repr(sorted(fixed.items())), (fixed, []))[1].append(name)
        for fixed, names in families.values():
            scenarios: dict[tuple[str, int], list[SweepPoint]] = defaultdict(list)
            for name in names:
                for point in by_name.get(name, ()):
                    if point.proposal_length is not None:
                        scenarios[(point.workload, point.concurrency)].append(point)
            for key in sorted(scenarios):
                found = scenarios[key]
                if len({p.proposal_length for p in found}) >= 2:
                    out.append(LengthSweep(sweep=parent, fixed=fixed, choice=choose_length(found, policy=policy)))
    return out


def _goodput(
    groups: Sequence[MeasuredGroup], records: RecordSource, slo_ttft_ms: float | None, slo_tpot_ms: float | None
) -> list[ScenarioGoodput]:
    if slo_ttft_ms is None and slo_tpot_ms is None:
        return []
    out: list[ScenarioGoodput] = []
    for group in groups:
        if group.run_status != RunStatus.COMPLETED:
            continue
        for run in group.scenarios:
            duration = run.summary.duration_s if run.summary is not None else None
            if run.status != "completed" or duration is None or duration <= 0:
                continue
            out.append(
                ScenarioGoodput(
                    group=group.group,
                    scenario=run.scenario,
                    workload=run.workload,
                    concurrency=run.concurrency,
                    goodput=goodput(
                        records.timed(group.group, run.scenario),
                        slo_ttft_ms=slo_ttft_ms,
                        slo_tpot_ms=slo_tpot_ms,
                        duration_s=duration,
                    ),
                )
            )
    return out


def analyze_sweeps(
    evidence: Evidence,
    groups: Sequence[MeasuredGroup],
    *,
    sweeps: Mapping[str, Sequence[str]],
    sweep_values: Mapping[str, Mapping[str, Any]],
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    records: RecordSource,
) -> SweepAnalysis:
    """Crossovers, length choices, goodput and early stops of one run (empty sections where nothing applies).

    `sweeps` maps each expanded plan entry to its sub-candidates, `sweep_values` a sub-candidate to its swept
    values (the plan's `Plan.sweeps` and `Candidate.sweep.values`).
    """
    lengths = {g.group: g.proposal_length for g in groups}
    crossovers: list[Crossover] = []
    chosen: list[LengthSweep] = []
    # Each temperature is a sweep of its own: acceptance, so where it pays and the best length, changes with it.
    for temperature in sorted({e.temperature for e in evidence.entries}):
        entries = [e for e in evidence.entries if e.temperature == temperature]
        points = [point for e in entries if (point := sweep_point(e, lengths.get(e.candidate))) is not None]
        tag = {"temperature": temperature}
        crossovers.extend(c.model_copy(update=tag) for c in _crossovers(entries, points))
        found = _lengths(points, sweeps, sweep_values, evidence.policy.bootstrap)
        chosen.extend(s.model_copy(update=tag) for s in found)
    early = [
        EarlyStop(group=g.group, scenario=run.scenario, reason=run.early_stop)
        for g in groups
        for run in g.scenarios
        if run.status == "skipped" and run.early_stop is not None
    ]
    return SweepAnalysis(
        crossovers=tuple(crossovers),
        lengths=tuple(chosen),
        goodput=tuple(_goodput(groups, records, slo_ttft_ms, slo_tpot_ms)),
        early_stops=tuple(early),
    )
