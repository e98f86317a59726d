"""Sequential repeats: settle a pair as soon as its decision cannot change, spend more only where it can."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from specselect.core.decision import NoiseFloor, Thresholds
from specselect.evidence.replication import replicated_speedup
from specselect.evidence.samples import RequestSample
from specselect.evidence.sequential import (
    PairProgress,
    SequentialPolicy,
    decision_thresholds,
    launch_look_level,
    look_level,
    next_step,
    plan_next,
    progress_from_estimate,
)
from specselect.evidence.stats import BootstrapPolicy

POLICY = SequentialPolicy(max_repeats=4, max_launches=3)
LIMITS = decision_thresholds(Thresholds())


def progress(low: float | None, high: float | None, **changes: object) -> PairProgress:
    fields: dict[str, object] = {"pair": "ngram/general-c1", "low": low, "high": high, "launches": 2, "repeats": 2}
    fields.setdefault("passes", 4)
    return PairProgress.model_validate({**fields, "n_items": 8, **changes})


def test_the_default_policy_judges_the_minimum_speedup_and_one() -> None:
    assert LIMITS == (1.0, 1.1)
    band = NoiseFloor(spread_log=math.log(1.15), level=0.95, method="m")
    assert decision_thresholds(Thresholds(), band) == pytest.approx((1.0, 1.1, 1.15))


def test_an_interval_above_every_threshold_is_a_settled_accept_and_saves_the_rest() -> None:
    step = next_step(progress(1.2, 1.4), LIMITS, POLICY)
    assert (step.action, step.reason, step.sides) == ("settled", "decision_settled", ("above", "above"))
    assert (step.passes_spent, step.passes_saved) == (4, 12 - 4)
    assert (step.requests_spent, step.requests_saved) == (32, 64)


@pytest.mark.parametrize(
    ("low", "high", "sides"),
    [(0.7, 0.9, ("below", "below")), (1.02, 1.08, ("above", "below")), (1.1, 1.3, ("above", "above"))],
    ids=["net-slowdown", "settled-tune", "low-exactly-at-threshold-accepts"],
)
def test_intervals_clear_of_every_threshold_are_settled_whichever_side(
    low: float, high: float, sides: tuple[str, ...]
) -> None:
    step = next_step(progress(low, high), LIMITS, POLICY)
    assert (step.action, step.sides, step.straddled) == ("settled", sides, ())


def test_a_straddling_interval_adds_a_repeat_when_variance_is_within_launches() -> None:
    step = next_step(progress(1.05, 1.3, launch_share=0.2), LIMITS, POLICY)
    assert (step.action, step.reason, step.add_repeats, step.add_launches) == (
        "add_repeats",
        "interval_straddles_threshold",
        1,
        0,
    )
    assert step.straddled == (1.1,)
    assert step.passes_saved == 0


def test_a_straddling_interval_adds_a_launch_when_variance_is_between_launches() -> None:
    step = next_step(progress(0.95, 1.3, launch_share=0.7), LIMITS, POLICY)
    assert (step.action, step.add_launches, step.straddled) == ("add_launch", 1, (1.0, 1.1))


def test_too_few_launches_add_a_launch_before_anything_else() -> None:
    policy = SequentialPolicy(max_repeats=4, max_launches=3, min_launches=2)
    step = next_step(progress(1.0, 1.3, launches=1, passes=2), LIMITS, policy)
    assert (step.action, step.reason) == ("add_launch", "below_min_launches")


def test_an_exhausted_option_falls_to_the_other_and_both_exhausted_stops_with_a_reason() -> None:
    repeats_done = next_step(progress(1.05, 1.3, repeats=4, passes=8, launch_share=0.1), LIMITS, POLICY)
    assert repeats_done.action == "add_launch"
    launches_done = next_step(progress(1.05, 1.3, launches=3, passes=6, launch_share=0.9), LIMITS, POLICY)
    assert (launches_done.action, launches_done.add_repeats) == ("add_repeats", 1)
    spent = next_step(progress(1.05, 1.3, launches=3, repeats=4, passes=12), LIMITS, POLICY)
    assert (spent.action, spent.reason, spent.passes_spent, spent.passes_saved) == ("stop", "budget_exhausted", 12, 0)


def test_the_last_repeat_step_never_overshoots_the_budget() -> None:
    policy = SequentialPolicy(max_repeats=4, max_launches=1, repeat_step=3)
    step = next_step(progress(1.05, 1.3, launches=1, repeats=3, passes=3), LIMITS, policy)
    assert (step.action, step.add_repeats) == ("add_repeats", 1)


def test_no_interval_stops_because_repeats_do_not_add_items() -> None:
    step = next_step(progress(None, None), LIMITS, POLICY)
    assert (step.action, step.reason, step.passes_saved) == ("stop", "no_interval", 8)


def test_interim_looks_use_a_bonferroni_level_over_the_most_looks() -> None:
    assert POLICY.max_passes == 12
    assert look_level(0.95, POLICY) == pytest.approx(1 - 0.05 / 12)


def test_looks_once_per_launch_use_a_bonferroni_level_over_the_launches_that_can_be_added() -> None:
    policy = SequentialPolicy(max_repeats=2, max_launches=4, min_launches=2)
    assert launch_look_level(0.95, policy) == pytest.approx(1 - 0.05 / 3)  # after launches 2, 3 and 4


def test_plan_totals_the_budget_and_says_when_nothing_continues() -> None:
    plan = plan_next(
        [progress(1.2, 1.4, pair="b"), progress(1.0, 1.2, pair="a"), progress(None, None, pair="c")], LIMITS, POLICY
    )
    assert [s.pair for s in plan.steps] == ["a", "b", "c"]
    assert (plan.n_settled, plan.n_continuing, plan.n_stopped) == (1, 1, 1)
    assert (plan.passes_spent, plan.passes_saved) == (12, 8 + 8)


def test_progress_comes_from_a_replicated_estimate() -> None:
    samples = [
        RequestSample(item_id=f"i{i}", repeat=r, launch=j, completion_tokens=100, e2e_s=1.0 + 0.1 * i + 0.05 * j)
        for i in range(4)
        for r in range(2)
        for j in range(2)
    ]
    faster = [s.model_copy(update={"e2e_s": (s.e2e_s or 1.0) / 2}) for s in samples]
    estimate = replicated_speedup(samples, faster, BootstrapPolicy(n_resamples=200))
    state = progress_from_estimate("ngram/general-c1", estimate, repeats=2)
    assert (state.launches, state.passes, state.n_items) == (2, 4, 4)
    assert (state.low, state.high) == (estimate.low, estimate.high)
    assert state.launch_share == (estimate.components.launch_share if estimate.components else None)
    assert next_step(state, LIMITS, POLICY).action == "settled"


def test_policy_refuses_more_minimum_launches_than_allowed() -> None:
    with pytest.raises(ValidationError, match="min_launches"):
        SequentialPolicy(max_repeats=2, max_launches=1, min_launches=2)
