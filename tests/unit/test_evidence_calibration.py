"""The decision rule's error rates on seeded simulated runs with a known truth (`evidence.calibration`): a
regression in coverage, false accepts or power fails here; the full table is benchmarks/RESULTS.md section 7."""

from __future__ import annotations

import numpy as np

from specselect._evidence.calibration import CalibrationCase, NoiseModel, draw_prompts, launch_effects, simulate_case

RUNS = 120
HOST = NoiseModel(launch_sd=0.06, round_correlation=0.7)
"""The issue's reference host: 6 % launch noise, adjacent launches correlated 0.7."""


def test_at_the_threshold_the_sequential_rule_accepts_at_most_its_error_budget() -> None:
    result = simulate_case(CalibrationCase(speedup=1.10, noise=HOST, looks=(3, 4)), RUNS, seed=11)
    # Nominal 2.5 % one-sided over both looks; 5 % leaves room for 500 pairs' sampling error, not for a regression.
    assert result.accept_rate <= 0.05
    assert result.mean_rounds > 3.5  # nearly every run takes the second look


def test_a_true_quarter_faster_candidate_is_accepted_and_an_unchanged_ttft_passes() -> None:
    result = simulate_case(CalibrationCase(speedup=1.25, noise=HOST, looks=(3, 4)), RUNS, seed=12)
    assert result.accept_rate >= 0.80
    assert result.ttft_pass_rate >= 0.90


def test_the_interval_covers_the_truth_at_its_level_under_independent_launch_noise() -> None:
    result = simulate_case(
        CalibrationCase(speedup=1.5, noise=NoiseModel(launch_sd=0.10, round_correlation=0.0), looks=(3,)),
        RUNS,
        seed=13,
    )
    assert 0.91 <= result.coverage <= 0.98
    assert max(result.miss_low, result.miss_high) <= 0.05


def test_one_round_cannot_cover_launch_noise_and_is_never_accepted() -> None:
    # The check can fail: one round's interval holds the items' variation only, and misses the truth far more
    # often than its level says once launches differ -- the reason such an interval cannot give an accept.
    result = simulate_case(
        CalibrationCase(speedup=1.5, noise=NoiseModel(launch_sd=0.10, round_correlation=0.0), looks=(1,)),
        RUNS,
        seed=14,
    )
    assert result.coverage < 0.80
    assert result.accept_rate == 0.0


def test_population_truth_is_the_traffics_ratio_and_the_frozen_prompts_own_ratio_differs_from_it() -> None:
    rng = np.random.default_rng(21)
    population = CalibrationCase(speedup=1.25, noise=HOST, truth="population", item_speedup_sd=0.4)
    # Many prompts drawn from the population: their ratio of totals is the truth.
    assert abs(draw_prompts(population.model_copy(update={"items": 200_000}), rng).own_ratio / 1.25 - 1) < 0.01
    # Eight of them: their own ratio is off the truth by their sampling; the frozen truth is theirs exactly.
    eight = [draw_prompts(population, rng).own_ratio for _ in range(50)]
    assert np.mean(np.abs(np.log(np.array(eight) / 1.25))) > 0.05
    frozen = population.model_copy(update={"truth": "frozen_prompts"})
    assert abs(draw_prompts(frozen, rng).own_ratio - 1.25) < 1e-9


def test_heavy_tailed_launches_are_outliers_and_drift_slows_later_launches() -> None:
    rng = np.random.default_rng(22)
    plain = CalibrationCase(speedup=1.0, noise=NoiseModel(launch_sd=0.06, round_correlation=0.0), pairs=1)
    tailed = plain.model_copy(update={"noise": plain.noise.model_copy(update={"heavy_tail_share": 0.15})})
    beyond = [float(np.mean(launch_effects(c, rng, 400) > 2.5 * 0.06)) for c in (plain, tailed)]
    assert beyond[0] < 0.02 and beyond[1] > 0.07  # ~0.6 % of Gaussian launches, ~10 % with the tail
    drifting = plain.model_copy(update={"noise": NoiseModel(launch_sd=0.0, drift_per_launch=0.02)})
    effects = launch_effects(drifting, rng, 4)[:, :, 0]
    assert effects[3].min() > effects[0].max()  # every launch of round 3 slower than any of round 0


def test_the_default_estimand_misses_the_traffics_speedup_when_prompts_differ() -> None:
    # The check can fail: with the truth the population's and prompts whose gains differ (sd of log 0.4), the
    # frozen prompts' interval covers the traffic's speedup far less often than its level.
    case = CalibrationCase(speedup=1.10, noise=HOST, truth="population", item_speedup_sd=0.4, looks=(3, 4))
    result = simulate_case(case, 60, seed=23)
    assert result.coverage < 0.80
    assert result.frozen_truth_gap > 0.05


def test_under_the_traffic_estimand_prompts_that_differ_widely_are_stated_as_too_few_and_not_accepted() -> None:
    # Spread 0.4 at a true 1.25x with 8 prompts: the run says it needs more prompts than it has for most pairs,
    # and those pairs stay unaccepted; with prompts that gain alike (spread 0.05) it rarely asks for more.
    wide = CalibrationCase(
        speedup=1.25, noise=HOST, truth="population", estimand="traffic", item_speedup_sd=0.4, looks=(3, 4)
    )
    got = simulate_case(wide, 40, seed=31)
    assert got.prompts_needed_median is not None and got.prompts_needed_median > wide.items
    assert got.short_of_prompts > 0.4
    assert got.accept_rate <= 1.0 - got.short_of_prompts
    alike = simulate_case(wide.model_copy(update={"item_speedup_sd": 0.05, "speedup": 1.5}), 40, seed=31)
    assert alike.short_of_prompts < 0.1
