"""Input-length segments: items bucketed by prompt tokens over every launch of both sides, each bucket's speedup
with THE speedup's interval, too few items said instead of a number, and the buckets that disagree with the pooled
answer named."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import ValidationError
from test_evidence_pipeline_rounds import evidence, settings
from test_sweep_analysis_crossover import est

from specselect._evidence.rounds.estimate import pair_estimate
from specselect._evidence.samples import RequestPair, RequestSample
from specselect._evidence.segments import bucket_label, input_length_segments, item_lengths, speedup_outcome
from specselect._evidence.stats import throughput_speedup
from specselect.records.evidence.segments import SEGMENT_RULE, InputLengthSegments, SegmentPolicy
from specselect.records.evidence.stats import BootstrapPolicy
from specselect.records.measurement import RequestRecord
from specselect.records.telemetry import RequestSpecMetrics

BOOT = BootstrapPolicy(n_resamples=400, seed=3)
POLICY = SegmentPolicy(min_speedup=1.10)


def pair(
    item: str,
    speedup: float,
    prompt_tokens: int | None,
    *,
    repeat: int = 0,
    spec: RequestSpecMetrics | None = None,
    candidate_prompt_tokens: int | None = None,
) -> RequestPair:
    """Baseline and candidate of one prompt; a little per-item jitter keeps every bootstrap finite."""
    e2e = 2.0 * (1 + 0.013 * (sum(map(ord, item)) % 11) + 0.002 * repeat)
    base = RequestSample(item_id=item, repeat=repeat, prompt_tokens=prompt_tokens, completion_tokens=64, e2e_s=e2e)
    cand = RequestSample(
        item_id=item,
        repeat=repeat,
        prompt_tokens=candidate_prompt_tokens if candidate_prompt_tokens is not None else prompt_tokens,
        completion_tokens=64,
        e2e_s=e2e / speedup,
        spec=spec,
    )
    return RequestPair(item_id=item, repeat=repeat, baseline=base, candidate=cand)


def segments(pairs: Sequence[RequestPair], policy: SegmentPolicy = POLICY) -> InputLengthSegments:
    """The segments of the pairs' baseline and candidate samples."""
    return input_length_segments(
        [p.baseline for p in pairs], [p.candidate for p in pairs], policy=policy, bootstrap=BOOT
    )


def short_loses_long_pays() -> list[RequestPair]:
    """Short prompts (~40 tokens) slower with the candidate, long ones (~300) faster: the pooled answer is mixed."""
    short = [pair(f"s{i}", 0.8, 40 + i, repeat=r) for i in range(4) for r in range(2)]
    long = [pair(f"l{i}", 1.5, 300 + 10 * i, repeat=r) for i in range(4) for r in range(2)]
    return short + long


def test_buckets_disagree_with_the_pooled_answer_where_the_length_decides() -> None:
    result = segments(short_loses_long_pays())
    assert result.pooled.outcome == "unclear"
    assert result.pooled.throughput_speedup is not None
    assert result.pooled.throughput_speedup.low is not None and result.pooled.throughput_speedup.low < 1.10
    short, long = result.segments
    assert (short.label, short.n_items, short.n_pairs, short.outcome) == ("0-63", 4, 8, "loses")
    assert (long.label, long.n_items, long.n_pairs, long.outcome) == ("256-511", 4, 8, "pays")
    assert short.throughput_speedup is not None and short.throughput_speedup.point == pytest.approx(0.8)
    assert long.throughput_speedup is not None and long.throughput_speedup.point == pytest.approx(1.5)
    assert result.disagreeing == ("0-63", "256-511")
    assert (result.paying, result.losing) == (("256-511",), ("0-63",))


def test_buckets_agree_with_the_pooled_answer_when_the_gain_does_not_depend_on_length() -> None:
    pairs = [pair(f"s{i}", 1.5, 40 + i) for i in range(4)] + [pair(f"l{i}", 1.5, 300 + i) for i in range(4)]
    result = segments(pairs)
    assert result.pooled.outcome == "pays"
    assert [s.outcome for s in result.segments] == ["pays", "pays"]
    assert result.disagreeing == ()


def test_the_pooled_part_is_the_scenarios_own_speedup() -> None:
    pairs = short_loses_long_pays()
    result = segments(pairs)
    base, cand = [p.baseline for p in pairs], [p.candidate for p in pairs]
    # One round: the decision's estimator on the items alone (the scenario's own speedup, point and interval).
    assert result.pooled.throughput_speedup == pair_estimate(base, cand, level=BOOT.level).as_ratio_estimate(16)
    assert (result.pooled.label, result.pooled.n_items, result.pooled.n_pairs) == ("all", 8, 16)


def test_a_bucket_with_too_few_items_says_so_instead_of_a_number() -> None:
    spec = RequestSpecMetrics(num_spec_steps=10, num_draft_tokens=30, num_accepted_draft_tokens=24)
    pairs = [pair(f"s{i}", 1.5, 100 + i, spec=spec) for i in range(5)]
    pairs += [pair("x", 3.0, 3000, spec=spec, repeat=r) for r in range(4)]
    result = segments(pairs)
    enough, lone = result.segments
    assert enough.label == "64-127" and enough.outcome == "pays"
    assert enough.acceptance is not None and enough.acceptance.acceptance_rate == pytest.approx(0.8)
    assert (lone.label, lone.n_items, lone.n_pairs) == ("2048-8191", 1, 4)
    assert lone.outcome == "too_few_items"
    assert (lone.throughput_speedup, lone.decode_speedup, lone.acceptance) == (None, None, None)
    assert lone.note is not None and "too few items: 1, at least 3" in lone.note
    # Four repeats of one prompt are one item: repeats do not make a bucket's claim any surer.
    assert result.disagreeing == ()


def test_bucket_edges_halve_below_1k_and_follow_speed_bench_above() -> None:
    lengths = [0, 63, 64, 127, 128, 511, 512, 1023, 1024, 2047, 2048, 8191, 8192, 16383, 16384, 32767, 32768, 10**6]
    pairs = [pair(f"i{n}", 1.2, n) for n in lengths]
    labels = [s.label for s in segments(pairs).segments]
    assert labels == [
        "0-63",
        "64-127",
        "128-255",
        "256-511",
        "512-1023",
        "1024-2047",
        "2048-8191",
        "8192-16383",
        "16384-32767",
        "32768+",
    ]
    assert bucket_label(32768, None) == "32768+"


def test_the_length_is_the_baselines_count_then_the_candidates_and_pairs_without_one_are_counted() -> None:
    pairs = [pair("a", 1.0, 100, candidate_prompt_tokens=900), pair("b", 1.0, None, candidate_prompt_tokens=900)]
    assert item_lengths([p.baseline for p in pairs], [p.candidate for p in pairs]) == {"a": 100, "b": 900}
    unknown = pair("c", 1.0, None)
    assert item_lengths([unknown.baseline], [unknown.candidate]) == {}
    result = segments([unknown, pair("d", 1.0, 10)])
    assert result.n_without_length == 1
    assert [s.label for s in result.segments] == ["0-63"]
    assert result.pooled.n_pairs == 2


def test_the_outcome_rule_reads_the_interval_against_one_and_the_minimum_speedup() -> None:
    assert speedup_outcome(est(1.2, 1.10, 1.40), 6, POLICY) == "pays"
    assert speedup_outcome(est(1.2, 1.02, 1.40), 6, POLICY) == "faster"
    assert speedup_outcome(est(1.2, 0.95, 1.40), 6, POLICY) == "unclear"
    assert speedup_outcome(est(1.2, 1.00, 1.40), 6, POLICY) == "unclear"
    assert speedup_outcome(est(1.2, 0.70, 0.99), 6, POLICY) == "loses"
    assert speedup_outcome(est(1.2, 1.02, 1.40), 6, SegmentPolicy(min_speedup=1.0)) == "pays"
    assert speedup_outcome(est(1.2, 1.10, 1.40), 2, POLICY) == "too_few_items"
    assert speedup_outcome(est(1.0), 6, POLICY) == "no_estimate"
    assert speedup_outcome(None, 6, POLICY) == "no_estimate"


def test_edges_must_be_positive_and_increasing() -> None:
    for edges in ((), (0, 64), (128, 64), (64, 64)):
        with pytest.raises(ValidationError, match="strictly increasing"):
            SegmentPolicy(min_speedup=1.1, edges=edges)


def record(item: str, *, e2e: float, prompt_tokens: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"w-c1:r0:{item}",
        item_id=item,
        scenario="w-c1",
        repeat=0,
        warmup=False,
        send_time_s=0.0,
        first_token_time_s=0.1,
        chunk_times_s=[0.1, e2e],
        chunk_tokens=[1, 31],
        end_time_s=e2e,
        prompt_tokens=prompt_tokens,
        completion_tokens=32,
        output_text="same",
        finish_reason="length",
    )


def test_the_pipeline_judges_buckets_by_the_plans_minimum_speedup_and_states_the_rule() -> None:
    for minimum, outcome in ((1.2, "pays"), (1.4, "faster")):
        policy = settings(min_throughput_speedup=minimum)
        entry = evidence([1.0, 1.0, 1.0], [1 / 1.3, 1 / 1.31, 1 / 1.29], policy=policy).entries[0]
        result = entry.segments
        assert result is not None
        assert [(s.label, s.outcome) for s in result.segments] == [("0-63", outcome)]
        assert result.policy.min_speedup == minimum
        assert result.policy.min_items == policy.bootstrap.min_clusters
        assert result.policy.rule == SEGMENT_RULE
        assert result.level == entry.speedup.level if entry.speedup is not None else False


def two_launches(speedups: tuple[float, float], prompt_tokens: int, prefix: str) -> list[RequestPair]:
    """Four items in two launches per side (launch j measures passes 2j and 2j + 1); launch j of the candidate
    is `speedups[j]` times as fast as the baseline."""
    out: list[RequestPair] = []
    for launch, speedup in enumerate(speedups):
        for i in range(4):
            for r in (2 * launch, 2 * launch + 1):
                p = pair(f"{prefix}{i}", speedup, prompt_tokens + i, repeat=r)
                out.append(
                    p.model_copy(
                        update={
                            "launch": launch,
                            "baseline": p.baseline.model_copy(update={"launch": launch}),
                            "candidate": p.candidate.model_copy(update={"launch": launch}),
                        }
                    )
                )
    return out


def test_over_two_rounds_a_bucket_takes_every_round_and_its_interval_counts_the_launch_spread() -> None:
    # Short prompts lose in both launches; long ones pay 1.5x in one candidate launch but only 1.2x in the other.
    short, long = two_launches((0.8, 0.8), 40, "s"), two_launches((1.5, 1.2), 300, "l")
    result = segments(short + long)
    short_bucket, long_bucket = result.segments
    assert (long_bucket.label, long_bucket.n_items, long_bucket.n_pairs) == ("256-511", 4, 16)
    base, cand = [p.baseline for p in long], [p.candidate for p in long]
    assert long_bucket.throughput_speedup == pair_estimate(base, cand, level=BOOT.level).as_ratio_estimate(16)
    everything = [p.baseline for p in short + long], [p.candidate for p in short + long]
    assert result.pooled.throughput_speedup == pair_estimate(*everything, level=BOOT.level).as_ratio_estimate(32)
    assert result.level == BOOT.level
    # Pooling the 16 pairs as if from one launch hides the spread: the item bootstrap alone would say it pays.
    items_only = throughput_speedup(long, BOOT)
    assert items_only.low is not None and items_only.low >= POLICY.min_speedup
    assert long_bucket.throughput_speedup is not None and long_bucket.throughput_speedup.low is not None
    assert long_bucket.throughput_speedup.low < items_only.low
    assert long_bucket.outcome != "pays"
    assert short_bucket.outcome == "loses"


def test_the_pipelines_segments_over_two_rounds_are_the_scenarios_speedup_bucket_by_bucket() -> None:
    # Every item has the same 7-token prompt: one bucket, which must agree with the scenario's own numbers.
    entry = evidence([1.0, 1.0], [0.8, 0.9]).entries[0]
    assert entry.segments is not None and entry.stats is not None and entry.speedup is not None
    (bucket,) = entry.segments.segments
    # The same point as the decision's; the interval rests on this pair's own round variance (the decision's may
    # be pooled over the run's pairs: here there is only this one).
    assert entry.segments.pooled.throughput_speedup == entry.speedup.as_ratio_estimate(16)
    assert bucket.throughput_speedup == entry.speedup.as_ratio_estimate(16)
    assert (bucket.label, bucket.n_items, bucket.n_pairs) == ("0-63", 4, 16)
    # The decision finds the gain uncertain across rounds, and so does the bucket.
    assert entry.decision.reason == "insufficient_confidence"
    assert bucket.outcome != "pays"
