"""Launch replication: the two-stage (launch, then item) bootstrap, its components and its reduction to one launch."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest

from specselect.core.decision import LATENCY_CHECKS, SpeedupInterval
from specselect.evidence.replication import (
    ReplicationPolicy,
    build_cells,
    replicated_latency_ratios,
    replicated_quantile_ratio,
    replicated_speedup,
)
from specselect.evidence.samples import RequestSample, pair_by_launch, pair_requests
from specselect.evidence.stats import BootstrapPolicy, e2e_rate, throughput_speedup

FAST = BootstrapPolicy(n_resamples=300)
ITEM_SD = 0.1
TRUE_SPEEDUP = 1.3 * math.exp(-(ITEM_SD**2) / 2)
"""The population ratio of totals: per-item candidate effects are log-normal, so the mean effect is exp(sd^2/2)."""


def world(
    seed: int, *, launches: tuple[int, int] = (2, 2), launch_sd: float = 0.05, n_items: int = 8, repeats: int = 2
) -> tuple[list[RequestSample], list[RequestSample]]:
    """Items of varied length and difficulty, a per-item candidate effect, a log-normal effect per launch."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(40, 200, n_items)
    difficulty = rng.lognormal(0.0, 0.3, n_items)
    effect = rng.lognormal(0.0, ITEM_SD, n_items)
    sides: list[list[RequestSample]] = [[], []]
    for side, (n_launches, speedup) in enumerate(zip(launches, (1.0, 1.3), strict=True)):
        for launch in range(n_launches):
            launch_effect = float(rng.lognormal(0.0, launch_sd))
            for i in range(n_items):
                item_effect = float(effect[i]) if side == 1 else 1.0
                for repeat in range(repeats):
                    noise = float(rng.lognormal(0.0, 0.03))
                    seconds = float(tokens[i]) / 30.0 * float(difficulty[i]) * launch_effect * item_effect * noise
                    sides[side].append(
                        RequestSample(
                            item_id=f"item{i}",
                            repeat=repeat,
                            launch=launch,
                            completion_tokens=int(tokens[i]),
                            e2e_s=seconds / speedup,
                        )
                    )
    return sides[0], sides[1]


def sample(item: str, launch: int, tokens: int, seconds: float, repeat: int = 0) -> RequestSample:
    return RequestSample(item_id=item, repeat=repeat, launch=launch, completion_tokens=tokens, e2e_s=seconds)


def test_one_launch_per_side_is_exactly_todays_item_cluster_bootstrap() -> None:
    base, cand = world(3, launches=(1, 1))
    replicated = replicated_speedup(base, cand, FAST)
    today = throughput_speedup(pair_requests(base, cand).pairs, FAST)
    assert (replicated.point, replicated.low, replicated.high) == (today.point, today.low, today.high)
    assert replicated.method == today.method == "paired_cluster_bootstrap_percentile"
    assert replicated.statistic == today.statistic
    assert replicated.launch_variance_included is False
    assert replicated.launch_note == "one launch per side: launch-to-launch variation is not in the interval"
    assert replicated.components is not None
    assert replicated.components.launch_baseline_source == replicated.components.launch_candidate_source
    assert replicated.components.launch_candidate_source == "not_included"
    assert replicated.components.launch_baseline == replicated.components.launch_candidate == 0.0
    assert replicated.components.launch_share == 0.0


def test_point_is_the_ratio_of_totals_pooled_over_launches_by_hand() -> None:
    base = [sample("a", 0, 100, 4.0), sample("b", 0, 50, 1.0), sample("a", 1, 100, 5.0), sample("b", 1, 50, 2.0)]
    cand = [sample("a", 0, 100, 2.0), sample("b", 0, 50, 1.0), sample("a", 1, 100, 2.5), sample("b", 1, 50, 1.5)]
    est = replicated_speedup(base, cand, FAST)
    assert est.point == pytest.approx((300 / 7.0) / (300 / 12.0))
    assert est.baseline_tokens_per_s == pytest.approx(300 / 12.0)
    assert est.candidate_tokens_per_s == pytest.approx(300 / 7.0)
    assert est.launch_rates_baseline == pytest.approx((150 / 5.0, 150 / 7.0))
    assert est.launch_rates_candidate == pytest.approx((150 / 3.0, 150 / 4.0))
    assert (est.launches_baseline, est.launches_candidate) == ((0, 1), (0, 1))
    assert est.reason == "too_few_clusters"
    assert est.low is None


def test_candidate_rate_over_baseline_rate_is_the_point_shown() -> None:
    est = replicated_speedup(*world(5), FAST)
    assert est.candidate_tokens_per_s is not None
    assert est.baseline_tokens_per_s is not None
    assert est.candidate_tokens_per_s / est.baseline_tokens_per_s == pytest.approx(est.point, rel=1e-12)
    assert est.low is not None
    assert est.high is not None
    assert est.point is not None
    assert est.low < est.point < est.high


def pooled_one_stage_width(base: list[RequestSample], cand: list[RequestSample]) -> float:
    pairs = [p for block in pair_by_launch(base, cand) for p in block.pairs]
    est = throughput_speedup(pairs, FAST)
    assert est.low is not None
    assert est.high is not None
    return math.log(est.high / est.low)


def test_two_stage_interval_is_wider_than_the_item_only_interval_when_launches_differ() -> None:
    base, cand = world(11, launch_sd=0.08)
    est = replicated_speedup(base, cand, FAST)
    assert est.low is not None
    assert est.high is not None
    assert est.method == "two_stage_bootstrap_t"
    assert est.launch_variance_included is True
    assert math.log(est.high / est.low) > 2 * pooled_one_stage_width(base, cand)


def coverage(interval: Literal["t", "percentile"], n_worlds: int = 120) -> tuple[float, float]:
    """Share of seeded worlds whose interval covers the true ratio: two-stage and pooled one-stage."""
    two = one = 0
    policy = BootstrapPolicy(n_resamples=200)
    for seed in range(n_worlds):
        base, cand = world(seed)
        est = replicated_speedup(base, cand, policy, ReplicationPolicy(interval=interval))
        assert est.low is not None
        assert est.high is not None
        two += est.low <= TRUE_SPEEDUP <= est.high
        pooled = throughput_speedup([p for b in pair_by_launch(base, cand) for p in b.pairs], policy)
        assert pooled.low is not None
        assert pooled.high is not None
        one += pooled.low <= TRUE_SPEEDUP <= pooled.high
    return two / n_worlds, one / n_worlds


def test_two_stage_t_interval_covers_the_true_ratio_at_about_the_nominal_rate_with_two_launches() -> None:
    two_stage, one_stage = coverage("t")
    assert 0.88 <= two_stage <= 0.99
    # Ignoring launches claims far more certainty than the data carry.
    assert one_stage < 0.8


def test_percentile_mode_takes_the_two_stage_replicates_quantiles() -> None:
    est = replicated_speedup(*world(2), FAST, ReplicationPolicy(interval="percentile"))
    assert est.method == "two_stage_bootstrap_percentile"
    assert est.low is not None
    assert est.high is not None
    assert est.point is not None
    assert est.low < est.point < est.high


def test_components_put_launch_effects_between_launches_and_item_effects_within() -> None:
    # Same launches, per-item candidate effects: all variance is within launches (items).
    base = [sample(f"i{i}", j, 100, 1.0) for i in range(6) for j in (0, 1)]
    cand = [sample(f"i{i}", j, 100, 0.5 + 0.1 * i) for i in range(6) for j in (0, 1)]
    within = replicated_speedup(base, cand, FAST).components
    # Same items, a 20% slower second candidate launch: all variance is between launches.
    cand = [sample(f"i{i}", j, 100, 0.5 * (1.2 if j else 1.0)) for i in range(6) for j in (0, 1)]
    between = replicated_speedup(base, cand, FAST).components
    assert within is not None
    assert between is not None
    assert within.items > 0
    assert within.launch_baseline == within.launch_candidate == pytest.approx(0.0, abs=1e-12)
    assert within.launch_share == pytest.approx(0.0, abs=1e-9)
    assert between.items == pytest.approx(0.0, abs=1e-12)
    assert between.launch_share == pytest.approx(1.0)
    assert between.launch_baseline_source == between.launch_candidate_source == "resampled"
    assert (between.df_items, between.df_launches) == (5, 2)
    # Both sides' launch deviations estimate one machine-level launch variance: sum(L - 1) = 2 df.
    assert between.df_effective == pytest.approx(2.0)


def test_rao_wu_launch_stage_with_two_launches_has_the_unbiased_variance() -> None:
    # Two baseline launches whose log rates differ by d: var of their mean is d^2 / 4 (Rao-Wu), not d^2 / 8 (naive).
    base = [sample(f"i{i}", launch, 100, 1.0 if launch == 0 else 1.2) for i in range(4) for launch in (0, 1)]
    cand = [sample(f"i{i}", launch, 100, 0.5) for i in range(4) for launch in (0, 1)]
    components = replicated_speedup(base, cand, BootstrapPolicy(n_resamples=4000)).components
    assert components is not None
    assert components.launch_baseline == pytest.approx(math.log(1.2) ** 2 / 4, rel=0.1)
    assert components.launch_candidate == pytest.approx(0.0, abs=1e-12)
    assert components.items == pytest.approx(0.0, abs=1e-12)


def test_a_side_measured_once_borrows_the_other_sides_launch_variance() -> None:
    base, cand = world(8, launches=(2, 1))
    est = replicated_speedup(base, cand, FAST)
    assert est.components is not None
    assert est.components.launch_candidate_source == "imputed"
    assert est.components.launch_candidate == pytest.approx(est.components.launch_baseline * 2)
    assert est.launch_variance_included is True
    alone = replicated_speedup(base, cand, FAST, ReplicationPolicy(assume_equal_launch_variance=False))
    assert alone.components is not None
    assert alone.components.launch_candidate_source == "not_included"
    assert alone.launch_variance_included is False
    assert alone.launch_note == "one side's launch variance is not included"


def test_an_item_missing_from_one_launch_is_dropped_so_every_launch_sums_the_same_items() -> None:
    base, cand = world(6)
    cand = [s for s in cand if not (s.item_id == "item3" and s.launch == 1)]
    cand.append(sample("item2", 1, 0, 1.0, repeat=5))
    est = replicated_speedup(base, cand, FAST)
    assert est.n_items == 7
    assert est.dropped_items == ("item3",)
    assert est.n_unusable_requests == 1
    cells = build_cells(base, cand, e2e_rate)
    assert cells.baseline.tokens.shape == cells.candidate.tokens.shape == (2, 7)


def test_no_usable_requests_gives_no_point_and_says_why() -> None:
    base = [sample("a", j, 0, 1.0) for j in (0, 1)]
    est = replicated_speedup(base, base, FAST)
    assert (est.point, est.low, est.reason) == (None, None, "no_usable_pairs")


def test_reproducible_with_a_seed_whatever_the_input_order() -> None:
    base, cand = world(9)
    first = replicated_speedup(base, cand, FAST)
    assert replicated_speedup(list(reversed(base)), list(reversed(cand)), FAST) == first
    other = replicated_speedup(
        base, cand, BootstrapPolicy(n_resamples=300, seed=5), ReplicationPolicy(interval="percentile")
    )
    assert other.point == first.point
    assert other.policy.seed == 5


def test_a_rerun_interval_reaches_sqrt_two_times_as_far_on_the_log_scale() -> None:
    est = replicated_speedup(*world(10), FAST)
    assert None not in (est.point, est.low, est.high, est.rerun_low, est.rerun_high)
    assert est.point is not None
    assert est.low is not None
    assert est.rerun_low is not None
    assert math.log(est.point / est.rerun_low) == pytest.approx(math.sqrt(2) * math.log(est.point / est.low))


def test_bca_is_noted_when_asked_for_across_launches_and_the_interval_feeds_the_decision() -> None:
    est = replicated_speedup(*world(12), BootstrapPolicy(n_resamples=300, method="bca"))
    assert est.reason == "bca_not_available_across_launches"
    interval = est.speedup_interval()
    assert isinstance(interval, SpeedupInterval)
    assert (interval.low, interval.point, interval.high) == (est.low, est.point, est.high)
    assert interval.samples_per_repeat == 16
    assert interval.n_samples == 32


def _ttft_samples(per_launch: list[list[float]]) -> list[RequestSample]:
    """Launch j's TTFTs, one request per item in order (items item0, item1, ...)."""
    return [
        RequestSample(item_id=f"item{i}", repeat=0, launch=j, completion_tokens=32, ttft_s=value, e2e_s=1.0)
        for j, values in enumerate(per_launch)
        for i, value in enumerate(values)
    ]


def test_the_latency_ratio_is_the_ratio_of_the_pooled_p95s() -> None:
    base = _ttft_samples([[0.10 + 0.01 * i for i in range(8)], [0.11 + 0.01 * i for i in range(8)]])
    cand = _ttft_samples([[0.12 + 0.01 * i for i in range(8)], [0.09 + 0.01 * i for i in range(8)]])
    est = replicated_quantile_ratio(
        "ttft_ratio", "ttft_s", 0.95, base, cand, policy=FAST, replication=ReplicationPolicy()
    )
    pooled = [s.ttft_s for s in cand], [s.ttft_s for s in base]
    assert est.point == pytest.approx(float(np.quantile(pooled[0], 0.95) / np.quantile(pooled[1], 0.95)))
    assert est.statistic == "ratio_of_p95(ttft_s)" and est.method == "two_stage_bootstrap_t"
    assert (est.n_samples, est.n_clusters, est.n_dropped) == (16, 8, 0)


def test_a_launch_effect_on_ttft_widens_the_latency_interval() -> None:
    rng = np.random.default_rng(3)
    base_values = [list(0.1 * rng.lognormal(0, 0.05, 8)) for _ in range(2)]
    cand_values = [list(0.1 * rng.lognormal(0, 0.05, 8)) for _ in range(2)]
    shifted = [[v * 0.85 for v in cand_values[0]], [v * 1.15 for v in cand_values[1]]]  # a launch effect
    args = {"policy": FAST, "replication": ReplicationPolicy()}
    base = _ttft_samples(base_values)
    calm = replicated_quantile_ratio("ttft_ratio", "ttft_s", 0.95, base, _ttft_samples(cand_values), **args)
    split = replicated_quantile_ratio("ttft_ratio", "ttft_s", 0.95, base, _ttft_samples(shifted), **args)
    assert calm.low is not None and calm.high is not None and split.low is not None and split.high is not None
    assert math.log(split.high / split.low) > 2 * math.log(calm.high / calm.low)


def test_latency_ratios_are_keyed_by_the_decisions_latency_checks() -> None:
    base = _ttft_samples([[0.1] * 4, [0.1] * 4])
    ratios = replicated_latency_ratios(base, base, policy=FAST, replication=ReplicationPolicy())
    assert tuple(ratios) == LATENCY_CHECKS
    assert [r.statistic for r in ratios.values()] == ["ratio_of_p95(ttft_s)", "ratio_of_p95(e2e_s)"]
    assert all(r.point == pytest.approx(1.0) for r in ratios.values())
