"""Proposal-length choice over sub-candidates, with speedups made by the real paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from specselect._evidence import SweepPoint, choose_length
from specselect._evidence.samples import RequestSample, pair_requests
from specselect._evidence.stats import paired_stats
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.evidence.sweeps import LengthChoice

POLICY = BootstrapPolicy(n_resamples=1000, seed=3)


def sweep(
    speedups: dict[int, float], *, n_items: int = 20, repeats: int = 3, noise: float = 0.03, seed: int = 11
) -> list[SweepPoint]:
    """One shared baseline; per length, requests `speedup` x faster with independent per-request noise."""
    rng = np.random.default_rng(seed)
    baseline: list[RequestSample] = []
    for i in range(n_items):
        tokens = int(rng.integers(40, 200))
        difficulty = float(rng.lognormal(0.0, 0.3))
        for r in range(repeats):
            seconds = tokens / 20.0 * difficulty * float(rng.lognormal(0.0, 0.05))
            baseline.append(RequestSample(item_id=f"i{i:03d}", repeat=r, completion_tokens=tokens, e2e_s=seconds))
    points: list[SweepPoint] = []
    for length, speedup in speedups.items():
        candidate = [
            s.model_copy(update={"e2e_s": (s.e2e_s or 1.0) / speedup * float(rng.lognormal(0.0, noise))})
            for s in baseline
        ]
        stats = paired_stats(list(pair_requests(baseline, candidate).pairs), POLICY)
        points.append(
            SweepPoint(
                candidate=f"ngram-k{length}",
                workload="repetition",
                concurrency=1,
                proposal_length=length,
                speedup=stats.throughput_speedup,
                per_request=stats.per_request,
            )
        )
    return points


def row(choice: LengthChoice, length: int) -> dict[str, object]:
    return next(r for r in choice.per_length if r.length == length).model_dump()


def test_clear_best_where_the_smallest_length_is_worse() -> None:
    choice = choose_length(sweep({1: 1.15, 3: 1.8, 5: 1.35}), policy=POLICY)
    assert choice.status == "clear_best"
    assert (choice.best_length, choice.recommended_length) == (3, 3)
    assert choice.recommended_candidate == "ngram-k3"
    assert row(choice, 1)["indistinguishable"] is False
    assert row(choice, 5)["indistinguishable"] is False
    assert row(choice, 3)["is_best"] is True and row(choice, 3)["vs_best_point"] == 1.0
    assert [r.length for r in choice.per_length] == [1, 3, 5]
    assert choice.policy == POLICY and "SMALLEST" in choice.rule


def test_plateau_prefers_the_smaller_length_indistinguishable_from_the_best() -> None:
    choice = choose_length(sweep({2: 1.50, 4: 1.56, 8: 1.15}, noise=0.15), policy=POLICY)
    assert choice.best_length == 4
    assert choice.status == "clear_best"
    assert choice.recommended_length == 2
    vs = row(choice, 2)
    assert vs["indistinguishable"] is True
    assert vs["vs_best_low"] <= 1.0 <= vs["vs_best_high"]  # type: ignore[operator]
    assert row(choice, 8)["indistinguishable"] is False
    assert "indistinguishable from it: [2]" in choice.reason


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_flat_noisy_lengths_give_no_clear_difference(seed: int) -> None:
    choice = choose_length(sweep({1: 1.0, 2: 1.0, 4: 1.0, 8: 1.0}, n_items=8, noise=0.25, seed=seed), policy=POLICY)
    assert choice.status == "no_clear_difference"
    assert choice.recommended_length == 1
    assert all(r.indistinguishable for r in choice.per_length)
    assert "no clear difference" in choice.reason


def test_none_pays_when_the_best_is_clearly_slower() -> None:
    choice = choose_length(sweep({1: 0.8, 2: 0.75, 4: 0.7}), policy=POLICY)
    assert choice.status == "none_pays"
    assert choice.recommended_length is None and choice.recommended_candidate is None
    assert choice.best_length == 1
    assert len(choice.per_length) == 3


def test_vs_best_interval_shrinks_with_more_items() -> None:
    small = choose_length(sweep({2: 1.4, 4: 1.5}, n_items=10, noise=0.1), policy=POLICY)
    large = choose_length(sweep({2: 1.4, 4: 1.5}, n_items=90, noise=0.1), policy=POLICY)

    def width(choice: LengthChoice) -> float:
        other = next(r for r in choice.per_length if not r.is_best)
        assert other.vs_best_low is not None and other.vs_best_high is not None
        return other.vs_best_high - other.vs_best_low

    assert width(large) < width(small) / 2


def test_insufficient_data_cases() -> None:
    single = choose_length(sweep({3: 1.5}), policy=POLICY)
    assert single.status == "insufficient_data" and single.recommended_length is None
    assert single.best_length == 3 and "only one" in single.reason
    # Fewer items than the policy's min_clusters: no interval, so nothing may be called indistinguishable.
    few = choose_length(sweep({1: 1.4, 2: 1.5}, n_items=2), policy=POLICY)
    assert few.status == "insufficient_data"
    assert any(r.note and "too_few_clusters" in r.note for r in few.per_length)
    # No shared per-request pairs with the best.
    points = sweep({1: 1.2, 2: 1.6})
    stripped = [points[0].model_copy(update={"per_request": ()}), points[1]]
    assert choose_length(stripped, policy=POLICY).status == "insufficient_data"
    no_estimates = [
        p.model_copy(update={"speedup": p.speedup.model_copy(update={"point": None, "low": None, "high": None})})
        for p in points
    ]
    choice = choose_length(no_estimates, policy=POLICY)
    assert choice.status == "insufficient_data" and choice.best_length is None


def test_unassessed_length_is_never_recommended() -> None:
    points = sweep({1: 1.46, 2: 1.54, 4: 1.1}, noise=0.15)
    intact = choose_length(points, policy=POLICY)
    assert (intact.best_length, intact.recommended_length) == (2, 1)
    # Length 1 loses its per-request data: it can no longer be shown to be as good, so it is not chosen.
    stripped = choose_length([points[0].model_copy(update={"per_request": ()}), *points[1:]], policy=POLICY)
    assert (stripped.status, stripped.recommended_length) == ("clear_best", 2)
    assert "not assessed: [1]" in stripped.reason


def test_input_order_does_not_matter_and_result_is_reproducible() -> None:
    points = sweep({1: 1.2, 3: 1.6, 5: 1.55}, noise=0.1)
    assert choose_length(points, policy=POLICY) == choose_length(list(reversed(points)), policy=POLICY)
    again = choose_length(points, policy=POLICY)
    assert LengthChoice.model_validate_json(again.model_dump_json()) == again


def test_invalid_inputs_raise() -> None:
    points = sweep({1: 1.2, 2: 1.3})
    with pytest.raises(ValueError, match="no sweep points"):
        choose_length([], policy=POLICY)
    with pytest.raises(ValueError, match="several scenarios"):
        choose_length([points[0], points[1].model_copy(update={"concurrency": 4})], policy=POLICY)
    with pytest.raises(ValueError, match="no proposal_length"):
        choose_length([points[0].model_copy(update={"proposal_length": None})], policy=POLICY)
    with pytest.raises(ValueError, match="duplicate proposal lengths"):
        choose_length([points[0], points[0]], policy=POLICY)
