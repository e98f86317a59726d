"""Under the traffic estimand a pair says how many prompts its decision needs, from its per-prompt spread."""

from __future__ import annotations

import math

from specselect._evidence.rounds.estimate import pair_estimate, t_quantile, with_prompts_needed
from specselect._evidence.samples import RequestSample
from specselect.records.evidence.rounds import ESTIMAND_STATEMENTS, RoundEstimate, estimand_statement


def side(seconds: list[list[float]]) -> list[RequestSample]:
    """One sample per (round, item): `seconds[r][i]` is item i's request time in round r."""
    return [
        RequestSample(item_id=f"i{i}", repeat=r, launch=r, completion_tokens=32, ttft_s=0.1, e2e_s=s, decode_s=s - 0.1)
        for r, row in enumerate(seconds)
        for i, s in enumerate(row)
    ]


def traffic(base: list[list[float]], cand: list[list[float]]) -> RoundEstimate:
    return pair_estimate(side(base), side(cand), level=0.95, estimand="traffic")


BASE = [[2.0, 2.0, 2.0, 2.0, 2.0, 2.0]] * 3


def test_prompts_that_gain_alike_are_enough_for_a_clear_speedup() -> None:
    cand = [[1.0, 1.02, 0.98, 1.0, 1.01, 0.99], [1.01, 1.0, 0.99, 1.02, 1.0, 0.98], [0.99, 1.0, 1.01, 0.99, 1.0, 1.0]]
    got = with_prompts_needed(traffic([[2.0] * 6, [2.02] * 6, [1.98] * 6], cand), 1.10)
    assert got.prompts_verdict == "enough"
    assert got.prompts_needed is not None and got.prompts_needed <= got.n_items


def test_prompts_that_gain_very_differently_are_too_few_and_the_number_closes_the_interval() -> None:
    # Two prompts gain 4x, four gain nothing: a 1.5x ratio of totals whose prompts disagree wildly.
    row = [0.5, 0.5, 2.0, 2.0, 2.0, 2.0]
    cand = [row, [v * 1.01 for v in row], [v * 0.99 for v in row]]
    est = traffic([[2.0] * 6, [2.0] * 6, [2.0] * 6], cand)
    got = with_prompts_needed(est, 1.10)
    assert got.prompts_verdict == "more_prompts"
    assert got.prompts_needed is not None and got.prompts_needed > got.n_items
    assert est.point is not None and est.item_variance is not None and est.variance_used is not None
    # At the number it gives, the interval (launch part as measured) no longer reaches 1.10; one fewer still does.
    distance = math.log(est.point / 1.10) / t_quantile(est.level, est.df)
    launch = est.variance_used / len(est.rounds)
    assert launch + est.item_variance / got.prompts_needed < distance**2
    assert launch + est.item_variance / (got.prompts_needed - 1) >= distance**2


def test_when_the_launches_alone_keep_the_interval_across_the_minimum_it_asks_for_rounds() -> None:
    base = [[2.0] * 6, [2.0] * 6, [2.0] * 6]
    cand = [[1.5] * 6, [1.9] * 6, [1.6] * 6]  # ~1.2x, rounds far apart, prompts alike
    got = with_prompts_needed(traffic(base, cand), 1.10)
    assert got.prompts_verdict == "more_rounds"
    assert got.prompts_needed is None


def test_the_frozen_prompts_estimand_says_nothing_about_prompts() -> None:
    row = [0.5, 0.5, 2.0, 2.0, 2.0, 2.0]
    est = pair_estimate(side(BASE), side([row, row, row]), level=0.95)
    assert with_prompts_needed(est, 1.10).prompts_verdict is None


def test_each_estimand_is_stated_in_its_own_sentence() -> None:
    assert set(ESTIMAND_STATEMENTS) == {"traffic", "frozen_prompts"}
    assert "deployment's traffic" in estimand_statement("traffic")
    assert "these frozen prompts only" in estimand_statement("frozen_prompts")
