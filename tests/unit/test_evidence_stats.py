"""Paired statistics: cluster-bootstrap intervals, reproducibility, shrinking with n, degenerate inputs."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from specselect._core.decision import SpeedupInterval
from specselect._evidence.bootstrap import cluster_ids, weighted_quantile
from specselect._evidence.samples import RequestPair, RequestSample, pair_requests
from specselect._evidence.stats import (
    decode_speedup,
    e2e_quantile_ratio,
    mean_per_sample_speedup,
    pair_ratios,
    paired_stats,
    throughput_speedup,
    ttft_quantile_ratio,
)
from specselect.records.evidence.stats import BootstrapPolicy, PairedStats

FAST = BootstrapPolicy(n_resamples=500)


def synthetic_pairs(n_items: int, repeats: int = 3, speedup: float = 1.5, seed: int = 7) -> list[RequestPair]:
    """Items of varied length and difficulty; the candidate is `speedup` x faster with per-request noise."""
    rng = np.random.default_rng(seed)
    base: list[RequestSample] = []
    cand: list[RequestSample] = []
    for i in range(n_items):
        tokens = int(rng.integers(40, 200))
        difficulty = float(rng.lognormal(0.0, 0.3))
        for r in range(repeats):
            t_base = tokens / 30.0 * difficulty * float(rng.lognormal(0.0, 0.05))
            t_cand = t_base / speedup * float(rng.lognormal(0.0, 0.1))
            ttft_b, ttft_c = 0.05 * float(rng.lognormal(0, 0.2)), 0.06 * float(rng.lognormal(0, 0.2))
            common = {"item_id": f"item{i:03d}", "repeat": r, "completion_tokens": tokens, "category": "x"}
            base.append(RequestSample(**common, ttft_s=ttft_b, e2e_s=ttft_b + t_base, decode_s=t_base))
            cand.append(RequestSample(**common, ttft_s=ttft_c, e2e_s=ttft_c + t_cand, decode_s=t_cand))
    return list(pair_requests(base, cand).pairs)


def pair(item: str, repeat: int, base: Mapping[str, object], cand: Mapping[str, object]) -> RequestPair:
    return RequestPair(
        item_id=item,
        repeat=repeat,
        baseline=RequestSample.model_validate({"item_id": item, "repeat": repeat, **base}),
        candidate=RequestSample.model_validate({"item_id": item, "repeat": repeat, **cand}),
    )


def test_throughput_speedup_is_ratio_of_totals_by_hand() -> None:
    pairs = [
        pair("a", 0, {"completion_tokens": 100, "e2e_s": 4.0}, {"completion_tokens": 100, "e2e_s": 2.0}),
        pair("b", 0, {"completion_tokens": 50, "e2e_s": 1.0}, {"completion_tokens": 50, "e2e_s": 1.0}),
        pair("c", 0, {"completion_tokens": 10, "e2e_s": 1.0}, {"completion_tokens": 10, "e2e_s": 0.5}),
    ]
    est = throughput_speedup(pairs, FAST)
    assert est.point == pytest.approx((160 / 3.5) / (160 / 6.0))
    assert est.statistic == "ratio_of_totals(tokens/e2e_s)"
    assert est.n_samples == 3
    assert est.n_clusters == 3
    assert est.n_dropped == 0
    assert est.low is not None
    assert est.high is not None
    assert est.point is not None
    assert est.low <= est.point <= est.high
    # Spec-Bench's mean of per-sample ratios differs from the ratio of totals.
    assert mean_per_sample_speedup(pairs, FAST).point == pytest.approx((2.0 + 1.0 + 2.0) / 3)


def test_decode_speedup_and_per_request_ratios() -> None:
    pairs = [
        pair(
            "a",
            0,
            {"completion_tokens": 101, "e2e_s": 5.0, "decode_s": 4.0},
            {"completion_tokens": 101, "e2e_s": 2.5, "decode_s": 1.0},
        )
    ]
    assert decode_speedup(pairs, FAST).point == pytest.approx(4.0)
    (ratio,) = pair_ratios(pairs)
    assert ratio.decode_speedup == pytest.approx(4.0)
    assert ratio.throughput_speedup == pytest.approx(2.0)
    assert ratio.e2e_ratio == pytest.approx(0.5)


def test_quantile_ratios_use_p95_by_default() -> None:
    pairs = synthetic_pairs(20)
    est = ttft_quantile_ratio(pairs, FAST)
    cand = np.array([p.candidate.ttft_s for p in pairs], dtype=float)
    base = np.array([p.baseline.ttft_s for p in pairs], dtype=float)
    assert est.point == pytest.approx(np.quantile(cand, 0.95) / np.quantile(base, 0.95))
    assert est.statistic == "ratio_of_p95(ttft_s)"
    median = e2e_quantile_ratio(pairs, BootstrapPolicy(n_resamples=500, e2e_quantile=0.5))
    assert median.statistic == "ratio_of_p50(e2e_s)"


def test_interval_covers_the_true_speedup_and_converts_to_core_interval() -> None:
    stats = paired_stats(synthetic_pairs(60, speedup=1.5))
    est = stats.throughput_speedup
    assert est.low is not None
    assert est.high is not None
    assert est.low < 1.5 < est.high
    interval = stats.speedup_interval
    assert isinstance(interval, SpeedupInterval)
    assert (interval.low, interval.high, interval.level) == (est.low, est.high, 0.95)
    assert interval.method == "paired_cluster_bootstrap_percentile"
    assert interval.launch_variance_included is False  # one launch's items: no launch-to-launch variation
    assert interval.point == est.point


def test_the_decision_interval_is_of_the_same_statistic_as_its_point() -> None:
    est = throughput_speedup(synthetic_pairs(12, speedup=1.2), FAST)
    interval = est.speedup_interval()
    assert interval is not None
    assert est.statistic == "ratio_of_totals(tokens/e2e_s)"
    assert (interval.low, interval.point, interval.high) == (est.low, est.point, est.high)


def test_intervals_shrink_with_more_samples() -> None:
    def width(n_items: int) -> float:
        est = throughput_speedup(synthetic_pairs(n_items, seed=3), FAST)
        assert est.low is not None
        assert est.high is not None
        return est.high - est.low

    small, medium, large = width(8), width(40), width(200)
    assert small > medium > large
    assert large < small / 2


def test_reproducible_with_a_seed_and_seed_is_recorded() -> None:
    pairs = synthetic_pairs(15)
    first, second = paired_stats(pairs, FAST), paired_stats(list(reversed(pairs)), FAST)
    assert first == second
    other = paired_stats(pairs, BootstrapPolicy(n_resamples=500, seed=99))
    assert other.throughput_speedup.point == first.throughput_speedup.point
    assert other.throughput_speedup.low != first.throughput_speedup.low
    assert other.throughput_speedup.seed == 99


def test_bca_interval() -> None:
    est = throughput_speedup(synthetic_pairs(30), BootstrapPolicy(n_resamples=1000, method="bca"))
    assert est.method == "paired_cluster_bootstrap_bca"
    assert est.low is not None
    assert est.high is not None
    assert est.point is not None
    assert est.low <= est.point <= est.high


def test_repeats_move_together_in_the_bootstrap() -> None:
    """Ten repeats of two items are two clusters, not twenty independent samples."""
    est = throughput_speedup(synthetic_pairs(2, repeats=10), FAST)
    assert est.n_samples == 20
    assert est.n_clusters == 2
    assert est.point is not None
    assert est.low is None
    assert est.reason == "too_few_clusters"
    assert est.speedup_interval() is None


def test_empty_input() -> None:
    stats = paired_stats([], FAST)
    assert stats.n_pairs == 0
    for est in (stats.throughput_speedup, stats.ttft_ratio, stats.e2e_p95_ratio, stats.decode_speedup):
        assert est.point is None
        assert est.low is None
        assert est.reason == "no_pairs"
    assert stats.speedup_interval is None


@pytest.mark.parametrize(
    "bad",
    [
        {"completion_tokens": 0, "e2e_s": 1.0, "ttft_s": 0.1, "decode_s": 0.9},
        {"completion_tokens": 10, "e2e_s": 0.0, "ttft_s": 0.0, "decode_s": 0.0},
        {"completion_tokens": 10, "e2e_s": float("nan"), "ttft_s": float("inf"), "decode_s": -1.0},
        {"completion_tokens": None, "e2e_s": None, "ttft_s": None, "decode_s": None},
    ],
)
def test_unusable_pairs_are_dropped_not_divided_by(bad: dict[str, object]) -> None:
    good = {"completion_tokens": 10, "e2e_s": 1.0, "ttft_s": 0.1, "decode_s": 0.9}
    pairs = [pair(f"i{i}", 0, good, good) for i in range(4)] + [pair("bad", 0, bad, good), pair("bad2", 0, good, bad)]
    stats = paired_stats(pairs, FAST)
    assert stats.throughput_speedup.n_samples == 4
    assert stats.throughput_speedup.n_dropped == 2
    assert stats.throughput_speedup.point == pytest.approx(1.0)
    assert stats.ttft_ratio.point == pytest.approx(1.0)
    for ratio in stats.per_request:
        for value in (ratio.decode_speedup, ratio.throughput_speedup, ratio.e2e_ratio):
            assert value is None or math.isfinite(value)


def test_all_pairs_unusable_gives_no_point() -> None:
    zero = {"completion_tokens": 10, "e2e_s": 0.0, "ttft_s": 0.0, "decode_s": 0.0}
    stats = paired_stats([pair("a", 0, zero, zero), pair("b", 0, zero, zero)], FAST)
    assert stats.throughput_speedup.point is None
    assert stats.throughput_speedup.reason == "no_usable_pairs"
    assert stats.throughput_speedup.n_dropped == 2


def test_paired_stats_round_trip_json() -> None:
    stats = paired_stats(synthetic_pairs(5), FAST)
    assert PairedStats.model_validate_json(stats.model_dump_json()) == stats
    assert stats.policy == FAST


def test_weighted_quantile_matches_numpy_on_the_expanded_sample() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(size=25)
    clusters, n = cluster_ids([f"c{i % 6}" for i in range(25)])
    weights = rng.multinomial(n, np.full(n, 1 / n), size=40).astype(float)
    for q in (0.0, 0.5, 0.95, 1.0):
        got = weighted_quantile(values, clusters, weights, q)
        want = [np.quantile(np.repeat(values, weights[k][clusters].astype(int)), q) for k in range(40)]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_interval_feeds_the_core_decision() -> None:
    from specselect._core.decision import Thresholds, decide
    from specselect._core.pairing import SideMetrics, build_pair_evidence
    from specselect._core.status import Decision, RunStatus

    def side(role: str, path: str, throughput: float) -> SideMetrics:
        return SideMetrics.model_validate(
            {
                "role": role,
                "run_status": RunStatus.COMPLETED,
                "target_snapshot": "t",
                "workload_key": "w",
                "sampling_key": "s",
                "execution_path": path,
                "throughput_tokens_per_s": throughput,
                "ttft_p95_ms": 50.0,
                "e2e_p95_ms": 1000.0 / (throughput / 30.0),
                "peak_memory_mb": 100.0,
                "quality_ok": True,
                "mechanism_active": role == "candidate",
            }
        )

    stats = paired_stats(synthetic_pairs(40, speedup=1.5), FAST)
    point = stats.throughput_speedup.point
    assert point is not None
    evidence = build_pair_evidence(
        side("baseline", "target_only", 30.0), side("candidate", "speculative", 30.0 * point)
    )
    result = decide(evidence, Thresholds(), stats.speedup_interval)
    # The item bootstrap within one launch clears the minimum, but holds no launch variation: no accept.
    assert (result.decision, result.reason) == (Decision.TUNE, "no_launch_replication")
    assert result.confidence.status == "insufficient"
