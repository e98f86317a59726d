"""Samples from measured records and pairing by (item_id, repeat)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from specselect._evidence.samples import (
    RequestSample,
    pair_by_launch,
    pair_requests,
    sample_from_record,
    samples_from_records,
)
from specselect.records.telemetry import RequestSpecMetrics


@dataclass(frozen=True)
class Record:
    item_id: str
    repeat: int
    launch: int = 0
    warmup: bool = False
    send_time_s: float = 10.0
    first_token_time_s: float | None = 10.2
    end_time_s: float | None = 12.0
    prompt_tokens: int | None = 20
    completion_tokens: int | None = 64
    output_text: str | None = "out"
    speculative: RequestSpecMetrics | None = field(default=None)
    error: str | None = None


def test_sample_from_record_times_and_spec_metrics() -> None:
    counts = RequestSpecMetrics(num_spec_steps=16, num_draft_tokens=80, num_accepted_draft_tokens=47)
    sample = sample_from_record(Record("a", 1, speculative=counts), category="code")
    assert sample is not None
    assert sample.ttft_s == pytest.approx(0.2)
    assert sample.e2e_s == pytest.approx(2.0)
    assert sample.decode_s == pytest.approx(1.8)
    assert sample.category == "code"
    assert (sample.launch, sample.prompt_tokens) == (0, 20)
    assert sample.spec == RequestSpecMetrics(num_spec_steps=16, num_draft_tokens=80, num_accepted_draft_tokens=47)


def test_warmup_and_failed_records_are_skipped() -> None:
    records = [Record("a", 0), Record("a", 0, warmup=True), Record("b", 0, error="timeout"), Record("c", 0)]
    samples = samples_from_records(records, categories={"c": "prose"})
    assert [(s.item_id, s.category) for s in samples] == [("a", None), ("c", "prose")]


def test_missing_first_token_leaves_ttft_and_decode_null() -> None:
    sample = sample_from_record(Record("a", 0, first_token_time_s=None))
    assert sample is not None
    assert sample.ttft_s is None
    assert sample.decode_s is None
    assert sample.e2e_s == pytest.approx(2.0)


def test_pairing_sorted_with_unpaired_and_duplicates() -> None:
    base = [RequestSample(item_id="b", repeat=0, category="k"), RequestSample(item_id="a", repeat=0)]
    base.append(RequestSample(item_id="a", repeat=0, completion_tokens=5))
    cand = [RequestSample(item_id="a", repeat=0, category="c"), RequestSample(item_id="c", repeat=1)]
    pairing = pair_requests(base, cand)
    assert [(p.item_id, p.repeat, p.category) for p in pairing.pairs] == [("a", 0, "c")]
    assert pairing.pairs[0].baseline.completion_tokens is None
    assert pairing.baseline_only == (("b", 0),)
    assert pairing.candidate_only == (("c", 1),)
    assert pairing.duplicates == (("a", 0),)


def test_samples_remember_the_launch_that_measured_them() -> None:
    samples = samples_from_records([Record("a", 0), Record("b", 1)], launch=2)
    assert [(s.item_id, s.launch) for s in samples] == [("a", 2), ("b", 2)]


def test_pairing_refuses_to_mix_launches_instead_of_dropping_one_as_duplicates() -> None:
    base = [RequestSample(item_id="a", repeat=0, launch=0), RequestSample(item_id="a", repeat=0, launch=1)]
    with pytest.raises(ValueError, match=r"baseline samples from launches \[0, 1\].*pair_by_launch"):
        pair_requests(base, [RequestSample(item_id="a", repeat=0)])


def test_pair_by_launch_pairs_baseline_launch_j_with_candidate_launch_j() -> None:
    base = [RequestSample(item_id="a", repeat=0, launch=j, completion_tokens=10 + j) for j in (0, 1)]
    cand = [RequestSample(item_id="a", repeat=0, launch=j, completion_tokens=20 + j) for j in (1, 0)]
    blocks = pair_by_launch(base, cand)
    assert [
        [(p.launch, p.baseline.completion_tokens, p.candidate.completion_tokens) for p in b.pairs] for b in blocks
    ] == [
        [(0, 10, 20)],
        [(1, 11, 21)],
    ]
