"""Paired rounds: the design's order, the looks' error budget, the (round x item) table, the one estimator and its
pooled variance, when a pair is settled, and the drift check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from specselect._core.decision import Confidence, DecisionResult, SpeedupInterval, Thresholds
from specselect._core.status import Decision, EvidenceStatus
from specselect._evidence.rounds.design import TrackRound, round_order
from specselect._evidence.rounds.drift import drift_check
from specselect._evidence.rounds.estimate import (
    MetricRounds,
    estimate_metric,
    metric_rounds,
    pair_estimate,
    pool_variances,
)
from specselect._evidence.rounds.looks import deciding_look, look_points, pair_state, plan_rounds
from specselect._evidence.rounds.table import RoundTable, round_table
from specselect._evidence.samples import RequestSample
from specselect.records.evidence.rounds import LookSchedule, PairLook, PairState, VariancePool

ITEMS = ("a", "b", "c", "d")


def side(seconds: list[list[float]], *, tokens: int = 32, ttft: float = 0.1) -> list[RequestSample]:
    """One sample per (round, item): `seconds[r][i]` is item i's request time in round r."""
    return [
        RequestSample(
            item_id=ITEMS[i], repeat=r, launch=r, completion_tokens=tokens, ttft_s=ttft, e2e_s=s, decode_s=s - ttft
        )
        for r, row in enumerate(seconds)
        for i, s in enumerate(row)
    ]


# -- design ----------------------------------------------------------------------------------------------------


def test_rounds_alternate_their_order_so_each_candidate_runs_after_then_before_its_baseline() -> None:
    tracks = [TrackRound(baseline="B", members=("c1", "c2")), TrackRound(baseline="B@x", members=("c3",))]
    assert round_order(tracks, 0) == ("B", "c1", "c2", "B@x", "c3")
    assert round_order(tracks, 1) == ("c3", "B@x", "c2", "c1", "B")
    assert round_order(tracks, 2) == round_order(tracks, 0)
    assert round_order(tracks, 0, reverse_first=True) == round_order(tracks, 1)


def test_a_track_without_members_launches_only_when_kept() -> None:
    tracks = [TrackRound(baseline="B"), TrackRound(baseline="B@x", members=("c",))]
    assert round_order(tracks, 0) == ("B@x", "c")
    assert round_order(tracks, 0, keep_empty=True) == ("B", "B@x", "c")


def test_the_looks_spend_the_one_sided_error_in_proportion_to_their_rounds() -> None:
    schedule = LookSchedule.of_level((3, 4), 0.95)
    assert schedule.alpha == pytest.approx(0.025)
    assert [schedule.alpha_at(k) for k in (0, 1)] == pytest.approx([0.01875, 0.00625])
    assert [schedule.level_at(k) for k in (0, 1)] == pytest.approx([0.9625, 0.9875])
    assert sum(schedule.alpha_at(k) for k in range(2)) == pytest.approx(schedule.alpha)
    assert LookSchedule.of_level((3,), 0.95).level_at(0) == pytest.approx(0.95)  # one look: the plan's level


def test_looks_must_ascend() -> None:
    with pytest.raises(ValueError, match="strictly ascending"):
        LookSchedule(looks=(3, 3))


def test_a_run_stopped_between_looks_is_looked_at_where_it_stopped_with_the_next_looks_error() -> None:
    schedule = LookSchedule.of_level((2, 4), 0.95)
    assert [(p.look, p.rounds) for p in look_points(schedule, 4)] == [(0, 2), (1, 4)]
    assert [(p.look, p.rounds) for p in look_points(schedule, 3)] == [(0, 2), (1, 3)]
    assert look_points(schedule, 3)[1].level == pytest.approx(schedule.level_at(1))
    assert [(p.look, p.rounds) for p in look_points(schedule, 1)] == [(0, 1)]


# -- the table and the estimate --------------------------------------------------------------------------------


def test_each_rounds_ratio_is_of_totals_over_the_frozen_items() -> None:
    base = side([[1.0, 2.0, 1.0, 2.0], [1.1, 2.2, 1.1, 2.2]])
    cand = side([[0.5, 1.0, 0.5, 1.0], [0.5, 1.0, 0.5, 1.0]])
    table = round_table(base, cand)
    assert table.rounds == (0, 1) and table.items == ITEMS
    assert np.exp(table.log_ratios("throughput")) == pytest.approx([2.0, 2.2])
    m = metric_rounds(table, "throughput")
    estimate = estimate_metric(m, table, key="p", level=0.95, estimand="frozen_prompts")
    assert estimate.point == pytest.approx(math.sqrt(2.0 * 2.2))  # the rounds' geometric mean
    assert estimate.candidate_value is not None and estimate.baseline_value is not None
    assert estimate.candidate_value / estimate.baseline_value == pytest.approx(estimate.point)


def test_two_rounds_give_a_t_interval_on_one_degree_of_freedom() -> None:
    base = side([[1.0] * 4, [1.0] * 4])
    cand = side([[0.5] * 4, [0.55] * 4])
    est = pair_estimate(base, cand, level=0.95)
    y = np.log([2.0, 1.0 / 0.55])
    se = float(np.std(y, ddof=1)) / math.sqrt(2)
    reach = float(scipy_stats.t.ppf(0.975, 1)) * se
    assert (est.df, est.variance_source, est.launch_variance_included) == (1.0, "pair", True)
    assert (est.low, est.high) == pytest.approx((math.exp(y.mean() - reach), math.exp(y.mean() + reach)))
    assert est.rerun_high == pytest.approx(math.exp(y.mean() + math.sqrt(2) * reach))


def test_one_round_has_only_the_items_variance_and_says_so() -> None:
    base = side([[1.0, 2.0, 1.5, 1.2]])
    cand = side([[0.5, 1.2, 0.7, 0.6]])
    est = pair_estimate(base, cand, level=0.95)
    assert (est.variance_source, est.launch_variance_included, est.reason) == (
        "items_only",
        False,
        "one_round_items_only",
    )
    assert est.df == 3.0
    interval = est.interval()
    assert interval is not None and interval.launch_variance_included is False


def test_the_closed_form_item_variance_is_what_resampling_the_items_gives() -> None:
    # A diagnostic that can disagree: the linearised variance against a brute-force item bootstrap of the same
    # ratio of totals (they part ways when one item dominates the totals).
    rng = np.random.default_rng(3)
    base_s = rng.uniform(0.5, 2.0, 40)
    cand_s = base_s / rng.lognormal(math.log(1.5), 0.3, 40)
    items = [f"i{j}" for j in range(40)]

    def samples(seconds: np.ndarray) -> list[RequestSample]:
        return [
            RequestSample(item_id=i, repeat=0, completion_tokens=32, ttft_s=0.05, e2e_s=float(s), decode_s=float(s))
            for i, s in zip(items, seconds, strict=True)
        ]

    table = round_table(samples(base_s), samples(cand_s))
    closed = metric_rounds(table, "throughput").item_variance
    assert closed is not None
    draws = rng.integers(0, 40, size=(4000, 40))
    boot = np.log(base_s[draws].sum(1) / cand_s[draws].sum(1))
    assert closed / 40 == pytest.approx(float(np.var(boot)), rel=0.1)
    skewed = base_s.copy()
    skewed[0] = 400.0  # one item holds most of the time: the linearisation no longer describes the resampling
    table = round_table(samples(skewed), samples(skewed / 1.5 * np.r_[3.0, np.ones(39)]))
    closed = metric_rounds(table, "throughput").item_variance
    boot = np.log(skewed[draws].sum(1) / (skewed / 1.5 * np.r_[3.0, np.ones(39)])[draws].sum(1))
    assert closed is not None and closed / 40 != pytest.approx(float(np.var(boot)), rel=0.1)


def test_the_traffic_estimand_adds_the_items_variance_to_the_rounds() -> None:
    base = side([[1.0, 2.0, 1.0, 2.0], [1.1, 2.1, 1.0, 2.2], [1.0, 2.0, 1.1, 2.0]])
    cand = side([[0.4, 1.6, 0.5, 1.5], [0.45, 1.7, 0.5, 1.6], [0.4, 1.6, 0.55, 1.5]])
    frozen = pair_estimate(base, cand, level=0.95)
    traffic = pair_estimate(base, cand, level=0.95, estimand="traffic")
    assert frozen.point == traffic.point
    assert traffic.item_variance is not None and traffic.item_variance > 0
    assert traffic.se_log is not None and frozen.se_log is not None and traffic.se_log > frozen.se_log


def test_a_round_left_out_is_named_and_the_rest_still_pair() -> None:
    base = side([[1.0] * 4, [1.0] * 4, [1.0] * 4])
    cand = side([[0.5] * 4, [0.9] * 4, [0.52] * 4])
    table = round_table(base, cand, exclude={1: "baseline: host busy"})
    assert table.rounds == (0, 2) and dict(table.excluded_rounds) == {1: "baseline: host busy"}
    assert round_table(base, cand[:8]).unpaired_rounds == (2,)


def test_an_item_missing_from_one_round_is_dropped_so_every_round_sums_the_same_items() -> None:
    base = side([[1.0] * 4, [1.0] * 4])
    cand = [s for s in side([[0.5] * 4, [0.5] * 4]) if not (s.launch == 1 and s.item_id == "d")]
    table = round_table(base, cand)
    assert table.items == ("a", "b", "c") and table.dropped_items == ("d",)


# -- pooling ---------------------------------------------------------------------------------------------------


def _rounds(y: list[float]) -> list[list[float]]:
    return [[math.exp(-v)] * 4 for v in y]


def _pool(
    y1: list[float], y2: list[float], blocks: dict[str, tuple[str, str, str]] | None = None
) -> tuple[dict[str, RoundTable], dict[str, MetricRounds], VariancePool]:
    tables = {
        "c/w1": round_table(side([[1.0] * 4] * len(y1)), side(_rounds(y1))),
        "c/w2": round_table(side([[1.0] * 4] * len(y2)), side(_rounds(y2))),
    }
    per = {k: metric_rounds(t, "throughput") for k, t in tables.items()}
    return tables, per, pool_variances("throughput", per, blocks=blocks)


def test_alike_pairs_whose_rounds_move_independently_pool_their_variances_and_degrees_of_freedom() -> None:
    tables, per, pool = _pool([0.50, 0.55, 0.45], [0.90, 0.86, 0.94])  # residuals that do not move together
    assert pool.homogeneous and pool.pooled_df == 4 and pool.effective_df == pytest.approx(4.0)
    assert pool.pooled_variance == pytest.approx(np.mean([per[k].round_variance for k in per]))
    est = estimate_metric(per["c/w1"], tables["c/w1"], key="c/w1", level=0.95, estimand="frozen_prompts", pool=pool)
    assert (est.variance_source, est.df, est.variance_used) == ("pooled", 4.0, pytest.approx(pool.pooled_variance))


def test_pairs_whose_rounds_move_together_count_the_launches_they_share_as_fewer_degrees_of_freedom() -> None:
    # The diagnostic can disagree: two scenarios of one candidate share its launches and their per-round ratios
    # move together, so their four residual degrees of freedom carry little more than one pair's two.
    tables, per, pool = _pool([0.50, 0.55, 0.45], [0.90, 0.96, 0.85])
    assert pool.homogeneous and pool.pooled_df == 4
    assert pool.shared_correlation["round"] > 0.9 and 2.0 <= pool.effective_df < 2.3
    est = estimate_metric(per["c/w1"], tables["c/w1"], key="c/w1", level=0.95, estimand="frozen_prompts", pool=pool)
    assert est.df == pytest.approx(pool.effective_df)
    # The same numbers from two tracks' pairs: nothing shared, every degree of freedom counts.
    apart = {"c/w1": ("b1", "c", "w1"), "c/w2": ("b2", "d", "w2")}
    assert _pool([0.50, 0.55, 0.45], [0.90, 0.96, 0.85], apart)[2].effective_df == pytest.approx(4.0)


def test_a_pair_whose_variance_is_clearly_larger_keeps_its_own_and_a_smaller_one_never_goes_below_the_pool() -> None:
    _, per, pool = _pool([0.50, 0.501, 0.499, 0.5005], [0.9, 1.3, 0.6, 1.1])
    assert pool.bartlett_p is not None and pool.bartlett_p < 0.05 and not pool.homogeneous
    assert pool.variance_for("c/w2") == (pytest.approx(per["c/w2"].round_variance), 3.0, "pair")
    variance, _, source = pool.variance_for("c/w1") or (0.0, 0.0, "")
    assert source == "pooled" and variance == pytest.approx(pool.pooled_variance)
    assert variance > 100 * (per["c/w1"].round_variance or 0.0)


# -- looks -----------------------------------------------------------------------------------------------------


def decision(
    kind: Decision, reason: str, *, low: float = 1.0, high: float = 1.3, failed: tuple[str, ...] = ()
) -> DecisionResult:
    interval = SpeedupInterval(low=low, high=high, level=0.95, method="m", launch_variance_included=True)
    return DecisionResult(
        decision=kind,
        reason=reason,
        policy=Thresholds(),
        checks={"max_peak_memory_mb": None},
        confidence=Confidence(interval=interval),
        evidence_status=EvidenceStatus.COMPARABLE,
        failed_checks=failed,
    )


@pytest.mark.parametrize(
    ("result", "state"),
    [
        (decision(Decision.ACCEPT, "meets_thresholds", low=1.2), "accepted"),
        (decision(Decision.REJECT, "quality_failed"), "cannot_accept"),
        (decision(Decision.TUNE, "below_min_speedup", low=0.8, high=1.05), "cannot_accept"),
        (decision(Decision.TUNE, "ttft_mean_regression", failed=("ttft_mean_gate",)), "cannot_accept"),
        (decision(Decision.TUNE, "insufficient_confidence"), "open"),
        (decision(Decision.TUNE, "ttft_regression", low=1.2), "open"),
        (decision(Decision.TUNE, "no_launch_replication", low=1.2), "open"),
        (decision(Decision.TUNE, "net_slowdown", low=0.9, high=1.12), "open"),
    ],
)
def test_a_pair_is_settled_only_when_more_rounds_cannot_make_it_an_accept(result: DecisionResult, state: str) -> None:
    assert pair_state(result)[0] == state


def _look(candidate: str, state: PairState) -> PairLook:
    return PairLook(
        candidate=candidate,
        scenario="w",
        state=state,
        why="",
        decision="tune",
        reason="r",
        look=0,
        rounds=3,
        level=0.95,
    )


def test_a_candidate_with_an_open_pair_runs_to_the_next_look() -> None:
    schedule = LookSchedule.of_level((3, 5), 0.95)
    looks = [_look("c1", "open"), _look("c1", "accepted"), _look("c2", "cannot_accept")]
    plan = plan_rounds(looks, ("c1", "c2"), schedule, 3)
    assert (plan.look, plan.continuing, plan.next_rounds, plan.stop) == (0, ("c1",), 5, None)
    last = plan_rounds(looks, ("c1", "c2"), schedule, 5)
    assert (last.continuing, last.stop) == ((), "the last look was taken")
    settled = plan_rounds(looks[1:], ("c1", "c2"), schedule, 3)
    assert (settled.continuing, settled.stop) == ((), "every pair is settled")
    between = plan_rounds(looks, ("c1", "c2"), schedule, 4)
    assert (between.look, between.continuing, between.next_rounds) == (None, ("c1", "c2"), 5)


def test_a_pair_keeps_its_first_accepting_looks_decision_else_its_last() -> None:
    accept, tune = decision(Decision.ACCEPT, "meets_thresholds", low=1.2), decision(Decision.TUNE, "x")
    assert deciding_look({0: tune, 1: accept, 2: tune}) == 1
    assert deciding_look({0: tune, 1: tune}) == 1


# -- drift -----------------------------------------------------------------------------------------------------


def test_a_ratio_that_climbs_every_round_is_flagged_and_noise_is_not() -> None:
    climbing = drift_check("throughput", (0, 1, 2, 3), (0.10, 0.15, 0.20, 0.25), 0.0004, 6.0)
    assert climbing is not None and climbing.flagged and climbing.slope_per_round == pytest.approx(0.05)
    noisy = drift_check("throughput", (0, 1, 2, 3), (0.10, 0.16, 0.09, 0.14), 0.0004, 6.0)
    assert noisy is not None and not noisy.flagged
    assert drift_check("throughput", (0, 1), (0.1, 0.2), 0.0004, 6.0) is None  # two rounds: no slope test


def test_a_pool_from_an_older_evidence_document_reads_and_counts_its_pairs_as_before() -> None:
    # Estimate schema 1 wrote no effective df: such a pool still reads, with the df it was decided on.
    old = {
        "metric": "throughput",
        "members": ["c/w1", "c/w2"],
        "variances": [0.01, 0.012],
        "dfs": [2, 2],
        "pooled_variance": 0.011,
        "pooled_df": 4,
        "bartlett_statistic": 0.02,
        "bartlett_p": 0.9,
        "homogeneous": True,
    }
    pool = VariancePool.model_validate(old)
    assert pool.effective_df is None and pool.shared_correlation == {}
    assert pool.variance_for("c/w1") == (0.011, 4.0, "pooled")
