"""Per-category breakdown: speedup with an interval when there are enough items, acceptance from counters."""

from __future__ import annotations

import pytest

from specselect._evidence.categories import acceptance_summary, category_breakdown
from specselect._evidence.samples import RequestPair, RequestSample
from specselect.records.evidence.categories import UNCATEGORIZED
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.telemetry import RequestSpecMetrics

POLICY = BootstrapPolicy(n_resamples=300)


def make_pair(
    item: str, repeat: int, speedup: float, category: str | None, spec: RequestSpecMetrics | None = None
) -> RequestPair:
    e2e = 1.0 + 0.01 * (hash(item) % 7)
    base = RequestSample(item_id=item, repeat=repeat, completion_tokens=60, e2e_s=e2e, decode_s=e2e - 0.1)
    cand = RequestSample(
        item_id=item,
        repeat=repeat,
        completion_tokens=60,
        e2e_s=e2e / speedup,
        decode_s=e2e / speedup - 0.1,
        spec=spec,
    )
    return RequestPair(item_id=item, repeat=repeat, category=category, baseline=base, candidate=cand)


def test_split_by_category_with_and_without_interval() -> None:
    good = RequestSpecMetrics(num_spec_steps=10, num_draft_tokens=50, num_accepted_draft_tokens=40)
    poor = RequestSpecMetrics(num_spec_steps=40, num_draft_tokens=200, num_accepted_draft_tokens=20)
    pairs = [make_pair(f"code{i}", r, 2.0, "code", good) for i in range(6) for r in range(2)]
    pairs += [make_pair("prose0", r, 0.9, "prose", poor) for r in range(3)]
    breakdown = category_breakdown(pairs, policy=POLICY)
    code, prose = breakdown.categories
    assert (code.category, code.n_pairs, code.n_items) == ("code", 12, 6)
    assert code.throughput_speedup.point == pytest.approx(2.0)
    assert code.throughput_speedup.has_interval
    assert code.acceptance is not None
    assert code.acceptance.acceptance_rate == pytest.approx(0.8)
    assert code.acceptance.mean_acceptance_length == pytest.approx(1 + 480 / 120)
    assert (prose.category, prose.n_items) == ("prose", 1)
    assert prose.throughput_speedup.point == pytest.approx(0.9)
    assert not prose.throughput_speedup.has_interval
    assert prose.throughput_speedup.reason == "too_few_clusters"
    assert prose.acceptance is not None
    assert prose.acceptance.acceptance_rate == pytest.approx(0.1)
    assert breakdown.policy == POLICY


def test_mapping_overrides_and_uncategorized() -> None:
    pairs = [make_pair("a", 0, 1.5, None), make_pair("b", 0, 1.5, "old")]
    breakdown = category_breakdown(pairs, categories={"b": "new"}, policy=POLICY)
    assert [c.category for c in breakdown.categories] == ["new", UNCATEGORIZED]
    assert all(c.acceptance is None for c in breakdown.categories)


def test_empty_breakdown() -> None:
    assert category_breakdown([], policy=POLICY).categories == ()


def test_acceptance_summary_weighting_and_bad_counters() -> None:
    samples = [
        RequestSample(
            item_id="a",
            repeat=0,
            spec=RequestSpecMetrics(num_spec_steps=10, num_draft_tokens=100, num_accepted_draft_tokens=90),
        ),
        RequestSample(
            item_id="b",
            repeat=0,
            spec=RequestSpecMetrics(num_spec_steps=2, num_draft_tokens=10, num_accepted_draft_tokens=1),
        ),
        RequestSample(item_id="c", repeat=0, spec=RequestSpecMetrics(num_draft_tokens=5, num_accepted_draft_tokens=9)),
        RequestSample(item_id="d", repeat=0),
    ]
    summary = acceptance_summary(samples)
    assert summary is not None
    assert summary.n_requests == 2
    assert summary.acceptance_rate == pytest.approx(91 / 110)
    assert summary.mean_request_acceptance_rate == pytest.approx((0.9 + 0.1) / 2)
    assert summary.mean_acceptance_length == pytest.approx(1 + 91 / 12)
    assert acceptance_summary([RequestSample(item_id="x", repeat=0)]) is None
