"""Suffix decoding's cache of earlier responses: launched off unless the plan states it, every measured pass records
what the cache had seen, and a round whose pass drafted from answers to its own prompts is left out of the evidence
(while an off cache, or a learning one that saw none of its prompts, is not)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from test_evidence_pipeline_rounds import BASELINE, group, launch_records, settings
from test_evidence_pipeline_tracks import KEY
from test_report_sample import build_run

from specselect._engines.base import Proposal, Session
from specselect._engines.vllm.specconfig import (
    RESPONSE_CACHE_OPTION,
    build_speculative_config,
    response_cache_setting,
)
from specselect._evidence.pipeline import InMemoryRecords, build_evidence
from specselect._report.data import load_report_data
from specselect._report.tables import measurements_spec
from specselect._report.trust import trust_lines
from specselect._runner.scenario import Measuring
from specselect.records.evidence.result import Evidence
from specselect.records.group import GroupResult
from specselect.records.measurement import RequestRecord
from specselect.records.responsecache import REPLAY_FIX, PassResponseCache, ResponseCacheSetting
from specselect.records.results import EvidenceFile

LEARNING = ResponseCacheSetting(state="learning", option=RESPONSE_CACHE_OPTION, value=10000, stated_by="plan")
OFF = ResponseCacheSetting(state="off", option=RESPONSE_CACHE_OPTION, value=0, stated_by="specselect")


def sent(item: str, repeat: int = 0, *, warmup: bool = False) -> RequestRecord:
    return RequestRecord(
        request_id=f"{item}:{repeat}:{warmup}",
        item_id=item,
        scenario="general@c1",
        repeat=-1 if warmup else repeat,
        warmup=warmup,
    )


def suffix_config(options: dict[str, object]) -> dict[str, object]:
    proposal = Proposal(family="suffix", method="suffix", num_speculative_tokens=5, options=options)
    return build_speculative_config(proposal)


def test_suffix_is_launched_with_its_response_cache_off_unless_the_plan_states_it() -> None:
    default = suffix_config({})
    assert default[RESPONSE_CACHE_OPTION] == 0
    assert response_cache_setting(default, {}) == OFF
    stated = {RESPONSE_CACHE_OPTION: 10000}
    learning = suffix_config(stated)
    assert learning[RESPONSE_CACHE_OPTION] == 10000
    assert response_cache_setting(learning, stated) == LEARNING


def test_a_method_without_a_response_cache_records_none() -> None:
    ngram = build_speculative_config(Proposal(family="ngram", method="ngram", num_speculative_tokens=5))
    assert RESPONSE_CACHE_OPTION not in ngram
    assert response_cache_setting(ngram, {}) is None
    assert response_cache_setting(None, {}) is None


def test_a_warm_up_that_replays_a_measured_prompt_inflates_a_learning_cache() -> None:
    records = [sent("a", warmup=True), sent("a"), sent("b")]
    seen = PassResponseCache.of(LEARNING, Counter(), records)
    assert (seen.earlier_requests, seen.replayed_requests) == (1, 1)
    assert seen.inflated


def test_the_same_pass_with_the_cache_off_is_not_inflated() -> None:
    seen = PassResponseCache.of(OFF, Counter(), [sent("a", warmup=True), sent("a"), sent("b")])
    assert seen.replayed_requests == 1
    assert not seen.inflated


def test_a_learning_cache_on_a_fresh_server_whose_warm_up_is_not_measured_is_not_inflated() -> None:
    seen = PassResponseCache.of(LEARNING, Counter(), [sent("w", warmup=True), sent("a"), sent("b")])
    assert (seen.earlier_requests, seen.replayed_requests) == (1, 0)
    assert not seen.inflated


def test_earlier_passes_and_earlier_repeats_count_as_replays() -> None:
    earlier = Counter({"a": 2})  # an earlier scenario of this launch answered `a` twice
    seen = PassResponseCache.of(LEARNING, earlier, [sent("a", 0), sent("b", 0), sent("b", 1)])
    assert (seen.earlier_requests, seen.replayed_requests) == (2, 2)  # a (earlier pass) and b's second repeat


def candidate_evidence(caches: list[PassResponseCache | None]) -> Evidence:
    """g1 against the baseline over three rounds in which g1 was 25% faster; g1's round j saw `caches[j]`."""
    base, cand = launch_records([1.0, 1.0, 1.0]), launch_records([0.8, 0.81, 0.79])
    measured = group("g1_ngram", cand)
    launches = [measured, *measured.relaunches]
    runs = [launch.scenarios[0].model_copy(update={"response_cache": caches[j]}) for j, launch in enumerate(launches)]
    relaunches = tuple(r.model_copy(update={"scenarios": (runs[j + 1],)}) for j, r in enumerate(measured.relaunches))
    result = GroupResult.model_validate(
        {**measured.model_dump(), "scenarios": (runs[0],), "relaunches": relaunches}, strict=False
    )
    store = InMemoryRecords.of({(BASELINE, KEY.name): base, ("g1_ngram", KEY.name): cand})
    return build_evidence([group(BASELINE, base), result], [KEY], records=store, categories={}, settings=settings())


def test_a_round_whose_learning_cache_replayed_its_prompts_is_left_out_and_named() -> None:
    replayed = PassResponseCache(setting=LEARNING, earlier_requests=9, replayed_requests=8)
    fresh = PassResponseCache(setting=LEARNING, earlier_requests=1, replayed_requests=0)
    entry = candidate_evidence([fresh, replayed, fresh]).entries[0]
    assert entry.speedup is not None and entry.speedup.rounds == (0, 2)
    assert "had answered 8 of the measured prompts before" in entry.speedup.excluded_rounds[1]
    assert "suffix_decoding_max_cached_requests=10000" in entry.speedup.excluded_rounds[1]


def test_passes_with_the_cache_off_keep_every_round_even_when_prompts_were_replayed() -> None:
    off = PassResponseCache(setting=OFF, earlier_requests=9, replayed_requests=8)
    entry = candidate_evidence([off, off, off]).entries[0]
    assert entry.speedup is not None and entry.speedup.rounds == (0, 1, 2)
    assert dict(entry.speedup.excluded_rounds) == {}
    assert entry.decision.decision.value == "accept"


@pytest.mark.parametrize("replays", [1, 5])
def test_a_candidate_that_replayed_in_every_round_cannot_be_accepted(replays: int) -> None:
    replayed = PassResponseCache(setting=LEARNING, earlier_requests=replays, replayed_requests=replays)
    entry = candidate_evidence([replayed, replayed, replayed]).entries[0]
    assert entry.evidence.evidence_status.value == "incomplete"
    assert "uncontaminated_measurement" in entry.evidence.missing_evidence
    assert entry.decision.decision.value != "accept"


def test_a_launch_counts_every_pass_it_served_and_a_later_launch_starts_fresh() -> None:
    def launch(index: int) -> Measuring:
        fields: dict[str, Any] = {"plan": None, "layout": None, "records": None, "progress": None}
        return Measuring(group="g8_suffix_learning", launch=index, **fields)

    session = cast(Session, SimpleNamespace(response_cache=LEARNING))
    first = launch(0)
    low = first.response_cache(session, [sent("w", warmup=True), sent("a"), sent("b")])
    high = first.response_cache(session, [sent("w", warmup=True), sent("a"), sent("b")])  # the next level
    assert low is not None and not low.inflated
    assert high is not None and high.inflated and (high.earlier_requests, high.replayed_requests) == (4, 2)
    again = launch(1).response_cache(session, [sent("w", warmup=True), sent("a"), sent("b")])
    assert again == low
    assert launch(0).response_cache(cast(Session, SimpleNamespace(response_cache=None)), [sent("a")]) is None


def test_the_report_shows_each_passs_cache_state_next_to_its_acceptance(tmp_path: Path) -> None:
    data = load_report_data(build_run(tmp_path / "run").root)
    replayed = PassResponseCache(setting=LEARNING, earlier_requests=7, replayed_requests=6)
    off = PassResponseCache(setting=OFF, earlier_requests=7, replayed_requests=6)
    for cache, shown in ((off, "; response cache off"), (replayed, "; response cache learning, 6 replayed: inflated")):
        groups = [
            g.model_copy(
                update={"scenarios": tuple(s.model_copy(update={"response_cache": cache}) for s in g.scenarios)}
            )
            for g in data.groups
        ]
        table = measurements_spec(replace(data, groups=groups))
        assert table is not None and table.rows[1][-1] == f"0.54 (len 3.17){shown}"


def test_the_closing_lines_say_to_turn_the_cache_off_not_to_find_a_quiet_machine() -> None:
    replayed = PassResponseCache(setting=LEARNING, earlier_requests=1, replayed_requests=1)
    fresh = PassResponseCache(setting=LEARNING, earlier_requests=1, replayed_requests=0)
    every = trust_lines(cast(EvidenceFile, candidate_evidence([replayed, replayed, replayed])), None)
    one = trust_lines(cast(EvidenceFile, candidate_evidence([fresh, replayed, fresh])), None)
    assert len(every) == 1 and "no trusted round" in every[0] and every[0].endswith(REPLAY_FIX)
    assert len(one) == 1 and "decided on 2 rounds" in one[0] and one[0].endswith(REPLAY_FIX)
    assert trust_lines(cast(EvidenceFile, candidate_evidence([fresh, fresh, fresh])), None) == []
