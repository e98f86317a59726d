"""Property tests: evidence functions never crash and keep their invariants on arbitrary inputs."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specselect._evidence.categories import category_breakdown
from specselect._evidence.parity import Output, compare_tokens, quality_ok_from_verdict, scenario_parity
from specselect._evidence.prediction import predict_speedup
from specselect._evidence.rounds.estimate import pair_estimate
from specselect._evidence.samples import RequestKey, RequestPair, RequestSample
from specselect._evidence.stats import paired_stats
from specselect.records.evidence.parity import ParityVerdict
from specselect.records.evidence.prediction import ProposerCost, VerifyCostModel
from specselect.records.evidence.stats import BootstrapPolicy, RatioEstimate
from specselect.records.telemetry import RequestSpecMetrics

POLICY = BootstrapPolicy(n_resamples=100, min_clusters=2)
BCA = BootstrapPolicy(n_resamples=100, min_clusters=2, method="bca")
PROFILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

any_float = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e-300]))
any_int = st.one_of(st.none(), st.integers(min_value=-5, max_value=10_000))
spec = st.one_of(
    st.none(),
    st.builds(RequestSpecMetrics, num_spec_steps=any_int, num_draft_tokens=any_int, num_accepted_draft_tokens=any_int),
)


@st.composite
def pairs_strategy(draw: st.DrawFn) -> list[RequestPair]:
    keys = draw(
        st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 3)), max_size=25, unique=True),
    )

    def sample(item: str, repeat: int) -> RequestSample:
        return RequestSample(
            item_id=item,
            repeat=repeat,
            category=draw(st.sampled_from([None, "x", "y"])),
            completion_tokens=draw(any_int),
            ttft_s=draw(any_float),
            e2e_s=draw(any_float),
            decode_s=draw(any_float),
            spec=draw(spec),
        )

    return [
        RequestPair(item_id=i, repeat=r, category=None, baseline=sample(i, r), candidate=sample(i, r)) for i, r in keys
    ]


def check_estimate(est: RatioEstimate) -> None:
    for value in (est.point, est.low, est.high):
        assert value is None or math.isfinite(value)
    if est.low is not None and est.high is not None:
        assert est.low <= est.high
        assert est.point is not None
    else:
        assert est.reason is not None
    assert est.n_samples + est.n_dropped >= 0


@pytest.mark.parametrize("policy", [POLICY, BCA], ids=["percentile", "bca"])
@PROFILE
@given(pairs=pairs_strategy())
def test_paired_stats_never_crash(policy: BootstrapPolicy, pairs: list[RequestPair]) -> None:
    stats = paired_stats(pairs, policy)
    for est in (
        stats.throughput_speedup,
        stats.decode_speedup,
        stats.ttft_ratio,
        stats.e2e_p95_ratio,
        stats.mean_per_sample_speedup,
    ):
        check_estimate(est)
    assert (stats.speedup_interval is None) == (not stats.throughput_speedup.has_interval)


@PROFILE
@given(pairs_strategy())
def test_categories_and_prediction_never_crash(pairs: list[RequestPair]) -> None:
    for category in category_breakdown(pairs, policy=POLICY).categories:
        check_estimate(category.throughput_speedup)
    prediction = predict_speedup(pairs, [0.9, 0.5], verify_cost=COST, proposer=FREE)
    for value in (prediction.predicted_decode_speedup, prediction.measured_decode_speedup, prediction.gap):
        assert value is None or math.isfinite(value)


COST = VerifyCostModel(slope=0.1, source="calibration")
FREE = ProposerCost.free("ngram")


@PROFILE
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
    st.one_of(st.none(), st.integers(-3, 500)),
    pairs_strategy(),
)
def test_prediction_with_arbitrary_rates_never_crashes(
    rates: list[float], drafts: int | None, pairs: list[RequestPair]
) -> None:
    prediction = predict_speedup(pairs, rates, num_drafts=drafts, verify_cost=COST, proposer=FREE)
    assert (prediction.predicted_decode_speedup is None) == bool(
        {"per_position_acceptance_rates", "valid_per_position_acceptance_rates", "positive_modelled_step_cost"}
        & set(prediction.missing)
    )
    assert prediction.predicted_decode_speedup is None or prediction.predicted_decode_speedup > 0


@PROFILE
@given(pairs_strategy(), pairs_strategy())
def test_the_round_estimate_never_crashes_on_arbitrary_rounds(
    first: list[RequestPair], second: list[RequestPair]
) -> None:
    base = [p.baseline for p in first] + [p.baseline.model_copy(update={"launch": 1}) for p in second]
    cand = [p.candidate for p in first] + [p.candidate.model_copy(update={"launch": 1}) for p in second]
    for rounds in ((base, cand), ([p.baseline for p in first], [p.candidate for p in first])):
        est = pair_estimate(*rounds, level=0.95)
        for value in (est.point, est.low, est.high, est.rerun_low, est.rerun_high):
            assert value is None or (math.isfinite(value) and value >= 0)
        if est.low is not None and est.high is not None:
            assert est.point is not None
            assert est.low <= est.point <= est.high


tokens = st.lists(st.integers(min_value=0, max_value=5), max_size=12)


@settings(max_examples=200, deadline=None)
@given(tokens, tokens)
def test_compare_tokens_invariants(base: list[int], cand: list[int]) -> None:
    result = compare_tokens(base, cand)
    assert result.equal == (base == cand)
    assert result.lcp_tokens is not None
    assert base[: result.lcp_tokens] == cand[: result.lcp_tokens]
    if not result.equal:
        assert result.first_divergence == result.lcp_tokens
        d = result.first_divergence
        assert d is not None
        assert d == min(len(base), len(cand)) or base[d] != cand[d]


outputs = st.dictionaries(
    st.tuples(st.sampled_from("abc"), st.integers(0, 2)),
    st.one_of(st.none(), tokens, st.text(max_size=5)),
    max_size=9,
)


@settings(max_examples=150, deadline=None)
@given(outputs, outputs, st.booleans())
def test_scenario_parity_never_crashes(
    base: dict[RequestKey, Output], cand: dict[RequestKey, Output], with_logprobs: bool
) -> None:
    logprobs = {key: [[-0.1, -0.15]] * 12 for key in base} if with_logprobs else None
    result = scenario_parity(base, cand, baseline_top_logprobs=logprobs)
    assert result.quality_ok == quality_ok_from_verdict(result.verdict)
    assert result.n_equal + len(result.divergences) == result.n_compared
    if result.n_compared == 0:
        assert result.verdict is ParityVerdict.NOT_ASSESSED
    elif not result.divergences:
        assert result.verdict is ParityVerdict.PASS
    else:
        assert result.verdict in {ParityVerdict.FAIL, ParityVerdict.INCONCLUSIVE}
