"""Predicted speedup: expected tokens per step against hand-computed values, step cost, null on missing inputs."""

from __future__ import annotations

import pytest

from specselect.evidence.prediction import (
    expected_tokens_iid,
    expected_tokens_per_step,
    measure_step_cost,
    measured_decode_speedup,
    per_position_rates_from_counts,
    predict_speedup,
)
from specselect.evidence.samples import RequestPair, RequestSample, RequestSpecMetrics


def test_iid_formula_by_hand() -> None:
    assert expected_tokens_iid(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_iid(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert expected_tokens_iid(1.0, 4) == 5.0
    assert expected_tokens_iid(0.0, 4) == 1.0
    assert expected_tokens_iid(0.7, 0) == 1.0


def test_cumulative_and_conditional_rates_agree_with_iid() -> None:
    assert expected_tokens_per_step([0.5, 0.25, 0.125]) == pytest.approx(1.875)
    assert expected_tokens_per_step([0.5, 0.5, 0.5], kind="conditional") == pytest.approx(1.875)
    assert expected_tokens_per_step([0.9, 0.5], kind="conditional") == pytest.approx(1 + 0.9 + 0.45)
    assert expected_tokens_per_step([]) == 1.0


def test_vllm_counter_example_equals_mean_acceptance_length() -> None:
    """Deltas measured on CPU: drafts 171, per-position accepted 138, 129, 111, 102, 102 (582 in all)."""
    rates = per_position_rates_from_counts([138, 129, 111, 102, 102], 171)
    assert rates is not None
    assert rates[0] == pytest.approx(138 / 171)
    assert expected_tokens_per_step(rates) == pytest.approx(1 + 582 / 171)


def test_counts_without_drafts_give_none() -> None:
    assert per_position_rates_from_counts([1, 2], 0) is None
    assert per_position_rates_from_counts([], 5) is None


@pytest.mark.parametrize("rates", [[1.2], [-0.1], [float("nan")], [0.3, 0.5]])
def test_invalid_rates_raise(rates: list[float]) -> None:
    with pytest.raises(ValueError, match="rates"):
        expected_tokens_per_step(rates)


def test_invalid_iid_inputs_raise() -> None:
    with pytest.raises(ValueError, match="acceptance_rate"):
        expected_tokens_iid(1.5, 3)


def make_pair(item: str, *, spec: RequestSpecMetrics | None) -> RequestPair:
    # Baseline: 99 decode tokens in 3.3 s (1/30 s per token). Candidate: the same 99 tokens in 1.1 s over 20 steps.
    base = RequestSample(item_id=item, repeat=0, completion_tokens=100, e2e_s=3.4, decode_s=3.3, ttft_s=0.1)
    cand = RequestSample(item_id=item, repeat=0, completion_tokens=100, e2e_s=1.2, decode_s=1.1, ttft_s=0.1, spec=spec)
    return RequestPair(item_id=item, repeat=0, baseline=base, candidate=cand)


SPEC = RequestSpecMetrics(num_spec_steps=20, num_draft_tokens=100, num_accepted_draft_tokens=79)


def test_step_cost_and_prediction_by_hand() -> None:
    pairs = [make_pair("a", spec=SPEC), make_pair("b", spec=SPEC)]
    cost = measure_step_cost(pairs)
    assert cost is not None
    assert cost.candidate_step_s == pytest.approx(1.1 / 20)
    assert cost.baseline_token_s == pytest.approx(1 / 30)
    assert cost.relative_step_cost == pytest.approx(1.65)
    assert cost.num_spec_steps == 40
    assert measured_decode_speedup(pairs) == pytest.approx(3.0)

    prediction = predict_speedup(pairs, [0.9, 0.8, 0.7, 0.6, 0.4])
    assert prediction.expected_tokens_per_step == pytest.approx(4.4)
    assert prediction.predicted_decode_speedup == pytest.approx(4.4 / 1.65)
    assert prediction.measured_decode_speedup == pytest.approx(3.0)
    assert prediction.gap == pytest.approx(3.0 - 4.4 / 1.65)
    assert prediction.relative_gap == pytest.approx((3.0 - 4.4 / 1.65) / (4.4 / 1.65))
    assert prediction.missing == ()
    assert prediction.rate_kind == "cumulative"


def test_num_drafts_overrides_per_request_steps() -> None:
    cost = measure_step_cost([make_pair("a", spec=None)], num_drafts=10)
    assert cost is not None
    assert cost.step_source == "num_drafts"
    assert cost.candidate_step_s == pytest.approx(0.11)


def test_missing_inputs_stay_null_never_inferred_from_latency() -> None:
    pairs = [make_pair("a", spec=None)]
    prediction = predict_speedup(pairs, None)
    assert prediction.expected_tokens_per_step is None
    assert prediction.step_cost is None
    assert prediction.predicted_decode_speedup is None
    assert prediction.gap is None
    assert prediction.measured_decode_speedup == pytest.approx(3.0)
    assert prediction.missing == ("per_position_acceptance_rates", "step_cost")

    bad = predict_speedup([make_pair("a", spec=SPEC)], [0.2, 0.9])
    assert bad.expected_tokens_per_step is None
    assert "valid_per_position_acceptance_rates" in bad.missing

    empty = predict_speedup([], [0.5])
    assert empty.predicted_decode_speedup is None
    assert empty.measured_decode_speedup is None
    assert set(empty.missing) == {"step_cost", "measured_decode_speedup"}


def test_retrieval_proposers_count_plain_steps_without_a_draft() -> None:
    # 10 requests x 11 decode tokens (completion 12) in 1.0 s each vs a baseline at 0.1 s per token;
    # the server reports 10 drafts whose steps yield E = 3 tokens: 110 - 30 = 80 plain steps, 90 target steps.
    pairs = []
    for i in range(10):
        base = RequestSample(item_id=f"i{i}", repeat=0, completion_tokens=12, e2e_s=1.2, decode_s=1.1, ttft_s=0.1)
        cand = RequestSample(item_id=f"i{i}", repeat=0, completion_tokens=12, e2e_s=1.1, decode_s=1.0, ttft_s=0.1)
        pairs.append(RequestPair(item_id=f"i{i}", repeat=0, baseline=base, candidate=cand))
    prediction = predict_speedup(pairs, [1.0, 1.0], num_drafts=10)
    assert prediction.step_cost is not None
    assert prediction.step_cost.num_spec_steps == 10
    assert prediction.step_cost.plain_steps == 80
    assert prediction.tokens_per_target_step == pytest.approx(110 / 90)
    relative = (10.0 / 90) / (11.0 / 110)
    assert prediction.predicted_decode_speedup == pytest.approx((110 / 90) / relative)
    assert prediction.measured_decode_speedup == pytest.approx(1.1)
