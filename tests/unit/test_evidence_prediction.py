"""Predicted speedup: tokens per step by hand, a cost model from other measurements only, right and wrong
predictions, and the candidate's own timing never entering the prediction."""

from __future__ import annotations

import pytest

from specselect._evidence.prediction import (
    AcceptanceTelemetry,
    SweepObservation,
    baseline_tpot,
    expected_tokens_iid,
    expected_tokens_per_step,
    fit_verify_cost,
    leave_one_out,
    measure_step_cost,
    measured_decode_speedup,
    per_position_rates_from_counts,
    predict_decode_speedup,
    predict_speedup,
    verify_cost_from_prefill,
)
from specselect._evidence.samples import RequestPair, RequestSample
from specselect.records.evidence.prediction import ProposerCost, VerifyCostModel
from specselect.records.telemetry import RequestSpecMetrics


def test_iid_formula_by_hand() -> None:
    assert expected_tokens_iid(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_iid(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert expected_tokens_iid(1.0, 4) == 5.0
    assert expected_tokens_iid(0.0, 4) == 1.0
    assert expected_tokens_iid(0.7, 0) == 1.0


def test_cumulative_and_conditional_rates_agree_with_iid() -> None:
    assert expected_tokens_per_step([0.5, 0.25, 0.125]) == pytest.approx(1.875)
    assert expected_tokens_per_step([0.5, 0.5, 0.5], rate_kind="conditional") == pytest.approx(1.875)
    assert expected_tokens_per_step([0.9, 0.5], rate_kind="conditional") == pytest.approx(1 + 0.9 + 0.45)
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


RATES = (0.9, 0.8, 0.7, 0.6, 0.4)
"""Cumulative rates over k = 5 positions: E = 1 + 3.4 = 4.4 tokens per drafting step."""
FREE = ProposerCost.free("ngram")


def calibration(slope: float, intercept: float = 1.0) -> VerifyCostModel:
    return VerifyCostModel(intercept=intercept, slope=slope, source="calibration", fitted_from=("bench",), n_points=4)


def test_prediction_by_hand_from_telemetry_and_a_calibrated_verify_cost() -> None:
    # c(5) = 1 + 0.1 * 5 = 1.5 baseline decode steps per drafting step, proposing free: 4.4 / 1.5.
    prediction = predict_decode_speedup(
        AcceptanceTelemetry(per_position_rates=RATES),
        verify_cost=calibration(0.1),
        proposer=FREE,
        baseline_token_s=0.03,
        measured=2.8,
    )
    assert prediction.expected_tokens_per_step == pytest.approx(4.4)
    assert prediction.modelled_step_cost == pytest.approx(1.5)
    assert prediction.predicted_decode_speedup == pytest.approx(4.4 / 1.5)
    assert prediction.predicted_candidate_token_s == pytest.approx(0.03 * 1.5 / 4.4)
    assert prediction.gap == pytest.approx(2.8 - 4.4 / 1.5)
    assert prediction.relative_error == pytest.approx((4.4 / 1.5 - 2.8) / 2.8)
    assert prediction.relative_gap == pytest.approx((2.8 - 4.4 / 1.5) / (4.4 / 1.5))
    assert prediction.inputs_used == (
        "acceptance_telemetry",
        "baseline_tpot",
        "verify_cost:calibration",
        "proposer_cost:assumed_free",
    )
    assert prediction.assumptions == (
        "every_step_drafts: draft count or decode tokens unknown",
        "proposer_cost_free: ngram: a lookup, assumed free next to a step",
    )
    assert prediction.missing == ()
    assert prediction.schema_version == 2


def test_retrieval_proposers_mix_drafting_steps_with_plain_steps_by_token_count() -> None:
    # 10 drafts of E = 3 tokens among 110 decode tokens: 80 plain steps; cost 10 * c(2) + 80 = 10 * 1.2 + 80.
    telemetry = AcceptanceTelemetry(per_position_rates=(1.0, 1.0), num_drafts=10, decode_tokens=110)
    prediction = predict_decode_speedup(telemetry, verify_cost=calibration(0.1), proposer=FREE, measured=1.1)
    assert (prediction.drafting_steps, prediction.plain_steps) == (10, 80)
    assert prediction.tokens_per_target_step == pytest.approx(110 / 90)
    assert prediction.predicted_decode_speedup == pytest.approx(110 / 92)
    assert prediction.assumptions == ("proposer_cost_free: ngram: a lookup, assumed free next to a step",)


def test_a_draft_models_measured_step_enters_as_its_cost_per_drafted_token() -> None:
    proposer = ProposerCost.measured(draft_token_s=0.006, baseline_token_s=0.03)
    assert proposer.per_token == pytest.approx(0.2)
    prediction = predict_decode_speedup(
        AcceptanceTelemetry(per_position_rates=RATES), verify_cost=calibration(0.1), proposer=proposer
    )
    assert prediction.predicted_decode_speedup == pytest.approx(4.4 / (1.5 + 5 * 0.2))
    assert prediction.missing == ("measured_decode_speedup",)


def sweep(measured: dict[int, float] | None = None) -> list[SweepObservation]:
    """Lengths 1..5 with i.i.d. acceptance 0.7 on a machine where verifying k + 1 tokens costs 1 + 0.15 k steps."""
    out = []
    for k in range(1, 6):
        rates = tuple(0.7**i for i in range(1, k + 1))
        truth = expected_tokens_per_step(rates) / (1 + 0.15 * k)
        value = truth if measured is None or k not in measured else measured[k]
        out.append(
            SweepObservation(
                candidate=f"ngram-k{k}",
                telemetry=AcceptanceTelemetry(per_position_rates=rates),
                measured_decode_speedup=value,
            )
        )
    return out


def test_a_right_prediction_from_the_other_lengths_lands_on_each_measurement() -> None:
    predictions = leave_one_out(sweep(), FREE)
    for k, prediction in enumerate(predictions, start=1):
        assert prediction.verify_cost is not None
        assert prediction.verify_cost.source == "leave_one_out_sweep"
        assert f"ngram-k{k}" not in prediction.verify_cost.fitted_from
        assert prediction.verify_cost.n_points == 4
        assert prediction.verify_cost.slope == pytest.approx(0.15)
        assert prediction.relative_error == pytest.approx(0.0, abs=1e-12)


def test_a_wrong_prediction_shows_its_error_when_verification_is_dearer_than_calibrated() -> None:
    # High acceptance (E = 4.4) and a calibration saying verification is cheap (c(5) = 1.25): predicted 3.52x;
    # the engine measured 0.8x because its verification really costs ~5.5 decode steps.
    prediction = predict_decode_speedup(
        AcceptanceTelemetry(per_position_rates=RATES), verify_cost=calibration(0.05), proposer=FREE, measured=0.8
    )
    assert prediction.predicted_decode_speedup == pytest.approx(3.52)
    assert prediction.relative_error == pytest.approx((3.52 - 0.8) / 0.8)
    assert prediction.gap == pytest.approx(0.8 - 3.52)


def make_pair(item: str, *, spec: RequestSpecMetrics | None, cand_decode_s: float = 1.1) -> RequestPair:
    # Baseline: 99 decode tokens in 3.3 s (1/30 s per token). Candidate: the same 99 tokens in 1.1 s.
    base = RequestSample(item_id=item, repeat=0, completion_tokens=100, e2e_s=3.4, decode_s=3.3, ttft_s=0.1)
    cand = RequestSample(
        item_id=item,
        repeat=0,
        completion_tokens=100,
        e2e_s=cand_decode_s + 0.1,
        decode_s=cand_decode_s,
        ttft_s=0.1,
        spec=spec,
    )
    return RequestPair(item_id=item, repeat=0, baseline=base, candidate=cand)


SPEC = RequestSpecMetrics(num_spec_steps=20, num_draft_tokens=100, num_accepted_draft_tokens=79)


def test_perturbing_the_candidates_own_timing_leaves_the_prediction_unchanged() -> None:
    """Fails if the prediction reads the candidate's step timing: only `measured` and the diagnostic may move."""

    def run(decode_s: float) -> tuple[float | None, float | None, float | None]:
        pairs = [make_pair(i, spec=SPEC, cand_decode_s=decode_s) for i in ("a", "b")]
        p = predict_speedup(pairs, RATES, num_drafts=40, verify_cost=calibration(0.1), proposer=FREE)
        return (
            p.predicted_decode_speedup,
            p.measured_decode_speedup,
            p.step_cost.relative_step_cost if p.step_cost else None,
        )

    fast, slow = run(1.1), run(3.3)
    assert fast[0] == slow[0] == pytest.approx(198 / (40 * 1.5 + max(0, round(198 - 40 * 4.4))))
    assert (fast[1], slow[1]) == (pytest.approx(3.0), pytest.approx(1.0))
    assert fast[2] != slow[2]


def test_leave_one_out_never_sees_the_length_it_predicts() -> None:
    honest, perturbed = leave_one_out(sweep(), FREE), leave_one_out(sweep({3: 0.5}), FREE)
    assert perturbed[2].predicted_decode_speedup == pytest.approx(honest[2].predicted_decode_speedup)
    assert perturbed[2].measured_decode_speedup == 0.5
    # The other lengths' fits include length 3, so its (perturbed) timing moves them.
    assert perturbed[0].predicted_decode_speedup != pytest.approx(honest[0].predicted_decode_speedup)


def test_without_a_cost_model_the_prediction_stays_null_never_circular() -> None:
    prediction = predict_speedup([make_pair("a", spec=SPEC), make_pair("b", spec=SPEC)], RATES)
    assert prediction.predicted_decode_speedup is None
    assert prediction.missing == ("verify_cost_model", "proposer_cost")
    assert prediction.measured_decode_speedup == pytest.approx(3.0)
    assert prediction.expected_tokens_per_step == pytest.approx(4.4)
    assert prediction.step_cost is not None


def test_observed_step_cost_diagnostic_by_hand() -> None:
    pairs = [make_pair("a", spec=SPEC), make_pair("b", spec=SPEC)]
    cost = measure_step_cost(pairs)
    assert cost is not None
    assert cost.candidate_step_s == pytest.approx(1.1 / 20)
    assert cost.baseline_token_s == pytest.approx(1 / 30)
    assert cost.relative_step_cost == pytest.approx(1.65)
    assert cost.num_spec_steps == 40
    assert measured_decode_speedup(pairs) == pytest.approx(3.0)
    by_drafts = measure_step_cost([make_pair("a", spec=None)], num_drafts=10)
    assert by_drafts is not None
    assert (by_drafts.step_source, by_drafts.candidate_step_s) == ("num_drafts", pytest.approx(0.11))


def test_a_baseline_decode_time_that_underflows_per_token_gives_no_step_cost() -> None:
    # 5e-324 s over two decode tokens is 0.0 s per token in floating point: no rate to divide by.
    pair = make_pair("a", spec=None)
    tiny = pair.model_copy(
        update={"baseline": pair.baseline.model_copy(update={"completion_tokens": 3, "decode_s": 5e-324})}
    )
    assert baseline_tpot([tiny]) == (None, 1)
    assert measure_step_cost([tiny], num_drafts=1) is None


def test_missing_or_invalid_telemetry_stays_null_never_inferred_from_latency() -> None:
    absent = predict_speedup([make_pair("a", spec=None)], None, verify_cost=calibration(0.1), proposer=FREE)
    assert (absent.expected_tokens_per_step, absent.predicted_decode_speedup) == (None, None)
    assert absent.missing == ("per_position_acceptance_rates",)
    bad = predict_speedup([make_pair("a", spec=SPEC)], [0.2, 0.9], verify_cost=calibration(0.1), proposer=FREE)
    assert bad.missing == ("valid_per_position_acceptance_rates",)
    empty = predict_speedup([], [0.5], verify_cost=calibration(0.1), proposer=FREE)
    assert empty.measured_decode_speedup is None
    assert empty.predicted_decode_speedup == pytest.approx(1.5 / 1.1)
    assert empty.missing == ("measured_decode_speedup",)
    negative = predict_decode_speedup(
        AcceptanceTelemetry(per_position_rates=(0.5,)), verify_cost=calibration(-2.0), proposer=FREE
    )
    assert negative.missing == ("positive_modelled_step_cost", "measured_decode_speedup")


def test_affine_and_anchored_fits_and_their_minimum_data() -> None:
    observations = [
        SweepObservation(
            candidate=f"k{k}",
            telemetry=AcceptanceTelemetry(per_position_rates=(1.0,) * k),
            measured_decode_speedup=(k + 1) / (1.3 + 0.1 * k),
        )
        for k in (2, 4, 6)
    ]
    affine = fit_verify_cost(observations, FREE, form="affine")
    assert affine is not None
    assert (affine.intercept, affine.slope, affine.form) == (pytest.approx(1.3), pytest.approx(0.1), "affine")
    assert fit_verify_cost(observations[:1], FREE, form="affine") is None
    anchored = fit_verify_cost(observations[:1], FREE)
    assert anchored is not None
    assert anchored.cost(2) == pytest.approx(1.5)
    assert fit_verify_cost(observations, FREE, exclude="k2") == fit_verify_cost(observations[1:], FREE)
    with pytest.raises(ValueError, match="duplicate candidates"):
        leave_one_out([*observations, observations[0]], FREE)


def test_verify_cost_from_the_baselines_own_prefill_slope() -> None:
    # TTFT = 50 ms + 2 ms per prompt token; decode 20 ms per token: one more verified token costs 0.1 steps.
    baseline = [
        RequestSample(
            item_id=f"i{n}", repeat=0, prompt_tokens=n, ttft_s=0.05 + 0.002 * n, completion_tokens=11, decode_s=0.2
        )
        for n in (100, 200, 400)
    ]
    model = verify_cost_from_prefill(baseline)
    assert model is not None
    assert (model.source, model.intercept, model.slope) == ("baseline_prefill", 1.0, pytest.approx(0.1))
    assert verify_cost_from_prefill(baseline[:2]) is None


def test_a_draft_models_weight_share_is_its_assumed_cost_per_drafted_token() -> None:
    cost = ProposerCost.weights_ratio(proposer_bytes=150, target_bytes=600)
    assert (cost.per_token, cost.source) == (0.25, "weights_ratio")
    telemetry = AcceptanceTelemetry(per_position_rates=(0.5, 0.25), rate_kind="cumulative")
    verify = VerifyCostModel(slope=0.0, source="calibration")
    p = predict_decode_speedup(telemetry, verify_cost=verify, proposer=cost, measured=1.0)
    # E = 1.75 tokens per step at a cost of 1 + 2 x 0.25 steps.
    assert p.predicted_decode_speedup == pytest.approx(1.75 / 1.5)
    assert any(a.startswith("proposer_cost_weights_ratio") for a in p.assumptions)
