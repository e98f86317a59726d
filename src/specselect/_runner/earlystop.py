"""The early stop of a concurrency sweep: after each measured level, is this candidate already clearly losing?

When it is, the workload's higher levels are not measured for it (`ScenarioRun.status = "skipped"` with the
reason): load only grows from there, and a server-hour is not spent confirming a slowdown.
"""

from __future__ import annotations

from specselect._evidence.pipeline import RecordSource, scenario_name
from specselect._evidence.rounds.estimate import pair_estimate
from specselect._evidence.samples import samples_from_records
from specselect._evidence.sweeps import SweepPoint, early_stop_reason
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.group import ScenarioRun
from specselect.records.workloads import Workload

__all__ = ["early_stop_check", "skipped_run"]


def early_stop_check(
    records: RecordSource,
    *,
    baseline: str,
    group: str,
    scenario: str,
    workload: str,
    concurrency: int,
    policy: BootstrapPolicy,
) -> str | None:
    """The reason to skip `workload`'s higher levels for `group`, or None to go on.

    Both sides' records come from the run's records (the baseline ran first). No baseline records (it failed,
    or was not measured here) means no comparison and no stop.
    """
    base = samples_from_records(r for r in records.timed(baseline, scenario) if r.launch == 0)
    cand = samples_from_records(r for r in records.timed(group, scenario) if r.launch == 0)
    if not base or not cand:
        return None
    # The decision's estimator on round 1 alone: its interval is the items' (no launch variation yet).
    estimate = pair_estimate(base, cand, level=policy.level, basis=policy.throughput_basis)
    speedup = estimate.as_ratio_estimate(n_samples=min(len(base), len(cand)))
    return early_stop_reason(SweepPoint(candidate=group, workload=workload, concurrency=concurrency, speedup=speedup))


def skipped_run(
    name: str, workload: Workload, concurrency: int, reason: str, *, temperature: float = 0.0, launch: int = 0
) -> ScenarioRun:
    """The record of a scenario the early stop skipped (`reason` from `early_stop_check`)."""
    return ScenarioRun(
        launch=launch,
        scenario=scenario_name(name, concurrency, temperature),
        workload=name,
        workload_identity=workload.identity,
        concurrency=concurrency,
        temperature=temperature,
        status="skipped",
        early_stop=reason,
    )
