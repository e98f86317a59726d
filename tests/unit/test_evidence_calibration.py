"""The decision rule's error rates on seeded simulated runs with a known truth (`evidence.calibration`): a
regression in coverage, false accepts or power fails here; the full table is benchmarks/RESULTS.md section 7."""

from __future__ import annotations

from specselect._evidence.calibration import CalibrationCase, NoiseModel, simulate_case

RUNS = 250
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
