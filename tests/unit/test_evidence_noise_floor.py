"""The A/A noise floor: the baseline against independent launches of itself, and candidates judged against it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specselect.core.decision import WITHIN_NOISE_FLOOR, NoiseFloor, Thresholds, decide
from specselect.core.pairing import PairEvidence
from specselect.core.status import Decision
from specselect.evidence.parity import ParityVerdict, scenario_parity
from specselect.evidence.replication import (
    aa_noise_floor,
    check_noise_floor,
    launch_agreement,
    pool_launch_outputs,
    replicated_speedup,
)
from specselect.evidence.samples import RequestSample
from specselect.evidence.stats import BootstrapPolicy

FAST = BootstrapPolicy(n_resamples=300)


def server(seed: int, *, launches: int, launch_sd: float, first_launch: int = 0) -> list[RequestSample]:
    """Launches of one server over the same 8 items x 2 repeats; launch effects and noise come from `seed`."""
    items = np.random.default_rng(0)
    tokens, difficulty = items.integers(40, 200, 8), items.lognormal(0.0, 0.3, 8)
    rng = np.random.default_rng(seed)
    out: list[RequestSample] = []
    for launch in range(first_launch, first_launch + launches):
        effect = float(rng.lognormal(0.0, launch_sd))
        for i in range(8):
            for repeat in range(2):
                seconds = float(tokens[i]) / 30 * float(difficulty[i]) * effect * float(rng.lognormal(0.0, 0.03))
                out.append(
                    RequestSample(
                        item_id=f"item{i}",
                        repeat=repeat,
                        launch=launch,
                        completion_tokens=int(tokens[i]),
                        e2e_s=seconds,
                    )
                )
    return out


def test_aa_interval_contains_one_at_about_the_nominal_rate_with_two_launches_per_half() -> None:
    hits = 0
    for seed in range(100):
        first = server(2 * seed, launches=2, launch_sd=0.05)
        second = server(2 * seed + 1, launches=2, launch_sd=0.05, first_launch=2)
        floor = aa_noise_floor(first, second, policy=BootstrapPolicy(n_resamples=200))
        hits += floor.contains_one is True
    assert 0.88 <= hits / 100 <= 1.0


def test_spread_is_the_farthest_the_aa_interval_reaches_from_one() -> None:
    floor = aa_noise_floor(server(1, launches=2, launch_sd=0.05), server(2, launches=2, launch_sd=0.05), policy=FAST)
    low, high = floor.speedup.low, floor.speedup.high
    assert low is not None
    assert high is not None
    assert floor.spread_log == pytest.approx(max(-math.log(low), math.log(high)))
    assert floor.band_high == pytest.approx(math.exp(floor.spread_log or 0.0))
    assert floor.band_low == pytest.approx(1 / (floor.band_high or 1.0))
    assert (floor.contains_one, floor.verdict, floor.reason) == (
        True,
        "pass",
        "aa_speedup_consistent_parity_not_assessed",
    )
    band = floor.noise_floor()
    assert band == NoiseFloor(spread_log=floor.spread_log or 0.0, level=0.95, method="two_stage_bootstrap_t")


def test_one_launch_per_half_shows_launch_noise_the_item_interval_leaves_out() -> None:
    # Two launches 10% apart with nearly identical items: the item-only A/A interval excludes 1.0, and says so.
    floor = aa_noise_floor(
        server(3, launches=1, launch_sd=0.0),
        [s.model_copy(update={"e2e_s": (s.e2e_s or 0.0) * 1.1}) for s in server(3, launches=1, launch_sd=0.0)],
        policy=FAST,
    )
    assert floor.speedup.launch_variance_included is False
    assert (floor.contains_one, floor.verdict, floor.reason) == (False, "fail", "aa_interval_excludes_one")
    assert floor.band_high is not None
    assert floor.band_high >= 1.1


def test_launches_agree_token_for_token_or_name_what_differs() -> None:
    same = launch_agreement([{("a", 0): [1, 2, 3], ("b", 0): [4]}, {("a", 0): [1, 2, 3], ("b", 0): [4]}])
    assert (same.verdict, same.reason, same.n_compared, same.match_share, same.unit) == (
        ParityVerdict.PASS,
        "launches_agree",
        2,
        1.0,
        "token",
    )
    differ = launch_agreement([{("a", 0): [1, 2], ("b", 0): [4]}, {("a", 0): [1, 3], ("b", 0): None}])
    assert (differ.verdict, differ.reason) == (ParityVerdict.FAIL, "launches_disagree")
    assert (differ.differing, differ.inconsistent_items, differ.n_not_comparable) == ((("a", 0),), ("a",), 1)
    text = launch_agreement([{("a", 0): "x"}, {("a", 0): "x"}])
    assert text.unit == "character"
    assert launch_agreement([{("a", 0): "x"}]).verdict is ParityVerdict.NOT_ASSESSED


def test_aa_parity_failure_fails_the_aa_check_even_when_the_speedup_is_consistent() -> None:
    outputs = [{("item0", 0): [1, 2]}, {("item0", 0): [1, 9]}]
    floor = aa_noise_floor(
        server(4, launches=2, launch_sd=0.02), server(5, launches=2, launch_sd=0.02), outputs=outputs, policy=FAST
    )
    assert floor.contains_one is True
    assert (floor.verdict, floor.reason) == ("fail", "aa_outputs_differ")


def test_pooled_launch_outputs_let_scenario_parity_count_launch_disagreement_as_baseline_noise() -> None:
    baseline = pool_launch_outputs([{("x", 0): [1, 2], ("y", 0): [5]}, {("x", 0): [1, 3], ("y", 0): [5]}])
    assert baseline == {("x", 0): [1, 2], ("y", 0): [5], ("x", 1): [1, 3], ("y", 1): [5]}
    candidate = pool_launch_outputs([{("x", 0): [1, 2], ("y", 0): [5]}, {("x", 0): [1, 2], ("y", 0): [5]}])
    parity = scenario_parity(baseline, candidate)
    assert (parity.verdict, parity.reason) == (ParityVerdict.INCONCLUSIVE, "mismatches_within_baseline_noise")
    assert parity.baseline_consistency.inconsistent_items == ("x",)


def test_both_sides_pool_with_one_width_so_launch_j_meets_launch_j() -> None:
    short = [{("x", 0): [1]}, {("x", 0): [2]}]
    assert pool_launch_outputs(short, repeats_per_launch=3) == {("x", 0): [1], ("x", 3): [2]}
    with pytest.raises(ValueError, match="repeats_per_launch 1 is below a repeat seen"):
        pool_launch_outputs([{("x", 1): [1]}], repeats_per_launch=1)


def test_a_candidate_is_outside_the_noise_floor_only_when_its_interval_low_clears_the_band() -> None:
    band = NoiseFloor(spread_log=math.log(1.1), level=0.95, method="m")
    base = server(6, launches=2, launch_sd=0.01)
    fast = [s.model_copy(update={"e2e_s": (s.e2e_s or 0.0) / 1.5}) for s in server(7, launches=2, launch_sd=0.01)]
    near = [s.model_copy(update={"e2e_s": (s.e2e_s or 0.0) / 1.08}) for s in server(7, launches=2, launch_sd=0.01)]
    clear = check_noise_floor(replicated_speedup(base, fast, FAST), band)
    inside = check_noise_floor(replicated_speedup(base, near, FAST), band)
    assert clear is not None
    assert inside is not None
    assert (clear.outside, clear.reason, clear.compared) == (True, "outside_noise_floor", "interval_low")
    assert (inside.outside, inside.reason) == (False, WITHIN_NOISE_FLOOR)
    few = [s for s in base if s.item_id in ("item0", "item1")]
    by_point = check_noise_floor(replicated_speedup(few, [s for s in fast if s.item_id in ("item0", "item1")]), band)
    assert by_point is not None
    assert (by_point.compared, by_point.outside) == ("point", True)


def test_the_baseline_against_itself_is_never_accepted_with_its_own_noise_floor() -> None:
    floor = aa_noise_floor(server(8, launches=2, launch_sd=0.05), server(9, launches=2, launch_sd=0.05), policy=FAST)
    band, interval = floor.noise_floor(), floor.speedup.speedup_interval()
    assert band is not None
    assert interval is not None
    evidence = PairEvidence.model_validate(
        {
            "evidence_status": "comparable",
            "candidate_run_status": "completed",
            "throughput_speedup": floor.speedup.point,
            "ttft_ratio": 1.0,
            "e2e_p95_ratio": 1.0,
            "candidate_peak_memory_mb": 1.0,
            "quality_ok": True,
        }
    )
    # Even with no minimum speedup at all, a gain inside its own A/A band cannot be accepted.
    result = decide(evidence, Thresholds(min_throughput_speedup=0.0), interval, noise_floor=band)
    assert (result.decision, result.reason) == (Decision.TUNE, WITHIN_NOISE_FLOOR)
