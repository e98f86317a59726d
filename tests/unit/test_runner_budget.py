"""The sweep budget stated after the baseline's first launch counts every launch still to run; a sequential round
starts only when the launches that ran say it fits the plan's time budget."""

from __future__ import annotations

from test_evidence_pipeline_tracks import records, scenario_run

from specselect._admission import Admissions
from specselect._core.gates import AdmissionResult
from specselect._core.status import RunStatus
from specselect._plan import load_plan
from specselect._runner.budget import remaining_budget, round_seconds, round_that_does_not_fit
from specselect._workloads.loader import load_workload
from specselect.records.group import GroupLaunch, GroupResult
from specselect.records.server import LaunchRecord


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


def _timed(name: str, *spans: tuple[str, str]) -> GroupResult:
    """A group whose launches ran from start to end, each span `(started_at, finished_at)`."""
    first, *later = spans
    relaunches = tuple(
        GroupLaunch(index=j, run_status=RunStatus.COMPLETED, reason="measured", started_at=a, finished_at=b)
        for j, (a, b) in enumerate(later, start=1)
    )
    times = {"started_at": first[0], "finished_at": first[1], "relaunches": relaunches}
    return _baseline().model_copy(update={"group": name, **times})


def test_a_round_is_expected_to_take_each_groups_longest_launch() -> None:
    base = _timed(
        "g0_target_only",
        ("2026-12-03T07:00:00+00:00", "2026-12-03T07:01:10+00:00"),
        ("2026-12-03T07:04:00+00:00", "2026-12-03T07:05:00+00:00"),
    )
    ngram = _timed(
        "g1_ngram",
        ("2026-12-03T07:01:10+00:00", "2026-12-03T07:02:00+00:00"),
        ("2026-12-03T07:03:00+00:00", "2026-12-03T07:04:00+00:00"),
    )
    assert round_seconds([base, ngram]) == 70.0 + 60.0


def test_a_round_that_fits_runs_and_one_that_does_not_is_left_out_with_the_figures() -> None:
    base = _timed("g0_target_only", ("2026-12-03T07:00:00+00:00", "2026-12-03T07:01:40+00:00"))
    assert round_that_does_not_fit(None, 10_000.0, [base], start=2, end=3) is None  # no budget: the rule decides
    assert round_that_does_not_fit(600.0, 500.0, [base], start=2, end=3) is None  # 500 + 100 fits exactly
    assert round_that_does_not_fit(600.0, 501.0, [base], start=2, end=3) == (
        "round 3 left out: 501 s spent and ~100 s expected for g0_target_only exceed sequential_budget_s = 600"
    )
    # Two rounds to the next look cost two rounds' time.
    assert round_that_does_not_fit(600.0, 401.0, [base], start=2, end=4) == (
        "rounds 3-4 left out: 401 s spent and ~200 s expected for g0_target_only exceed sequential_budget_s = 600"
    )


def test_a_round_with_no_timed_launch_to_go_by_is_left_out() -> None:
    untimed = _baseline()  # no start and end times recorded
    assert round_seconds([untimed]) is None
    assert round_that_does_not_fit(600.0, 0.0, [untimed], start=2, end=3) == (
        "round 3 left out: no timed launch of g0_target_only to go by"
    )
