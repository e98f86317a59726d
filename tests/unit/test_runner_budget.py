"""The sweep budget stated after the baseline's first launch counts every launch still to run."""

from __future__ import annotations

from test_evidence_pipeline_tracks import records, scenario_run

from specselect.admission import Admissions
from specselect.artifacts.results import GroupResult, LaunchRecord
from specselect.core.gates import AdmissionResult
from specselect.core.status import RunStatus
from specselect.plan import load_plan
from specselect.runner.budget import remaining_budget
from specselect.workloads.loader import load_workload


def _baseline() -> GroupResult:
    run = scenario_run(records("repetition-c1", e2e=1.0)).model_copy(update={"scenario": "repetition-c1"})
    return GroupResult.model_validate(
        {
            "group": "g0_target_only",
            "role": "baseline",
            "family": "target_only",
            "method": None,
            "run_status": RunStatus.COMPLETED,
            "reason": "measured",
            "execution_path": "target_only",
            "target_snapshot": "s",
            "launch": LaunchRecord(
                command=("x",), speculative_config=None, served_model="m", base_url="u", startup_s=30.0
            ),
            "scenarios": (run,),
            "launches_planned": 2,
        }
    )


def test_every_candidate_launch_and_the_baselines_second_launch_are_in_the_budget() -> None:
    loaded = load_plan("builtin:cpu-sweep")
    plan = loaded.plan
    admitted = tuple(
        AdmissionResult(
            candidate=c.name, family=c.family, run_status=RunStatus.RUNNABLE, gate="none", reason="admitted"
        )
        for c in plan.candidates
    )
    workloads = {"repetition": load_workload("builtin:repetition", name="repetition")}
    baseline = _baseline()
    budget = remaining_budget(
        loaded, Admissions(results=admitted, gathered={}), workloads, baseline=baseline, done={baseline.group: baseline}
    )
    assert budget is not None
    candidates = len(plan.groups) - 1  # 4: three n-gram lengths and the draft model
    assert budget.servers == 2 * candidates + 1
    assert len(budget.per_scenario) == (2 * candidates + 1) * len(plan.run.concurrency)
    assert budget.startup_s == 30.0
