"""Temperature-0 parity: per request, per scenario, baseline noise floor and near-tie classification."""

from __future__ import annotations

import pytest

from specselect._evidence.parity import (
    CHARACTER_LEVEL_NOTE,
    Output,
    baseline_consistency,
    classify_divergence,
    compare_outputs,
    compare_text,
    compare_tokens,
    has_token_ids,
    outputs_for_parity,
    quality_ok_from_verdict,
    scenario_parity,
)
from specselect._evidence.samples import RequestKey
from specselect.records.evidence.parity import ParityPolicy, ParityVerdict
from specselect.records.measurement import ErrorKind, RequestRecord


def test_equal_tokens() -> None:
    result = compare_tokens([5, 6, 7], [5, 6, 7])
    assert result.equal
    assert result.first_divergence is None
    assert result.lcp_tokens == 3
    assert (result.base_len, result.cand_len, result.unit) == (3, 3, "token")


def test_differing_tokens_report_the_first_divergence() -> None:
    result = compare_tokens([1, 2, 3, 4, 5], [1, 2, 3, 9, 5])
    assert not result.equal
    assert result.first_divergence == 3
    assert result.lcp_tokens == 3


@pytest.mark.parametrize(("base", "cand"), [([1, 2, 3], [1, 2, 3, 4]), ([1, 2, 3, 4], [1, 2, 3])])
def test_strict_prefix_diverges_at_the_shorter_length(base: list[int], cand: list[int]) -> None:
    result = compare_tokens(base, cand)
    assert not result.equal
    assert result.first_divergence == 3
    assert result.lcp_tokens == 3
    assert {result.base_len, result.cand_len} == {3, 4}


def test_empty_outputs_are_equal_and_empty_vs_nonempty_diverges_at_zero() -> None:
    assert compare_tokens([], []).equal
    assert compare_tokens([], [1]).first_divergence == 0


def test_text_fallback_is_character_level() -> None:
    result = compare_text("hello world", "hello there")
    assert not result.equal
    assert result.first_divergence == 6
    assert result.unit == "character"
    assert result.lcp_tokens is None
    assert result.lcp_chars == 6
    assert result.note == CHARACTER_LEVEL_NOTE


def test_compare_outputs_picks_tokens_or_text_and_refuses_mixed() -> None:
    tokens = compare_outputs([1, 2], [1, 2])
    text = compare_outputs("ab", "ab")
    assert tokens is not None
    assert tokens.unit == "token"
    assert text is not None
    assert text.unit == "character"
    assert compare_outputs("ab", [1, 2]) is None
    assert compare_outputs(None, [1, 2]) is None


def test_all_equal_passes() -> None:
    base = {("a", 0): [1, 2, 3], ("a", 1): [1, 2, 3], ("b", 0): [4, 5]}
    result = scenario_parity(base, dict(base))
    assert result.verdict is ParityVerdict.PASS
    assert result.quality_ok is True
    assert result.match_share == 1.0
    assert result.n_compared == 3
    assert result.divergences == ()
    assert result.baseline_consistency.noise_floor == 0.0


def test_mismatch_with_self_consistent_baseline_fails() -> None:
    base = {("a", 0): [1, 2, 3], ("a", 1): [1, 2, 3], ("b", 0): [4, 5, 6], ("b", 1): [4, 5, 6]}
    cand = {("a", 0): [1, 2, 3], ("a", 1): [1, 2, 3], ("b", 0): [4, 9, 6], ("b", 1): [4, 5, 6, 7]}
    result = scenario_parity(base, cand)
    assert result.verdict is ParityVerdict.FAIL
    assert result.quality_ok is False
    assert result.reason == "mismatch_with_self_consistent_baseline"
    assert result.match_share == 0.5
    assert [(d.item_id, d.repeat, d.parity.first_divergence) for d in result.divergences] == [("b", 0, 1), ("b", 1, 3)]
    assert result.min_first_divergence == 1
    assert result.median_first_divergence == 2.0
    assert all(d.baseline_consistent is True and d.attribution == "unexplained" for d in result.divergences)


def test_mismatch_where_the_baseline_disagrees_with_itself_is_inconclusive() -> None:
    base = {("a", 0): [1, 2, 3], ("a", 1): [1, 2, 8], ("b", 0): [4, 5], ("b", 1): [4, 5]}
    cand = {("a", 0): [1, 2, 9], ("a", 1): [1, 2, 8], ("b", 0): [4, 5], ("b", 1): [4, 5]}
    result = scenario_parity(base, cand)
    assert result.verdict is ParityVerdict.INCONCLUSIVE
    assert result.quality_ok is None
    assert result.reason == "mismatches_within_baseline_noise"
    assert result.baseline_consistency.noise_floor == 0.5
    assert result.baseline_consistency.inconsistent_items == ("a",)
    assert result.divergences[0].attribution == "baseline_noise"


def test_noise_on_other_items_does_not_excuse_a_mismatch() -> None:
    base = {("a", 0): [1], ("a", 1): [2], ("b", 0): [4, 5], ("b", 1): [4, 5]}
    cand = {("a", 0): [1], ("a", 1): [2], ("b", 0): [4, 6], ("b", 1): [4, 5]}
    assert scenario_parity(base, cand).verdict is ParityVerdict.FAIL


def test_mismatch_without_baseline_repeats_fails_by_the_contract_rule() -> None:
    result = scenario_parity({("a", 0): [1, 2]}, {("a", 0): [1, 3]})
    assert result.verdict is ParityVerdict.FAIL
    assert result.reason == "mismatch_without_baseline_repeats"
    assert result.baseline_consistency.noise_floor is None


@pytest.mark.parametrize(
    ("base", "cand"),
    [
        ({}, {}),
        ({("a", 0): [1]}, {("b", 0): [1]}),
        ({("a", 0): None}, {("a", 0): [1]}),
        ({("a", 0): "x"}, {("a", 0): [1]}),
    ],
)
def test_nothing_to_compare_is_not_assessed(base: dict[RequestKey, Output], cand: dict[RequestKey, Output]) -> None:
    result = scenario_parity(base, cand)
    assert result.verdict is ParityVerdict.NOT_ASSESSED
    assert result.quality_ok is None
    assert result.match_share is None


def test_unpaired_and_uncomparable_requests_are_counted() -> None:
    base = {("a", 0): [1], ("b", 0): None, ("c", 0): [3]}
    cand = {("a", 0): [1], ("b", 0): [2], ("d", 0): [4]}
    result = scenario_parity(base, cand)
    assert (result.n_compared, result.n_baseline_only, result.n_candidate_only, result.n_not_comparable) == (1, 1, 1, 1)
    assert result.verdict is ParityVerdict.PASS


def test_text_scenario_reports_character_unit() -> None:
    result = scenario_parity({("a", 0): "the cat"}, {("a", 0): "the dog"})
    assert result.unit == "character"
    assert result.min_first_divergence == 4


def test_classify_divergence() -> None:
    assert classify_divergence([-0.69, -0.70]) == "near_tie"
    assert classify_divergence([-3.0, -0.1]) == "real_difference"
    assert classify_divergence([-0.1, -0.3], threshold_nats=0.5) == "near_tie"
    assert classify_divergence([-0.1]) is None
    assert classify_divergence([float("nan"), -0.2]) is None


def test_near_tie_divergence_is_inconclusive_and_policy_is_recorded() -> None:
    base = {("a", 0): [1, 2, 3]}
    cand = {("a", 0): [1, 7, 3]}
    near = scenario_parity(base, cand, baseline_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.70, -0.72], [0.0, -9.0]]})
    assert near.verdict is ParityVerdict.INCONCLUSIVE
    assert near.reason == "mismatches_are_near_ties"
    divergence = near.divergences[0]
    assert divergence.classification == "near_tie"
    assert divergence.logprob_gap_nats == pytest.approx(0.02)
    assert near.policy.near_tie_threshold_nats == 0.1

    real = scenario_parity(base, cand, baseline_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.05, -3.0]]})
    assert real.verdict is ParityVerdict.FAIL
    assert real.divergences[0].classification == "real_difference"

    strict = scenario_parity(
        base,
        cand,
        baseline_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.70, -0.72]]},
        policy=ParityPolicy(near_tie_is_numerics=False),
    )
    assert strict.verdict is ParityVerdict.FAIL
    assert strict.divergences[0].classification == "near_tie"
    assert strict.policy.near_tie_is_numerics is False


def test_the_candidates_pass_judges_a_divergence_when_the_baseline_ran_none() -> None:
    base = {("a", 0): [1, 2, 3]}
    cand = {("a", 0): [1, 7, 3]}
    near = scenario_parity(base, cand, candidate_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.70, -0.72]]})
    (divergence,) = near.divergences
    assert (divergence.classification, divergence.logprob_source) == ("near_tie", "candidate")
    assert near.verdict is ParityVerdict.INCONCLUSIVE
    # With both passes the baseline's logprobs judge (here: a real difference).
    both = scenario_parity(
        base,
        cand,
        baseline_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.05, -3.0]]},
        candidate_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.70, -0.72]]},
    )
    assert (both.divergences[0].classification, both.divergences[0].logprob_source) == ("real_difference", "baseline")
    # A baseline pass too short to reach the divergence falls back to the candidate's.
    short = scenario_parity(
        base,
        cand,
        baseline_top_logprobs={("a", 0): [[-0.01, -5.0]]},
        candidate_top_logprobs={("a", 0): [[-0.01, -5.0], [-0.70, -0.72]]},
    )
    assert short.divergences[0].logprob_source == "candidate"


def test_logprobs_missing_at_the_divergence_leave_it_unclassified() -> None:
    result = scenario_parity({("a", 0): [1, 2]}, {("a", 0): [1, 3]}, baseline_top_logprobs={("a", 0): [[-0.1, -0.2]]})
    assert result.divergences[0].classification is None
    assert result.verdict is ParityVerdict.FAIL


def test_baseline_consistency_ignores_single_repeats_and_failed_outputs() -> None:
    result = baseline_consistency({("a", 0): [1], ("b", 0): [1], ("b", 1): None, ("c", 0): [2], ("c", 1): [2]})
    assert result.n_items_checked == 1
    assert result.noise_floor == 0.0


def test_verdict_to_quality_ok() -> None:
    assert quality_ok_from_verdict(ParityVerdict.PASS) is True
    assert quality_ok_from_verdict(ParityVerdict.FAIL) is False
    assert quality_ok_from_verdict(ParityVerdict.INCONCLUSIVE) is None
    assert quality_ok_from_verdict(ParityVerdict.NOT_ASSESSED) is None


def test_result_round_trips_through_json() -> None:
    from specselect.records.evidence.parity import ScenarioParity

    result = scenario_parity({("a", 0): [1, 2], ("a", 1): [1, 2]}, {("a", 0): [1, 3], ("a", 1): [1, 2]})
    again = ScenarioParity.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.schema_version == 1


def _record(
    item: str, repeat: int, ids: list[int] | None, *, warmup: bool = False, failed: bool = False
) -> RequestRecord:
    return RequestRecord(
        request_id=f"{item}{repeat}{warmup}",
        item_id=item,
        scenario="s",
        repeat=repeat,
        warmup=warmup,
        output_token_ids=ids,
        output_text=" ".join(map(str, ids or [])),
        error="boom" if failed else None,
        error_kind=ErrorKind.HTTP_ERROR if failed else None,
    )


def test_outputs_for_parity_key_by_request_skip_warmup_and_map_failures_to_none() -> None:
    records = [
        _record("a", 0, [9], warmup=True),
        _record("a", 0, [1, 2]),
        _record("a", 0, [7]),  # a second record for the same key: the first one counts
        _record("b", 0, None, failed=True),
        _record("c", 1, [3]),
    ]
    assert outputs_for_parity(records, tokens=True) == {("a", 0): [1, 2], ("b", 0): None, ("c", 1): [3]}
    assert outputs_for_parity(records, tokens=False) == {("a", 0): "1 2", ("b", 0): None, ("c", 1): "3"}
    assert has_token_ids(records)
    assert not has_token_ids([_record("a", 0, None)])
    assert not has_token_ids([_record("a", 0, [1], warmup=True)])  # nothing measured: no exact parity either
