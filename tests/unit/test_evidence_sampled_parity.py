"""The distribution test at temperature > 0 (`evidence.sampled_parity`) on outputs of a synthetic target with a
known law (`evidence.sampling_model`): identical laws pass, planted faults fail with the statistic that should
catch them, and a target with nothing to sample hides a fault. The error-rate table is benchmarks/RESULTS.md
section 9."""

from __future__ import annotations

import numpy as np
import pytest

from specselect._evidence.sampled_parity import PromptSamples, Sample, sampled_parity
from specselect._evidence.sampling_model import SamplerSettings, SyntheticModel
from specselect.records.evidence.sampled_parity import SampledParity, SampledParityPolicy, StatisticResult

BASE = SamplerSettings(temperature=0.7)
FAST = SampledParityPolicy(permutations=199)


def _samples(
    candidate: SamplerSettings, *, prompts: int = 8, per_side: int = 16, seed: int = 0, scale: float = 3.0
) -> dict[str, PromptSamples]:
    model = SyntheticModel(scale=scale, seed=1)
    rng = np.random.default_rng(seed)
    return {
        f"p{p}": PromptSamples(model.sample(p, BASE, per_side, rng), model.sample(p, candidate, per_side, rng))
        for p in range(1, prompts + 1)
    }


def _statistic(name: str, parity: SampledParity) -> StatisticResult:
    return next(s for s in parity.statistics if s.name == name)


def test_lossless_speculative_outputs_pass_and_every_statistic_is_reported() -> None:
    result = sampled_parity(_samples(SamplerSettings(temperature=0.7, verification="lossless")), FAST)
    assert result.verdict == "pass"
    assert result.reason is None
    assert {s.name for s in result.statistics} == {"token_frequencies", "distinct_bigrams", "length", "target_logprob"}
    assert result.samples_per_side == (128, 128)
    assert all(s.adjusted_p_value >= s.p_value for s in result.statistics)


def test_greedy_verification_fails_as_a_distribution_mismatch_with_less_diverse_outputs() -> None:
    result = sampled_parity(_samples(SamplerSettings(temperature=0.7, verification="greedy_verification")), FAST)
    assert result.verdict == "fail"
    assert result.reason == "distribution_mismatch"
    assert _statistic("distinct_bigrams", result).direction == "candidate_lower"
    assert result.distinct_outputs[1] < result.distinct_outputs[0]


def test_a_hotter_candidate_fails_and_its_outputs_are_less_likely_under_the_target() -> None:
    result = sampled_parity(_samples(SamplerSettings(temperature=1.0, verification="lossless")), FAST)
    assert result.verdict == "fail"
    logprob = _statistic("target_logprob", result)
    assert logprob.direction == "candidate_lower"
    assert logprob.adjusted_p_value <= 0.05


def test_a_candidate_at_top_p_0_8_fails_with_more_likely_outputs() -> None:
    result = sampled_parity(_samples(SamplerSettings(temperature=0.7, top_p=0.8, verification="lossless")), FAST)
    assert result.verdict == "fail"
    assert _statistic("target_logprob", result).direction == "candidate_higher"


def test_a_near_deterministic_target_hides_a_temperature_fault_and_says_how_little_it_saw() -> None:
    # The test can be wrong: when nearly every output is the argmax path, a hotter candidate's few different
    # outputs are too rare to show in 4 prompts x 4 outputs. The result says so in its distinct-output counts: at
    # most half of each side's 16 outputs differ from one another.
    result = sampled_parity(_samples(SamplerSettings(temperature=1.0), prompts=4, per_side=4, scale=40.0), FAST)
    assert result.verdict == "pass"
    assert max(result.distinct_outputs) <= 8


def test_prompts_with_too_few_outputs_on_a_side_are_left_out_and_none_left_is_not_assessed() -> None:
    one = Sample((5, 6, 0))
    samples = {"a": PromptSamples((one,), (one, one)), "b": PromptSamples((one, one), (one, one))}
    assert sampled_parity(samples, FAST).prompts == ("b",)
    result = sampled_parity({"a": samples["a"]}, FAST)
    assert result.verdict == "not_assessed"
    assert result.reason == "no prompt has 2 or more sampled outputs on each side"


def test_the_same_samples_always_get_the_same_p_values() -> None:
    samples = _samples(SamplerSettings(temperature=0.8), prompts=4, per_side=8)
    assert sampled_parity(samples, FAST) == sampled_parity(samples, FAST)


def test_the_logprob_statistic_needs_logprobs_on_every_output() -> None:
    samples = {
        "a": PromptSamples(
            (Sample((1, 2), (-0.1, -0.2)), Sample((1, 3), None)), (Sample((1, 2), (-0.1, -0.2)), Sample((2, 2)))
        )
    }
    assert "target_logprob" not in {s.name for s in sampled_parity(samples, FAST).statistics}


@pytest.mark.parametrize("seed", [21])
def test_identical_laws_raise_false_alarms_at_about_the_stated_level(seed: int) -> None:
    # 100 A/A runs at a family-wise 5 %: more than 12 fails (binomial tail < 0.3 %) would be a broken null.
    fails = sum(
        sampled_parity(_samples(BASE, prompts=4, per_side=8, seed=seed * 1000 + run), FAST).verdict == "fail"
        for run in range(100)
    )
    assert fails <= 12
